"""Delivery lanes: when an endpoint's messages move to its shard's slow lane and when they come back (pure rules).

A fast lane's batches are attempted at once, but the event source deletes a batch only when the whole invocation
returns: one slow endpoint would hold the batch's other message groups for its latency. So an endpoint whose
attempt in the fast lane took longer than `slow_after_ms` (a timeout included) is moved to the slow lane, whose
event source hands over one message per invocation; one whose attempt in the slow lane answered within half that
(the margin keeps an endpoint near the line from flapping) is moved back. Probes and drains are always in the slow
lane (their circuit is open: its endpoint failing).

The switch keeps each message group's order, with no message lost or sent twice:
- Every message enters its shard's fast lane (ingest, replays, redrives, the retry workflow). The fast lane sends a
  message on to the slow lane ("forwards" it) while its endpoint is slow, or while its group still has a forwarded
  message there: the group's tail (an item of its own) names the last message forwarded and not yet settled in
  the slow lane. A group's messages reach the fast lane one at a time, in order, so they are forwarded in order,
  and no later one is attempted in the fast lane while an earlier one waits in the slow lane.
- The endpoint's item carries a mark per group that may have a tail (`tail_mark`), so that the fast lane reads a
  tail only for a marked group, not for every message. Forwarding writes the tail first, then the mark (only if
  the group had none), then sends: a message waits in the slow lane only behind both. A crash before the send
  leaves the message in the fast lane (not deleted): it comes back first in its group and is forwarded again (the
  same tail, the same deduplication id); a tail left without its mark names a message that was never sent, and is
  overwritten by the group's next forward. A batch's consecutive messages of one group are forwarded together: one
  tail, naming the last, and one send.
- A fast lane's batch attempts one group's messages one after another; one it has no time left to attempt (the
  function's timeout is one message's longest path: adapters/schema.py) is forwarded instead, never handed back
  to count toward the queue's maxReceiveCount.
- The slow lane, once a message is settled (attempted and recorded, parked, or found made already), deletes its
  group's tail if it still names that message (a later one forwarded since keeps it). A crash before the delete
  brings the message back: nothing is sent again (its attempt is recorded) and the tail is deleted then.
- The fast lane, finding a marked group with no tail, takes the mark off and attempts the message. Only the
  group's own messages write its tail and mark, one at a time, so nothing can add a tail between that read and the
  attempt; the slow lane only ever deletes one.
"""

from __future__ import annotations

from hookrelay.domain.classification import ATTEMPT_TIMEOUT_SECONDS, FailureKind

# The deployment's threshold unless CDK context `slow_lane_after_ms` says otherwise (stacks/config.py): well above
# a healthy endpoint's answer, well below the attempt timeout (at most that: past it, only timeouts would count).
DEFAULT_SLOW_LANE_AFTER_MS = 2000
MAX_SLOW_LANE_AFTER_MS = ATTEMPT_TIMEOUT_SECONDS * 1000
MIN_SLOW_LANE_AFTER_MS = 100


def check_slow_lane_after_ms(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("the slow lane's threshold is a whole number of ms")
    if not MIN_SLOW_LANE_AFTER_MS <= value <= MAX_SLOW_LANE_AFTER_MS:
        raise ValueError(f"the slow lane's threshold is {MIN_SLOW_LANE_AFTER_MS}..{MAX_SLOW_LANE_AFTER_MS} ms")
    return value


def slows(latency_ms: int, error: FailureKind | None, slow_after_ms: int) -> bool:
    """An attempt in the fast lane that moves its endpoint to the slow lane."""
    return error is FailureKind.TIMEOUT or latency_ms > slow_after_ms


def quickens(latency_ms: int, error: FailureKind | None, slow_after_ms: int) -> bool:
    """An attempt in the slow lane that moves its endpoint back: answered (whatever the status), and quickly."""
    return error is None and latency_ms <= slow_after_ms // 2


# Releasing a fast lane's settled groups early. Lambda's event source deletes a batch's messages when the invocation
# returns, and until then every message group in the batch is locked: its next message waits for the batch's slowest
# attempt (up to the attempt timeout, before that endpoint's move to the slow lane). So a group that has settled
# while others are still being attempted is deleted by the function itself ("released") once the batch has run
# RELEASE_RATIO times as long as its quickest group took, and at least RELEASE_FLOOR_SECONDS: a batch whose groups
# settle together (the usual one) pays no request for it, and one held by a slow group frees the others within a
# few times their own latency. Groups settling after that are released as they settle.
RELEASE_FLOOR_SECONDS = 0.05
RELEASE_RATIO = 4


def release_after(quickest_seconds: float) -> float:
    """How long into a batch its settled groups are released, given how long its quickest group took."""
    return max(RELEASE_FLOOR_SECONDS, RELEASE_RATIO * quickest_seconds)


# The most message groups (`max_in_flight`) an endpoint may have. Every delivery reads its endpoint's item, which
# carries a mark per group with a tail while it is slow: at 1,000 groups the marks come to 2,890 bytes at most (slots
# 0 to 999), which with the endpoint's own kilobyte or so still fits one 4 KB read unit. The tails themselves are
# items of their own, so the groups' count no longer weighs on the endpoint's writes.
MAX_IN_FLIGHT = 1000


def tail_mark(endpoint_id: str, group_id: str) -> str:
    """The mark on its endpoint's item of a message group that may have a tail: its slot (`endpoint_id#slot`, a
    few bytes, as an endpoint may have hundreds of groups), or the whole id of a group not named after it."""
    return group_id.removeprefix(f"{endpoint_id}#")


def message_key(delivery_id: str, attempt: int) -> str:
    """A forwarded message's name in its group's tail: one attempt of one delivery (a re-sent copy shares it)."""
    return f"{delivery_id}#{attempt}"
