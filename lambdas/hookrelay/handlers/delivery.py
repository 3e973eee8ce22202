"""The delivery Lambda: SQS FIFO batches in, one attempt per message, partial batch failures out.

Message groups (one per endpoint slot) are processed in parallel threads and in order within each
group, so a hanging endpoint in the batch never holds up another endpoint's deliveries.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from hookrelay import wiring
from hookrelay.adapters.sqs import parse_message

logger = Logger(service="delivery")
tracer = Tracer(service="delivery")
metrics = Metrics(namespace="Hookrelay", service="delivery")


def deliver(record: SQSRecord) -> None:
    attributes = record.attributes
    message = parse_message(record.body, attributes.message_group_id or "", attributes.message_deduplication_id or "")
    report = wiring.delivery_service().attempt(message)
    logger.info(
        "attempt",
        extra={
            "delivery_id": report.delivery_id,
            "attempt": report.attempt,
            "status": report.status,
            "sent": report.sent,
        },
    )
    if report.sent:
        metrics.add_metric(name=f"Attempts_{report.status.value}", unit=MetricUnit.Count, value=1)


def _process_group(records: list[dict[str, Any]], context: LambdaContext) -> list[dict[str, str]]:
    # skip_group_on_error: after a failure, the group's later messages are returned too, keeping order.
    processor = SqsFifoPartialProcessor(skip_group_on_error=True)
    result = process_partial_response({"Records": records}, deliver, processor, context)
    return result["batchItemFailures"]


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in event.get("Records", []):
        groups.setdefault(record.get("attributes", {}).get("MessageGroupId", ""), []).append(record)
    if len(groups) <= 1:
        failures = [f for records in groups.values() for f in _process_group(records, context)]
    else:
        with ThreadPoolExecutor(max_workers=len(groups)) as pool:
            results = pool.map(lambda records: _process_group(records, context), groups.values())
            failures = [f for group_failures in results for f in group_failures]
    return {"batchItemFailures": failures}
