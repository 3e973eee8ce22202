"""The delivery Lambda: SQS FIFO messages in, one attempt per message, partial batch failures out.

A fast lane's event source hands it up to ten messages (of different message groups, or several of one); each
group runs on its own thread, so the ten attempts are made at once, each within its own timeout, over connections
kept alive across invocations (adapters/http_sender.py). A slow lane's hands over one message at a time
(docs/architecture.md, "Delivery lanes").
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from hookrelay import wiring
from hookrelay.adapters.schema import DELIVERY_MESSAGE_SECONDS, SQS_MAX_BATCH
from hookrelay.adapters.sqs import parse_queue_message
from hookrelay.adapters.telemetry import METRICS_NAMESPACE, attempts_metric
from hookrelay.domain.status import DeliveryStatus
from hookrelay.functions import DELIVERY
from hookrelay.handlers import tracing
from hookrelay.handlers.sqs_batch import PartialBatchResponse, SqsMessage, process_batch
from hookrelay.services.delivery import BatchReads
from hookrelay.services.ports import AttemptReport, CircuitCommand, DeliveryMessage

logger = Logger(service=DELIVERY.name)
tracer = tracing.tracer(DELIVERY.name)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=DELIVERY.name)
# One thread per message group of a batch, kept across invocations (as the service and its connections are).
workers = ThreadPoolExecutor(max_workers=SQS_MAX_BATCH, thread_name_prefix="delivery")
# Powertools' Metrics is one record per invocation, filled from every worker thread.
_metrics_lock = threading.Lock()
_delivered: list[dict[str, Any]] = []
# Every attempt made in the invocation, for the local stack's terminal (local/terminal.py), which has no metrics
# record: one readable line each. Nothing reads it in AWS (no line is added there).
_made: list[AttemptReport] = []
# When the invocation must be done (time.monotonic()), seen by every group's thread (each runs in a copy of the
# invocation's context): what a message may spend waiting for a rate-limited endpoint's slot (domain/pacing.py).
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("deadline", default=None)
# The endpoints as read once for the batch's groups' first messages (services/delivery.py, BatchReads): each group
# runs in a copy of the invocation's context, and drops it after its first call, so its later messages read afresh.
_first_reads: contextvars.ContextVar[BatchReads | None] = contextvars.ContextVar("first_reads", default=None)


def _batch_reads() -> BatchReads | None:
    """The shared reads, for this group's first call only."""
    reads = _first_reads.get()
    _first_reads.set(None)
    return reads


def _spare_seconds() -> float | None:
    """The invocation's time beyond this message's longest path."""
    deadline = _deadline.get()
    return None if deadline is None else deadline - time.monotonic() - DELIVERY_MESSAGE_SECONDS


def deliver(record: SqsMessage, *, late: bool = False) -> None:
    reads = _batch_reads()
    message = parse_queue_message(record.body, record.message_group_id, record.message_deduplication_id)
    if isinstance(message, CircuitCommand):
        following = wiring.circuit_service().handle(message)
        logger.info(
            "circuit command",
            extra={"endpoint_id": message.endpoint_id, "command": message.kind, "next": following.kind},
        )
        return
    _report(wiring.delivery_service().attempt(message, late=late, spare_seconds=_spare_seconds(), reads=reads))


def deliver_run(records: Sequence[SqsMessage]) -> int:
    """A group's next messages while the invocation has time: a slow endpoint's are forwarded to its slow lane
    together, else the first is attempted as `deliver` attempts it (services/delivery.py, attempt_run). How many were
    handled; 0 leaves the first to `deliver` (a circuit command)."""
    messages = _delivery_messages(records)  # parsed only as far as the service reads them
    first = next(messages, None)
    if first is None:
        return 0  # left to `deliver`, which takes the shared reads
    reports = wiring.delivery_service().attempt_run(
        first, messages, spare_seconds=_spare_seconds(), reads=_batch_reads()
    )
    for report in reports:
        _report(report)
    return len(reports)


def _delivery_messages(records: Sequence[SqsMessage]) -> Iterator[DeliveryMessage]:
    """The records' delivery messages, up to the first circuit command."""
    for record in records:
        message = parse_queue_message(record.body, record.message_group_id, record.message_deduplication_id)
        if isinstance(message, CircuitCommand):
            return
        yield message


def _report(report: AttemptReport) -> None:
    """The attempt's metric, and its log line unless it delivered (the invocation's metrics record lists those)."""
    fields = {
        "delivery_id": report.delivery_id,
        "attempt": report.attempt,
        "status": report.status,
        "sent": report.sent,
        "parked": report.parked,
    }
    if report.span is not None:  # the producer's trace, joined to the platform's logs (handlers/tracing.py)
        # On the lines of attempts that did not deliver only: a delivered one's is in the delivery log, and a
        # delivered attempt logs no line of its own (about 50 bytes of logs per event saved).
        fields |= {"trace_id": report.span.trace_id, "span_id": report.span.parent_id}
    if report.sent and report.status is not None:  # sent: an attempt was made, so the delivery exists
        with _metrics_lock:
            metrics.add_metric(name=attempts_metric(report.status), unit=MetricUnit.Count, value=1)
            _made.append(report)
    if report.sent and report.status is DeliveryStatus.DELIVERED:
        # Delivered: no line of its own; the invocation's metrics record lists them (searchable in Logs Insights).
        with _metrics_lock:
            _delivered.append({"delivery_id": report.delivery_id, "attempt": report.attempt})
        return
    if report.made is not None:  # what the endpoint answered, on the line an undelivered attempt has anyway
        fields |= {
            "endpoint_id": report.endpoint_id,
            "status_code": report.made.status_code,
            "latency_ms": report.made.latency_ms,
            "error": report.made.error,
            "error_detail": report.made.error_detail,
        }
    logger.info("attempt", extra=fields)


def attempts_made() -> list[AttemptReport]:
    """The attempts the last invocation made (delivered ones included), in the order they finished."""
    with _metrics_lock:
        return list(_made)


def deliver_late(record: SqsMessage) -> None:
    """A message the invocation has no time left to attempt: forwarded to its slow lane instead (domain/lanes.py)."""
    deliver(record, late=True)


@logger.inject_lambda_context
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> PartialBatchResponse:
    _delivered.clear()
    _made.clear()
    _deadline.set(time.monotonic() + context.get_remaining_time_in_millis() / 1000)
    _first_reads.set(BatchReads())
    try:
        # A message is attempted only while its longest path still fits in the invocation's time (schema.py).
        def may_start() -> bool:
            return context.get_remaining_time_in_millis() >= DELIVERY_MESSAGE_SECONDS * 1000

        return process_batch(
            event,
            deliver,
            logger,
            fifo=True,
            workers=workers,
            may_start=may_start,
            late=deliver_late,
            handle_run=deliver_run,
            release=wiring.delivery_releaser().release,
        )
    finally:
        if _delivered:
            metrics.add_metadata(key="delivered", value=list(_delivered))
