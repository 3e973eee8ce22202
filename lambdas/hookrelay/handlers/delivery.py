"""The delivery Lambda: SQS FIFO messages in, one attempt per message, partial batch failures out.

The event source hands it one message at a time (`functions.DELIVERY`'s batch size), so a hanging endpoint
only ever holds its own message group; FIFO concurrency scales with the groups instead.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from hookrelay import wiring
from hookrelay.adapters.sqs import parse_queue_message
from hookrelay.adapters.telemetry import METRICS_NAMESPACE, attempts_metric
from hookrelay.domain.status import DeliveryStatus
from hookrelay.functions import DELIVERY
from hookrelay.handlers import tracing
from hookrelay.handlers.sqs_batch import PartialBatchResponse, SqsMessage, process_batch
from hookrelay.services.ports import CircuitCommand

logger = Logger(service=DELIVERY.name)
tracer = tracing.tracer(DELIVERY.name)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=DELIVERY.name)


def deliver(record: SqsMessage) -> None:
    message = parse_queue_message(record.body, record.message_group_id, record.message_deduplication_id)
    if isinstance(message, CircuitCommand):
        following = wiring.circuit_service().handle(message)
        logger.info(
            "circuit command",
            extra={"endpoint_id": message.endpoint_id, "command": message.kind, "next": following.kind},
        )
        return
    report = wiring.delivery_service().attempt(message)
    fields = {
        "delivery_id": report.delivery_id,
        "attempt": report.attempt,
        "status": report.status,
        "sent": report.sent,
        "parked": report.parked,
    }
    if report.sent and report.status is not None:  # sent: an attempt was made, so the delivery exists
        metrics.add_metric(name=attempts_metric(report.status), unit=MetricUnit.Count, value=1)
    if report.sent and report.status is DeliveryStatus.DELIVERED:
        # Delivered: one log line, the metrics record, which carries the attempt (searchable in Logs Insights).
        for name, value in fields.items():
            metrics.add_metadata(key=name, value=value)
        return
    logger.info("attempt", extra=fields)


@logger.inject_lambda_context
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialBatchResponse:
    # FIFO: a failed message and every later one of the batch are returned, keeping the queue's order. The event
    # source hands over one message at a time (functions.DELIVERY's batch size), so there is no "later one".
    return process_batch(event, deliver, logger, fifo=True)
