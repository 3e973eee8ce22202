"""The redrive Lambda: redrive jobs from SQS, one page of a redrive (or one dead-letter drain) per message.

Each page re-enqueues the next, so a redrive of tens of thousands of deliveries runs as a chain of
short invocations instead of one API call. Partial batch responses: a failed job comes back alone.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from hookrelay import wiring
from hookrelay.adapters.redrive_sqs import parse_job
from hookrelay.adapters.telemetry import METRICS_NAMESPACE
from hookrelay.functions import REDRIVE
from hookrelay.services.ports import RedriveJob
from hookrelay.services.redrive import DEAD_LETTERS_JOB, REDRIVE_JOB

logger = Logger(service=REDRIVE.name)
tracer = Tracer(service=REDRIVE.name)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=REDRIVE.name)
# Messages a dead-letter drain handles per invocation before handing the rest to a fresh job.
DRAIN_BUDGET = 500


def run(record: SQSRecord) -> None:
    job = parse_job(record.body)
    redelivered = int(record.attributes.approximate_receive_count) > 1
    if job.kind == REDRIVE_JOB and job.redrive_id:
        wiring.redrive_service().run_page(job.redrive_id, job.page, redelivered=redelivered)
        logger.info("redrive page", extra={"redrive_id": job.redrive_id, "page": job.page})
    elif job.kind == DEAD_LETTERS_JOB:
        report = wiring.dead_letter_drain().drain(max_messages=DRAIN_BUDGET)
        logger.info("dead letters drained", extra={"replayed": report.replayed, "resent": report.resent})
        metrics.add_metric(name="DeadLettersReplayed", unit=MetricUnit.Count, value=report.replayed)
        metrics.add_metric(name="PoisonMessagesResent", unit=MetricUnit.Count, value=report.resent)
        if not report.exhausted:
            wiring.redrive_jobs().enqueue(RedriveJob(DEAD_LETTERS_JOB))
    else:
        raise ValueError(f"unknown redrive job {job}")


@logger.inject_lambda_context
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return process_partial_response(event, run, BatchProcessor(event_type=EventType.SQS), context)
