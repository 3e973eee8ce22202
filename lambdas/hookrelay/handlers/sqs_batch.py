"""SQS event source batches with partial failures: what Powertools' batch processors did for the queue handlers,
in a page of code, because importing `aws_lambda_powertools.utilities.batch` (and every event data class it pulls
in) cost the delivery function about 400 ms of each cold start.

The same contract: each record handled in order; a failed record (and, on a FIFO queue, every later record of the
batch, keeping the queue's order) reported in `batchItemFailures` for the event source to retry; and when every
record failed, an exception instead, so that Lambda retries the batch as a whole.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict


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


def process_batch(
    event: dict[str, Any], handle: Callable[[SqsMessage], None], logger: Logs, *, fifo: bool
) -> PartialBatchResponse:
    records = event.get("Records", [])
    failed: list[ItemFailure] = []
    for record in records:
        message = SqsMessage(record["messageId"], record["body"], record.get("attributes", {}))
        if fifo and failed:  # after a failure in a FIFO batch, the rest waits its turn
            failed.append({"itemIdentifier": message.message_id})
            continue
        try:
            handle(message)
        except Exception:
            logger.exception("record failed", extra={"message_id": message.message_id})
            failed.append({"itemIdentifier": message.message_id})
    if records and len(failed) == len(records):
        raise EntireBatchFailed(f"all {len(records)} records failed processing")
    return {"batchItemFailures": failed}
