"""SQS long polls on moto that wait instead of spinning.

moto 5.2's `ReceiveMessage` with `WaitTimeSeconds` loops: scan the queue, and if nothing could be taken, wait
until the queue "has messages", which it checks as "has visible messages". Messages that are visible but in a
FIFO group locked by a message in flight (a hanging endpoint's backlog, or the local event source holding a
group's messages in order) make that wait return at once, so the loop rescans the whole queue at full CPU
until the poll's time is up. SQS itself waits. This makes the wait end only when something may have changed
for a receiver: a message sent, or one deleted (which may unlock its group); a message whose visibility
timeout or delay runs out is found by the next scan, at most a second later (moto's own wait step).

Installed by moto's server process of the local stack (`local.aws_endpoint`); nothing deployed imports this.
"""

from __future__ import annotations

from typing import Any

from moto.sqs.models import Queue

_original_delete_message = Queue.delete_message


def wait_for_messages(self: Queue, timeout: int) -> None:
    with self._messages_lock:
        self._messages_lock.wait(timeout=timeout)  # woken by add_message's notify_all, or by a delete below


def delete_message(self: Queue, receipt_handle: str) -> Any:
    result = _original_delete_message(self, receipt_handle)
    with self._messages_lock:
        self._messages_lock.notify_all()  # the message's group may be unlocked now
    return result


def install() -> None:
    """Replace moto's waits (idempotent)."""
    Queue.wait_for_messages = wait_for_messages
    Queue.delete_message = delete_message
