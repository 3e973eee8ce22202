"""The Lambda SQS event source, in miniature: receive a batch, invoke the handler, delete what succeeded.

Partial batch responses are honoured the way Lambda does: the messages named in `batchItemFailures`
stay on the queue and come back after their visibility timeout; everything else is deleted. A
handler that raises fails the whole batch.

`poll_once` is one such cycle (the tests drive it by hand); `EventSource` runs them for the local
stack: one receiver long-polls and hands the messages out to invocations, up to `concurrency` at a
time, each with up to `batch_size` messages across message groups, as Lambda scales out over a FIFO queue's
message groups. A single receiver is deliberate:
moto's FIFO group lock is computed per `ReceiveMessage` call and is not safe against two calls at
once, so concurrent receivers could take two messages of one group; one receiver keeps SQS's rule
(a group with a message in flight yields nothing more until that message is deleted or visible again).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from hookrelay.adapters.schema import SQS_MAX_BATCH
from hookrelay.functions import DELIVERY
from local.lambda_runtime import invoke

log = logging.getLogger("hookrelay.local.sqs")


def to_record(message: dict[str, Any], queue_arn: str) -> dict[str, Any]:
    attributes = message.get("Attributes", {})
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": {
            "ApproximateReceiveCount": attributes.get("ApproximateReceiveCount", "1"),
            "SentTimestamp": attributes.get("SentTimestamp", "0"),
            "SenderId": attributes.get("SenderId", "local"),
            "ApproximateFirstReceiveTimestamp": attributes.get("ApproximateFirstReceiveTimestamp", "0"),
            "MessageGroupId": attributes.get("MessageGroupId"),
            "MessageDeduplicationId": attributes.get("MessageDeduplicationId"),
            "SequenceNumber": attributes.get("SequenceNumber"),
        },
        "messageAttributes": {},
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": "us-east-1",
    }


def queue_arn_of(sqs: Any, queue_url: str) -> str:
    return sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def receive(sqs: Any, queue_url: str, *, batch_size: int, wait_seconds: int) -> list[dict[str, Any]]:
    return sqs.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=batch_size,
        WaitTimeSeconds=wait_seconds,
        MessageSystemAttributeNames=["All"],
    ).get("Messages", [])


def invoke_batch(sqs: Any, queue_url: str, queue_arn: str, messages: list[dict[str, Any]], function: str) -> int:
    """Invoke the handler with one batch and delete all but its failures; returns how many failed."""
    return len(invoke_batch_failures(sqs, queue_url, queue_arn, messages, function))


def invoke_batch_failures(
    sqs: Any, queue_url: str, queue_arn: str, messages: list[dict[str, Any]], function: str
) -> set[str]:
    """Invoke the handler with one batch and delete all but its failures; returns the failed messages' ids."""
    try:
        response = invoke(function, {"Records": [to_record(m, queue_arn) for m in messages]}) or {}
    except Exception:  # the whole batch failed: leave every message to come back
        log.exception(
            "%s failed a batch of %d; the messages come back after their visibility timeout", function, len(messages)
        )
        return {m["MessageId"] for m in messages}
    failed = {failure["itemIdentifier"] for failure in response.get("batchItemFailures", [])}
    done = [m for m in messages if m["MessageId"] not in failed]
    for start in range(0, len(done), SQS_MAX_BATCH):
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                for i, m in enumerate(done[start : start + SQS_MAX_BATCH])
            ],
        )
    return failed


def poll_once(
    sqs: Any, queue_url: str, *, function: str = DELIVERY.name, batch_size: int = SQS_MAX_BATCH, wait_seconds: int = 0
) -> int:
    """One receive → invoke → delete cycle. Returns the number of messages received."""
    received = receive(sqs, queue_url, batch_size=batch_size, wait_seconds=wait_seconds)
    if received:
        invoke_batch(sqs, queue_url, queue_arn_of(sqs, queue_url), received, function)
    return len(received)


def _group_of(message: dict[str, Any]) -> str:
    """A FIFO message's group; a standard queue's message is its own."""
    return str(message.get("Attributes", {}).get("MessageGroupId") or message["MessageId"])


