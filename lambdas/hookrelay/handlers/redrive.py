"""The redrive Lambda: redrive jobs from SQS, one page of a redrive per message.

Each page re-enqueues the next, so a redrive of tens of thousands of deliveries runs as a chain of
short invocations instead of one API call. Partial batch responses: a failed job comes back alone.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from hookrelay import wiring
from hookrelay.adapters.redrive_sqs import parse_job
from hookrelay.adapters.telemetry import METRICS_NAMESPACE
from hookrelay.functions import REDRIVE
from hookrelay.handlers import tracing
from hookrelay.handlers.sqs_batch import PartialBatchResponse, SqsMessage, process_batch

logger = Logger(service=REDRIVE.name)
tracer = tracing.tracer(REDRIVE.name)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=REDRIVE.name)


def run(record: SqsMessage) -> None:
    job = parse_job(record.body)
    redelivered = record.approximate_receive_count > 1
    wiring.redrive_job_runner().run(job, redelivered=redelivered)
    logger.info("redrive page", extra={"redrive_id": job.redrive_id, "page": job.page})
    metrics.add_metric(name="RedrivePages", unit=MetricUnit.Count, value=1)


@logger.inject_lambda_context
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialBatchResponse:
    return process_batch(event, run, logger, fifo=False)
