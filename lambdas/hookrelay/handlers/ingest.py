"""POST /v1/events and /v1/events/batch: producers publish; every accepted event is delivered, dead-lettered or
visibly cancelled."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from hookrelay import wiring
from hookrelay.adapters.telemetry import METRICS_NAMESPACE
from hookrelay.domain import trace_context
from hookrelay.domain.api_keys import Principal
from hookrelay.domain.errors import IdempotencyKeyReused
from hookrelay.domain.trace_context import TRACEPARENT_HEADER, TRACESTATE_HEADER, TraceContext
from hookrelay.functions import INGEST
from hookrelay.handlers import tracing
from hookrelay.handlers.http import (
    MAX_BODY_BYTES,
    ProblemError,
    compact_size,
    install_problem_handlers,
    json_response,
    parse_body,
    problem_document,
    problem_extra,
    problem_kind,
    require,
    validation_errors,
)
from hookrelay.handlers.idempotency import IdempotentCommand, register_lambda_context
from hookrelay.handlers.publish_schemas import MAX_BATCH_BYTES, PublishBatch, PublishBatchItem, PublishEvent
from hookrelay.services.ingest import (
    Accepted,
    BatchAccepted,
    BatchItem,
    ItemOutcome,
)
from hookrelay.services.ports import BATCH_ITEMS_REFUSED, DELIVERIES_CREATED, EVENTS_ACCEPTED

logger = Logger(service=INGEST.name)
tracer = tracing.tracer(INGEST.name)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=INGEST.name)
app = APIGatewayHttpResolver()
install_problem_handlers(app)


def publish(request: PublishEvent, request_key: str | None) -> Accepted:
    return wiring.ingest_service().publish(
        tenant_id=request.tenant_id,
        event_type=request.type,
        data=request.data,
        ordering_key=request.ordering_key,
        request_key=request_key,
        trace=request_trace(),
    )


def request_trace() -> TraceContext | None:
    """The producer's W3C trace context (`traceparent`, `tracestate` headers), joined to the platform's own trace;
    None when absent or malformed (ignored, as the spec says: the event gets a trace of its own)."""
    headers = app.current_event.headers
    trace = trace_context.parse(headers.get(TRACEPARENT_HEADER), headers.get(TRACESTATE_HEADER))
    if trace is not None:
        tracer.put_annotation(tracing.W3C_TRACE_ID, trace.trace_id)
    return trace


publish_once = IdempotentCommand(publish, Accepted)


@app.post("/v1/events")
@tracer.capture_method(capture_response=False)
def post_event() -> Response[str]:
    who = require(app, producer=True)
    accepted = publish_once(app, who, parse_body(app, PublishEvent))
    metrics.add_metric(name=EVENTS_ACCEPTED, unit=MetricUnit.Count, value=1)
    metrics.add_metric(name=DELIVERIES_CREATED, unit=MetricUnit.Count, value=len(accepted.delivery_ids))
    return json_response(202, accepted.answer())


@app.post("/v1/events/batch")
@tracer.capture_method(capture_response=False)
def post_batch() -> Response[str]:
    """200 with one result per event, in order: 202 and the event's ids, or the problem that refused it. The
    whole request is refused (400, 413, 422) only when it is no batch at all: bad JSON, over 1 MiB, no events or
    more than 100, an unknown tenant."""
    who = require(app, producer=True)
    if "idempotency-key" in app.current_event.headers:  # refused rather than ignored: it would promise too much
        detail = "a batch takes no Idempotency-Key header: give each event its own idempotency_key"
        raise ProblemError(400, "Invalid Idempotency-Key", detail, "idempotency-key")
    batch = parse_body(app, PublishBatch, max_bytes=MAX_BATCH_BYTES)
    results: list[dict[str, Any]] = [{} for _ in batch.events]
    valid: list[tuple[int, BatchItem]] = []
    keys: set[str] = set()
    trace = request_trace()  # every item's, unless the item gives its own
    for position, raw in enumerate(batch.events):
        item = batch_item(who, position, raw, keys, trace)
        if isinstance(item, BatchItem):
            valid.append((position, item))
        else:
            results[position] = item
    outcomes = wiring.ingest_service().publish_batch(tenant_id=batch.tenant_id, items=[item for _, item in valid])
    for (position, _), outcome in zip(valid, outcomes, strict=True):
        results[position] = item_result(outcome)
    accepted = [outcome for outcome in outcomes if isinstance(outcome, BatchAccepted)]
    metrics.add_metric(name=EVENTS_ACCEPTED, unit=MetricUnit.Count, value=len(accepted))
    metrics.add_metric(name=BATCH_ITEMS_REFUSED, unit=MetricUnit.Count, value=len(results) - len(accepted))
    metrics.add_metric(name=DELIVERIES_CREATED, unit=MetricUnit.Count, value=sum(len(a.delivery_ids) for a in accepted))
    return json_response(200, {"accepted": len(accepted), "refused": len(results) - len(accepted), "results": results})


def batch_item(
    who: Principal, position: int, raw: Any, keys: set[str], trace: TraceContext | None = None
) -> BatchItem | dict[str, Any]:
    """The item, validated on its own; or the problem document that refuses it in its place. Its trace: its own
    `traceparent` (and `tracestate`) when valid, else the request's (`trace`), else one the platform starts."""
    if compact_size(raw) > MAX_BODY_BYTES:
        return problem_document(
            413, "Payload too large", f"each event must be at most {MAX_BODY_BYTES} bytes", "too-large"
        )
    try:
        item = PublishBatchItem.model_validate(raw)
    except ValidationError as error:
        errors = [e | {"field": f"events.{position}.{e['field']}".rstrip(".")} for e in validation_errors(error)]
        return problem_document(422, "Invalid request", "the event failed validation", "validation", errors=errors)
    key = None
    if item.idempotency_key is not None:
        if item.idempotency_key in keys:
            return item_result(IdempotencyKeyReused("an earlier event of this batch has the same idempotency key"))
        keys.add(item.idempotency_key)
        key = f"{who.key_id}:{item.idempotency_key}"  # scoped to the caller, as the single route's keys are
    own = trace_context.parse(item.traceparent, item.tracestate)
    return BatchItem(event_type=item.type, data=item.data, ordering_key=item.ordering_key, key=key, trace=own or trace)


def item_result(outcome: ItemOutcome) -> dict[str, Any]:
    if isinstance(outcome, BatchAccepted):
        return {"status": 202, **outcome.answer()}
    return problem_document(
        outcome.status, outcome.title, outcome.detail, problem_kind(outcome), **problem_extra(outcome)
    )


@logger.inject_lambda_context
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    register_lambda_context(context)
    return app.resolve(event, context)
