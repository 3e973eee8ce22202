"""SQS: the FIFO delivery queues (a fast and a slow lane per shard: domain/queues.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from hookrelay.adapters.aws import resend_left
from hookrelay.adapters.records import UnreadableRecord, from_data, to_data
from hookrelay.adapters.schema import SQS_MAX_BATCH as SQS_BATCH
from hookrelay.adapters.schema import DeliveryQueueUrls
from hookrelay.adapters.stepfunctions import parse_command
from hookrelay.domain.circuit import Via
from hookrelay.domain.models import Event
from hookrelay.domain.queues import DeliveryLane
from hookrelay.services.ports import CircuitCommand, DeliveryMessage

# The most a carried event may add to a message, as encoded (JSON, non-ASCII escaped: SQS refuses some characters
# that JSON allows raw): ten messages with one each, and their other fields, still fit one 64 KiB chunk of a
# SendMessageBatch, which SQS bills as one request. A larger event stays out of the message: the attempt reads it.
CARRIED_EVENT_MAX_BYTES = 5 * 1024


def message_body(message: DeliveryMessage, carried: Mapping[str, str | None] | None = None) -> str:
    """The message as the queue carries it. `carried`: the events already encoded (`carried_events`), by id; an
    event not among them is encoded here."""
    body: dict[str, Any] = {
        "delivery_id": message.delivery_id,
        "tenant_id": message.tenant_id,
        "attempt": message.attempt,
    }
    if message.endpoint_id:
        body["endpoint_id"] = message.endpoint_id
    if message.via is not Via.QUEUE:
        body["via"] = message.via.value
    if message.reply_to:
        body["task_token"] = message.reply_to  # the name the ASL gives it (retry workflow's SendAttempt)
    if message.lane is DeliveryLane.SLOW:  # forwarded (domain/lanes.py): its receiver settles the group's tail
        body["lane"] = message.lane.value
    text = json.dumps(body, separators=(",", ":"))
    event = message.event
    encoded = None if event is None else carried[event.id] if carried and event.id in carried else _carried(event)
    return text if encoded is None else f'{text[:-1]},"event":{encoded}}}'  # one more member of the object


def carried_events(messages: Sequence[DeliveryMessage]) -> dict[str, str | None]:
    """Each distinct event of these messages, encoded once: a fan-out's messages all carry the same event."""
    events = {message.event.id: message.event for message in messages if message.event is not None}
    return {event_id: _carried(event) for event_id, event in events.items()}


def _carried(event: Event) -> str | None:
    """The event as the message carries it; None if it is too large."""
    encoded = json.dumps(to_data(event), separators=(",", ":"), ensure_ascii=True)  # ASCII: a character is a byte
    return encoded if len(encoded) <= CARRIED_EVENT_MAX_BYTES else None


def parse_message(body: str, group_id: str, deduplication_id: str) -> DeliveryMessage:
    data = json.loads(body)
    return DeliveryMessage(
        delivery_id=str(data["delivery_id"]),
        tenant_id=str(data["tenant_id"]),
        attempt=int(data["attempt"]),
        group_id=group_id,
        deduplication_id=deduplication_id,
        reply_to=data.get("task_token"),
        endpoint_id=data.get("endpoint_id"),
        via=Via(data.get("via", Via.QUEUE.value)),
        event=_event(data.get("event")),
        lane=DeliveryLane(data.get("lane", DeliveryLane.FAST.value)),
    )


def _event(data: Any) -> Event | None:
    """The event a first attempt's message carries; None when it carries none, or one this code cannot read (the
    attempt reads the stored event then)."""
    try:
        return from_data(Event, data)  # refuses anything but a map, None included
    except UnreadableRecord:
        return None


def parse_queue_message(body: str, group_id: str, deduplication_id: str) -> DeliveryMessage | CircuitCommand:
    """A delivery message, or a command of an endpoint's probe workflow (sent by the ASL, under `circuit`)."""
    data = json.loads(body)
    if isinstance(data, dict) and "circuit" in data:
        return parse_command(data["circuit"], data.get("task_token"))
    return parse_message(body, group_id, deduplication_id)


class SqsDeliveryQueue:
    """Sends each message to its shard's lane (`DeliveryMessage.shard`, `.lane`), in batches per queue."""

    def __init__(self, sqs: Any, queues: DeliveryQueueUrls | str) -> None:
        """`queues`: the URLs, or DELIVERY_QUEUE.env_var's value (their JSON)."""
        self.sqs = sqs
        self.queues = queues if isinstance(queues, DeliveryQueueUrls) else DeliveryQueueUrls.parse(queues)

    def enqueue(self, messages: Sequence[DeliveryMessage]) -> None:
        carried = carried_events(messages)
        # Each queue's messages keep their order among themselves, so each message group's order holds on its queue;
        # every URL is looked up before the first send, so a message for a shard that does not exist sends nothing.
        by_queue: dict[str, list[DeliveryMessage]] = {}
        for message in messages:
            by_queue.setdefault(self.queues.url(message.shard, message.lane), []).append(message)
        for url, queued in by_queue.items():
            self._send(url, queued, carried)

    def _send(self, url: str, messages: Sequence[DeliveryMessage], carried: Mapping[str, str | None]) -> None:
        for start in range(0, len(messages), SQS_BATCH):
            chunk = messages[start : start + SQS_BATCH]
            entries = [
                {
                    "Id": str(index),
                    "MessageBody": message_body(message, carried),
                    "MessageGroupId": message.group_id,
                    "MessageDeduplicationId": message.deduplication_id,
                }
                for index, message in enumerate(chunk)
            ]
            send = lambda e: self.sqs.send_message_batch(QueueUrl=url, Entries=e)  # noqa: E731
            for _ in resend_left(send, entries, _failed_on_sqs_side, "SendMessageBatch"):
                pass


def _failed_on_sqs_side(sent: list[dict[str, Any]], answer: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The entries of `sent` that SQS failed on its side, to send again (their deduplication ids make a message
    that was taken after all arrive once); None when none. An entry refused as the sender's fault is a bug here:
    raised, not sent again."""
    failed = answer.get("Failed") or []
    refused = [entry for entry in failed if entry.get("SenderFault")]
    if refused:
        raise RuntimeError(f"SQS refused {len(refused)} messages: {refused}")
    ids = {entry["Id"] for entry in failed}
    return [entry for entry in sent if entry["Id"] in ids] or None


class SqsReleaser:
    """Deletes a batch's settled messages before its invocation returns (handlers/sqs_batch.py): a delivery queue's
    messages, named by the queue's ARN as the event source gives it. The event source's own delete of the same
    messages when the invocation returns succeeds too (SQS ignores a receipt handle already deleted)."""

    def __init__(self, sqs: Any, queues: DeliveryQueueUrls) -> None:
        self.sqs = sqs
        self.by_name = {url.rstrip("/").rsplit("/", 1)[-1]: url for url in queues.all()}

    def release(self, queue_arn: str, receipt_handles: list[str]) -> None:
        url = self.by_name[queue_arn.rsplit(":", 1)[-1]]
        for start in range(0, len(receipt_handles), SQS_BATCH):
            chunk = receipt_handles[start : start + SQS_BATCH]
            result = self.sqs.delete_message_batch(
                QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": handle} for i, handle in enumerate(chunk)]
            )
            if result.get("Failed"):
                raise RuntimeError(f"could not release {len(result['Failed'])} messages: {result['Failed']}")
