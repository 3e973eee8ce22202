"""POST /v1/events: producers publish; every accepted event is delivered, dead-lettered or visibly cancelled."""

from __future__ import annotations

import os
from dataclasses import asdict
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

from hookrelay import wiring
from hookrelay.adapters import aws, schema
from hookrelay.handlers.http import ProblemError, install_problem_handlers, json_response, parse_body, require
from hookrelay.handlers.schemas import PublishEvent

logger = Logger(service="ingest")
tracer = Tracer(service="ingest")
metrics = Metrics(namespace="Hookrelay", service="ingest")
app = APIGatewayHttpResolver()
install_problem_handlers(app)

IDEMPOTENCY_WINDOW_SECONDS = 24 * 3600
IDEMPOTENCY = IdempotencyConfig(
    event_key_jmespath="idempotency_key",
    payload_validation_jmespath="request",
    expires_after_seconds=IDEMPOTENCY_WINDOW_SECONDS,
)


def publish(command: dict[str, Any]) -> dict[str, Any]:
    request = command["request"]
    accepted = wiring.ingest_service().publish(
        tenant_id=request["tenant_id"],
        event_type=request["type"],
        data=request["data"],
        ordering_key=request.get("ordering_key"),
    )
    return asdict(accepted)


@cache
def idempotent_publish() -> Any:
    """`publish` behind Powertools idempotency: the same key and body answer the same ids, once."""
    persistence = DynamoDBPersistenceLayer(
        table_name=os.environ[schema.IDEMPOTENCY.env_var], boto3_client=aws.client("dynamodb")
    )
    return idempotent_function(data_keyword_argument="command", persistence_store=persistence, config=IDEMPOTENCY)(
        publish
    )


@app.post("/v1/events")
@tracer.capture_method
def post_event() -> Response:
    who = require(app, producer=True)
    request = parse_body(app, PublishEvent).model_dump()
    key = app.current_event.headers.get("idempotency-key")
    if key is None:
        result = publish(command={"request": request})
    else:
        if not 1 <= len(key) <= 255:
            raise ProblemError(400, "Invalid Idempotency-Key", "the key must be 1 to 255 characters", "idempotency-key")
        try:
            # Scoped to the calling key: two producers can never collide on each other's keys.
            result = idempotent_publish()(command={"idempotency_key": f"{who.key_id}:{key}", "request": request})
        except IdempotencyValidationError:
            raise ProblemError(
                422, "Idempotency-Key reused", "this key was used with a different body", "idempotency-mismatch"
            ) from None
        except IdempotencyAlreadyInProgressError:
            raise ProblemError(
                409, "Request in progress", "a request with this key is still being processed", "idempotency-in-flight"
            ) from None
    metrics.add_metric(name="EventsAccepted", unit=MetricUnit.Count, value=1)
    metrics.add_metric(name="DeliveriesCreated", unit=MetricUnit.Count, value=len(result["delivery_ids"]))
    return json_response(202, result)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    IDEMPOTENCY.register_lambda_context(context)
    return app.resolve(event, context)
