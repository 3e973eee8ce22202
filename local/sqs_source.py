"""The Lambda SQS event source, in miniature: receive a batch, invoke the handler, delete what succeeded.

Partial batch responses are honoured the way Lambda does: the messages named in `batchItemFailures`
stay on the queue and come back after their visibility timeout; everything else is deleted. A
handler that raises fails the whole batch.

`poll_once` is one such cycle (the tests drive it by hand); `EventSource` runs them for the local
stack: one receiver long-polls and hands each batch to its own invocation, up to `concurrency` at a
time, as Lambda scales out over a FIFO queue's message groups. A single receiver is deliberate:
moto's FIFO group lock is computed per `ReceiveMessage` call and is not safe against two calls at
once, so concurrent receivers could take two messages of one group; one receiver keeps SQS's rule
(a group with a message in flight yields nothing more until that message is deleted or visible again).
"""

from __future__ import annotations

import logging
import threading
import time
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
    try:
        response = invoke(function, {"Records": [to_record(m, queue_arn) for m in messages]}) or {}
    except Exception:  # the whole batch failed: leave every message to come back
        log.exception(
            "%s failed a batch of %d; the messages come back after their visibility timeout", function, len(messages)
        )
        return len(messages)
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
    return len(failed)


def poll_once(
    sqs: Any, queue_url: str, *, function: str = DELIVERY.name, batch_size: int = SQS_MAX_BATCH, wait_seconds: int = 0
) -> int:
    """One receive → invoke → delete cycle. Returns the number of messages received."""
    received = receive(sqs, queue_url, batch_size=batch_size, wait_seconds=wait_seconds)
    if received:
        invoke_batch(sqs, queue_url, queue_arn_of(sqs, queue_url), received, function)
    return len(received)


class EventSource:
    """Feeds a queue to a function on background threads until `stop`."""

    def __init__(
        self,
        sqs: Any,
        queue_url: str,
        *,
        function: str = DELIVERY.name,
        batch_size: int = SQS_MAX_BATCH,
        concurrency: int = 8,
        idle_seconds: float = 0.1,
    ) -> None:
        self.sqs = sqs
        self.queue_url = queue_url
        self.function = function
        self.batch_size = batch_size
        self.concurrency = concurrency
        # Short polls and a pause when the queue has nothing for us, rather than long polls: moto's long poll
        # spins at full CPU while messages wait in FIFO groups that are locked (a hanging endpoint's backlog),
        # starving everything else in the process. SQS itself does not, so this is a local-stack concern.
        self.idle_seconds = idle_seconds
        self.queue_arn = queue_arn_of(sqs, queue_url)
        self._slots = threading.BoundedSemaphore(concurrency)
        self._stopping = threading.Event()
        self._receiver = threading.Thread(target=self._receive_forever, name=f"{function}-source", daemon=True)
        self._invocations: set[threading.Thread] = set()
        self._lock = threading.Lock()

    def start(self) -> None:
        self._receiver.start()

    def _receive_forever(self) -> None:
        while not self._stopping.is_set():
            # Take a free invocation slot before receiving: a message received and left waiting would
            # spend its visibility timeout in our hands.
            if not self._slots.acquire(timeout=0.2):
                continue
            try:
                messages = receive(self.sqs, self.queue_url, batch_size=self.batch_size, wait_seconds=0)
            except Exception:
                if not self._stopping.is_set():
                    log.exception("receiving from %s failed; retrying", self.queue_url)
                    self._stopping.wait(0.5)
                messages = []
            if not messages or self._stopping.is_set():
                self._slots.release()
                self._stopping.wait(self.idle_seconds)
                continue
            invocation = threading.Thread(
                target=self._invoke, args=(messages,), name=f"{self.function}-invoke", daemon=True
            )
            with self._lock:
                self._invocations.add(invocation)
            invocation.start()

    def _invoke(self, messages: list[dict[str, Any]]) -> None:
        try:
            invoke_batch(self.sqs, self.queue_url, self.queue_arn, messages, self.function)
        except Exception:
            log.exception("settling a batch of %s failed", self.function)
        finally:
            with self._lock:
                self._invocations.discard(threading.current_thread())
            self._slots.release()

    def stop(self, grace_seconds: float = 2.0) -> None:
        """Stop receiving; give running invocations `grace_seconds` to finish (their threads are daemons).

        An invocation still running then (an attempt hanging on its timeout) is abandoned, as a Lambda
        instance is when its environment goes away: its messages were not deleted.
        """
        self._stopping.set()
        self._receiver.join(timeout=5)
        deadline = time.monotonic() + grace_seconds
        with self._lock:
            running = list(self._invocations)
        for invocation in running:
            invocation.join(timeout=max(0.0, deadline - time.monotonic()))
