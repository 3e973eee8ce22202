"""SQS event source batches with partial failures: what Powertools' batch processors did for the queue handlers,
in a page of code, because importing `aws_lambda_powertools.utilities.batch` (and every event data class it pulls
in) cost the delivery function about 400 ms of each cold start.

The same contract: a failed record reported in `batchItemFailures` for the event source to retry; and when every
record failed, an exception instead, so that Lambda retries the batch as a whole. On a FIFO queue the order that
matters is each message group's (the queue promises no other), so the batch is processed as Powertools'
`SqsFifoPartialProcessor(skip_group_on_error=True)` does: each group's records in order, and after a failure the
rest of that group is reported failed unprocessed (it comes back, in order, after the failed one), while the other
groups go on. Given `workers`, the groups run concurrently, each on one thread: one slow group holds only itself.
And given `release`, a group that has settled while others still run is deleted from its queue before the
invocation returns (domain/lanes.py, `release_after`), so the queue hands out its next message without waiting
for the batch's slowest group.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

from hookrelay.domain.lanes import release_after


class Logs(Protocol):
    def exception(self, msg: str, *args: Any, **kwargs: Any) -> Any: ...


class ItemFailure(TypedDict):
    itemIdentifier: str


class PartialBatchResponse(TypedDict):
    batchItemFailures: list[ItemFailure]


@dataclass(frozen=True)
class SqsMessage:
    message_id: str
    body: str
    attributes: dict[str, str]
    receipt_handle: str = ""
    source_arn: str = ""  # the queue's ARN

    @property
    def message_group_id(self) -> str:
        return self.attributes.get("MessageGroupId", "")

    @property
    def message_deduplication_id(self) -> str:
        return self.attributes.get("MessageDeduplicationId", "")

    @property
    def approximate_receive_count(self) -> int:
        return int(self.attributes.get("ApproximateReceiveCount", "1"))


class EntireBatchFailed(RuntimeError):
    """Every record of the batch failed: Lambda retries the batch (each record's error was logged)."""


Handle = Callable[[SqsMessage], None]
# Offered a group's messages not yet handled (two or more), before the first of them is: handles the first n of them
# and returns n, or 0 to leave the first to `handle`.
HandleRun = Callable[[Sequence[SqsMessage]], int]
# Deletes messages from a queue: the queue's ARN, their receipt handles.
Release = Callable[[str, list[str]], None]


def _always() -> bool:
    return True


def process_batch(
    event: dict[str, Any],
    handle: Handle,
    logger: Logs,
    *,
    fifo: bool,
    workers: ThreadPoolExecutor | None = None,
    may_start: Callable[[], bool] = _always,
    late: Handle | None = None,
    release: Release | None = None,
    clock: Callable[[], float] = time.monotonic,
    handle_run: HandleRun | None = None,
) -> PartialBatchResponse:
    """`may_start`: asked before each of a group's messages after its first; False means the invocation's time is
    running out: that message and the rest of its group go to `late` (a quicker handling), in order, or without one
    are left unprocessed, reported failed (they come back, in order). `release`: deletes settled groups early.
    `handle_run`: handles several of a group's messages at once when it can (a failure fails the group from the first
    of them)."""
    started = clock()
    messages = [
        SqsMessage(
            record["messageId"],
            record["body"],
            record.get("attributes", {}),
            record.get("receiptHandle", ""),
            record.get("eventSourceARN", ""),
        )
        for record in event.get("Records", [])
    ]
    # A standard queue keeps no order: each message is its own group.
    groups = _groups(messages) if fifo else [[message] for message in messages]
    if workers is None or len(groups) < 2:
        failed_ids = {m for group in groups for m in _process_group(group, handle, logger, may_start, late, handle_run)}
    else:
        # Each group in a copy of the invocation's context: what is scoped to the invocation stays so on the
        # workers' threads (the local stack's per-function environment and IAM check, for one).
        runs: dict[Future[list[str]], list[SqsMessage]] = {}
        for group in groups:
            run = workers.submit(
                contextvars.copy_context().run, _process_group, group, handle, logger, may_start, late, handle_run
            )
            runs[run] = group
        if release is None:
            failed_ids = {m for run in runs for m in run.result()}
        else:
            failed_ids = _settle_releasing(runs, release, logger, clock, started)
    if messages and len(failed_ids) == len(messages):
        raise EntireBatchFailed(f"all {len(messages)} records failed processing")
    # In the batch's order, as the event source handed them over.
    return {"batchItemFailures": [{"itemIdentifier": m.message_id} for m in messages if m.message_id in failed_ids]}


def _settle_releasing(
    runs: dict[Future[list[str]], list[SqsMessage]],
    release: Release,
    logger: Logs,
    clock: Callable[[], float],
    started: float,
) -> set[str]:
    """Wait for every group; release each one settled (none of its messages failed) while another still runs, once
    the batch is `release_after` its quickest group into its run. Returns the failed messages' ids."""
    failed: set[str] = set()
    pending = set(runs)
    settled: list[SqsMessage] = []  # settled, not yet released
    release_at: float | None = None  # set when the first group settles (`release_after` its time)
    while pending:
        # Until the first group settles, and once past the release time, only a group settling changes anything.
        wake = None if release_at is None else max(0.0, release_at - clock()) or None
        done, pending = wait(pending, timeout=wake, return_when=FIRST_COMPLETED)
        for run in done:
            group_failed = run.result()
            failed.update(group_failed)
            if not group_failed:
                settled.extend(runs[run])
        if release_at is None:
            release_at = started + release_after(clock() - started)
        if pending and settled and clock() >= release_at:
            _release(settled, release, logger)
            settled = []
    return failed


def _release(messages: Sequence[SqsMessage], release: Release, logger: Logs) -> None:
    """Delete settled messages now. If that fails the event source still deletes them when the invocation returns:
    their groups just wait for the batch, as they would without releasing."""
    by_queue: dict[str, list[str]] = {}
    for message in messages:
        by_queue.setdefault(message.source_arn, []).append(message.receipt_handle)
    for source_arn, handles in by_queue.items():
        try:
            release(source_arn, handles)
        except Exception:
            logger.exception("releasing settled messages failed", extra={"messages": len(handles)})


def _groups(messages: Sequence[SqsMessage]) -> list[list[SqsMessage]]:
    """The batch's messages by message group, each group in the batch's (the queue's) order."""
    groups: dict[str, list[SqsMessage]] = {}
    for message in messages:
        groups.setdefault(message.message_group_id or message.message_id, []).append(message)
    return list(groups.values())


def _process_group(
    group: Sequence[SqsMessage],
    handle: Handle,
    logger: Logs,
    may_start: Callable[[], bool],
    late: Handle | None,
    handle_run: HandleRun | None = None,
) -> list[str]:
    """Handle one group's messages in order; the ids of the failed (or not started) one and of every one after it."""
    index = 0
    while index < len(group):
        message = group[index]
        if index and handle is not late and not may_start():
            if late is None:
                return [later.message_id for later in group[index:]]
            handle = late  # the rest of the group, too
        try:
            handled = 0
            if handle_run is not None and handle is not late and len(group) - index > 1:
                handled = handle_run(group[index:])
            if not handled:
                handle(message)
        except Exception:
            logger.exception("record failed", extra={"message_id": message.message_id})
            return [later.message_id for later in group[index:]]
        index += handled or 1
    return []
