"""POST /v1/events: producers publish; every accepted event is delivered, dead-lettered or visibly cancelled."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from hookrelay import wiring
from hookrelay.adapters.telemetry import METRICS_NAMESPACE
from hookrelay.functions import INGEST
from hookrelay.handlers import tracing
from hookrelay.handlers.http import install_problem_handlers, json_response, parse_body, require
from hookrelay.handlers.idempotency import IdempotentCommand, register_lambda_context
from hookrelay.handlers.publish_schemas import PublishEvent
from hookrelay.services.ingest import Accepted

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
    )


publish_once = IdempotentCommand(publish, Accepted)


@app.post("/v1/events")
@tracer.capture_method(capture_response=False)
def post_event() -> Response[str]:
    who = require(app, producer=True)
    accepted = publish_once(app, who, parse_body(app, PublishEvent))
    metrics.add_metric(name="EventsAccepted", unit=MetricUnit.Count, value=1)
    metrics.add_metric(name="DeliveriesCreated", unit=MetricUnit.Count, value=len(accepted.delivery_ids))
    return json_response(202, accepted.model_dump())


@logger.inject_lambda_context
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    register_lambda_context(context)
    return app.resolve(event, context)