class EventSource:
    """Feeds a queue to a function on background threads until `stop`, as Lambda's SQS poller does.

    One receiver takes up to ten messages a call, long-polling (moto's server waits rather than spins: see
    `local.moto_sqs`), and the messages are handed out here: each invocation gets up to `batch_size` messages
    across message groups, each group's in order, and a group is never in two invocations at once (a FIFO queue's
    messages of one group are in order; a standard queue's messages are each their own group). So moto
    scans the queue once per ten messages rather than once per message, and only when a free invocation slot
    has nothing held to work on. A message reported failed keeps the rest of its group's held messages
    back with it: they come back after their visibility timeout, still in order.

    `concurrency` bounds the invocations running at once, as Lambda's maximum concurrency does, however many
    groups each holds. A group is held by its invocation until that returns, unless the queue hands out another
    of its messages first: SQS (moto) does that only once every earlier message of the group is deleted (or
    visible again), which is what the delivery function's early release of a settled group does
    (handlers/sqs_batch.py), so that group is free for the next invocation while its old one still runs.
    """

    def __init__(
        self,
        sqs: Any,
        queue_url: str,
        *,
        function: str = DELIVERY.name,
        batch_size: int = SQS_MAX_BATCH,
        concurrency: int = 8,
        wait_seconds: int = 1,
    ) -> None:
        self.sqs = sqs
        self.queue_url = queue_url
        self.function = function
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.wait_seconds = wait_seconds  # the long poll's length: how long `stop` may wait for the receiver
        self.queue_arn = queue_arn_of(sqs, queue_url)
        self._held: dict[str, deque[dict[str, Any]]] = {}  # message group -> received, not yet invoked, in order
        self._busy: dict[str, int] = {}  # message group -> the invocation holding it
        self._running = 0  # invocations running
        self._next_invocation = 0
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._receiver = threading.Thread(target=self._receive_forever, name=f"{function}-source", daemon=True)
        self._invocations: set[threading.Thread] = set()

    def start(self) -> None:
        self._receiver.start()

    def _ready_groups(self) -> list[str]:
        return [group for group in self._held if group not in self._busy]

    def _wants_messages(self) -> bool:
        """A free slot, and nothing held that it could take (called holding `_changed`)."""
        return self._running < self.concurrency and not self._ready_groups()

    def _receive_forever(self) -> None:
        while not self._stopping.is_set():
            with self._changed:
                if not self._changed.wait_for(self._wants_messages, timeout=0.5):
                    continue
            try:
                messages = receive(self.sqs, self.queue_url, batch_size=SQS_MAX_BATCH, wait_seconds=self.wait_seconds)
            except Exception:
                if not self._stopping.is_set():
                    log.exception("receiving from %s failed; retrying", self.queue_url)
                    self._stopping.wait(0.5)
                continue
            with self._changed:
                for message in messages:
                    group = _group_of(message)
                    # Handed out again: the queue has let the group go (its invocation released it), so must we.
                    self._busy.pop(group, None)
                    self._held.setdefault(group, deque()).append(message)
                self._dispatch()

    def _dispatch(self) -> None:
        """Start invocations for held messages while slots are free (called holding `_changed`). As Lambda's FIFO
        poller does, a batch takes up to `batch_size` messages across message groups, each group's in order, and a
        group is in one invocation at a time."""
        while (ready := self._ready_groups()) and self._running < self.concurrency and not self._stopping.is_set():
            batch: list[dict[str, Any]] = []
            groups: list[str] = []
            for group in ready:
                held = self._held[group]
                while held and len(batch) < self.batch_size:
                    batch.append(held.popleft())
                if not held:
                    del self._held[group]
                groups.append(group)
                if len(batch) >= self.batch_size:
                    break
            self._next_invocation += 1
            self._busy.update(dict.fromkeys(groups, self._next_invocation))
            self._running += 1
            invocation = threading.Thread(
                target=self._invoke,
                args=(self._next_invocation, groups, batch),
                name=f"{self.function}-invoke",
                daemon=True,
            )
            self._invocations.add(invocation)
            invocation.start()

    def _invoke(self, number: int, groups: list[str], messages: list[dict[str, Any]]) -> None:
        failed = {m["MessageId"] for m in messages}
        try:
            failed = invoke_batch_failures(self.sqs, self.queue_url, self.queue_arn, messages, self.function)
        except Exception:
            log.exception("settling a batch of %s failed", self.function)
        finally:
            with self._changed:
                for message in messages:
                    if message["MessageId"] in failed:  # the rest of its group comes back behind it, in order
                        self._held.pop(_group_of(message), None)
                for group in groups:
                    if self._busy.get(group) == number:  # not since handed out again to another invocation
                        del self._busy[group]
                self._running -= 1
                self._invocations.discard(threading.current_thread())
                self._dispatch()
                self._changed.notify_all()

    def stop(self, grace_seconds: float = 2.0) -> None:
        """Stop receiving; give running invocations `grace_seconds` to finish (their threads are daemons).

        An invocation still running then (an attempt hanging on its timeout) is abandoned, as a Lambda
        instance is when its environment goes away: its messages were not deleted, and neither are the
        messages held for it.
        """
        stop_all([self], grace_seconds)

    def _stop_receiving(self) -> None:
        self._stopping.set()
        with self._changed:
            self._changed.notify_all()

    def _running_invocations(self) -> list[threading.Thread]:
        with self._changed:
            return list(self._invocations)


def stop_all(sources: list[EventSource], grace_seconds: float = 2.0) -> None:
    """`EventSource.stop` for every source at once: each receiver ends when its long poll returns, so stopping the
    sources one after another waited out a poll per queue (the local stack has two per delivery shard), and the
    invocations still running get `grace_seconds` in all, not each source its own."""
    for source in sources:
        source._stop_receiving()
    for source in sources:
        source._receiver.join(timeout=source.wait_seconds + 5)
    deadline = time.monotonic() + grace_seconds
    for invocation in [invocation for source in sources for invocation in source._running_invocations()]:
        invocation.join(timeout=max(0.0, deadline - time.monotonic()))
