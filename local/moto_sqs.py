"""SQS on moto without its two hot spots: long polls that spin, and sends that count the whole queue.

**Sends and receives.** moto 5.2's `SendMessage` and `SendMessageBatch` read a queue setting
(`ContentBasedDeduplication`) four times per message, and `ReceiveMessage` one
(`MessageRetentionPeriod`) once per message it returns, each through `Queue.attributes`, which computes
every attribute, the approximate message counts included: three scans of the whole queue per read. With a
backlog, that is most of the cost of a send or a receive. While they run, the counts are left out.

**Long polls.** moto 5.2's `ReceiveMessage` with `WaitTimeSeconds` loops: scan the queue, and if nothing
could be taken, wait until the queue "has messages", which it checks as "has visible messages". Messages
that are visible but in a FIFO group locked by a message in flight (a hanging endpoint's backlog, or the
local event source holding a group's messages in order) make that wait return at once, so the loop rescans
the whole queue at full CPU until the poll's time is up; and it rescans with the locked groups it saw when
the call began, so a group unlocked meanwhile waits for the next call. SQS itself does neither. Here the
wait ends only when something may have changed for a receiver (a message sent, or one deleted, which may
unlock its group) or after moto's own wait step (a second: a visibility timeout or delay that ran out), and
then the receive starts over, seeing the groups as they are now, for the rest of the poll's time.

**The time.** A receive checks each message of the queue for visibility and delay, each check reading the clock
through moto's `unix_time_millis`, which builds two datetimes and subtracts them: with a hanging endpoint's
backlog waiting behind its locked groups, that was half of this server's CPU. Here the current time is read
from `time.time()`, the same clock, without the datetimes; a time given as a datetime is converted by moto.

Installed by moto's server process of the local stack (`local.aws_endpoint`); nothing deployed imports this.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from moto.core.utils import camelcase_to_underscores
from moto.sqs import models
from moto.sqs.models import Queue, SQSBackend

from local.moto_patches import Patches

_original_unix_time = models.unix_time
_original_unix_time_millis = models.unix_time_millis
_original_delete_message = Queue.delete_message
_original_attributes = Queue.attributes
_settings_only = threading.local()  # set while an operation that reads only settings runs


# An attribute's name as the queue's member (`ContentBasedDeduplication` → `content_based_deduplication`): moto
# converts each one with regular expressions on every read, a fifth of this server's CPU in a throughput run.
_member = functools.cache(camelcase_to_underscores)

_COUNTS = frozenset(
    {"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed", "ApproximateNumberOfMessagesNotVisible"}
)


def attributes(self: Queue) -> dict[str, Any]:
    if not getattr(_settings_only, "active", False):
        return _original_attributes.fget(self)  # type: ignore[attr-defined,no-any-return]
    # moto's own `Queue.attributes`, without the counts.
    names = [*self.BASE_ATTRIBUTES, *(self.FIFO_ATTRIBUTES if self.fifo_queue else ())]
    names += self.KMS_ATTRIBUTES if self.kms_master_key_id else []
    result = {name: getattr(self, _member(name)) for name in names if name not in _COUNTS}
    if self.policy:
        result["Policy"] = self.policy
    if self.redrive_policy:
        result["RedrivePolicy"] = json.dumps(self.redrive_policy)
    return {name: str(value).lower() if isinstance(value, bool) else value for name, value in result.items()}


def _reading_settings_only(operation: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(operation)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        outer = getattr(_settings_only, "active", False)
        _settings_only.active = True
        try:
            return operation(*args, **kwargs)
        finally:
            _settings_only.active = outer

    return wrapped


def unix_time(dt: Any = None) -> float:
    """Seconds since the epoch: now, or at `dt` (moto's conversion)."""
    return time.time() if dt is None else _original_unix_time(dt)


def unix_time_millis(dt: Any = None) -> float:
    return time.time() * 1000.0 if dt is None else _original_unix_time_millis(dt)


class _StartOver(Exception):
    """Raised by a long poll's wait once it ends, to start the receive over (see `receive_message`)."""


def wait_for_messages(self: Queue, timeout: int) -> None:
    with self._messages_lock:
        self._messages_lock.wait(timeout=timeout)  # woken by add_message's notify_all, or by a delete below
    raise _StartOver  # moto waits only when it took nothing, so its receive can start over from the top


def _receiving_afresh(receive: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(receive)
    def wrapped(self: SQSBackend, queue_name: str, count: int, wait_seconds_timeout: float, *args: Any) -> Any:
        deadline = time.monotonic() + wait_seconds_timeout
        while True:
            remaining = max(0.0, deadline - time.monotonic())
            try:
                return receive(self, queue_name, count, remaining, *args)
            except _StartOver:
                continue

    return wrapped


def delete_message(self: Queue, receipt_handle: str) -> Any:
    result = _original_delete_message(self, receipt_handle)
    with self._messages_lock:
        self._messages_lock.notify_all()  # the message's group may be unlocked now
    return result


_PATCHES = Patches(
    (models, "unix_time", unix_time),
    (models, "unix_time_millis", unix_time_millis),
    (Queue, "wait_for_messages", wait_for_messages),
    (Queue, "delete_message", delete_message),
    (Queue, "attributes", property(attributes)),
    (SQSBackend, "send_message", _reading_settings_only(SQSBackend.send_message)),
    (SQSBackend, "send_message_batch", _reading_settings_only(SQSBackend.send_message_batch)),
    (SQSBackend, "receive_message", _receiving_afresh(_reading_settings_only(SQSBackend.receive_message))),
)


def install() -> None:
    """Replace moto's waits, its attribute reads in sends and receives, and its clock (idempotent)."""
    _PATCHES.install()


def uninstall() -> None:
    """moto as it ships (for the tests that compare)."""
    _PATCHES.uninstall()
