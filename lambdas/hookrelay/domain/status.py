"""Delivery statuses: the state machine every (event, endpoint) pair goes through."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum


class DeliveryStatus(StrEnum):
    QUEUED = "queued"
    ATTEMPTING = "attempting"
    DELIVERED = "delivered"
    RETRYING = "retrying"
    DEAD = "dead"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATUSES

    @property
    def meaning(self) -> str:
        return STATUS_MEANINGS[self]


TERMINAL_STATUSES = frozenset({DeliveryStatus.DELIVERED, DeliveryStatus.DEAD, DeliveryStatus.CANCELLED})


class DeadReason(StrEnum):
    """Why a delivery is dead: recorded on it (`dead_reason`) when it dies, the one record of its death."""

    EXHAUSTED = "exhausted"  # the schedule ran out, or the hard-failure cap was reached
    HORIZON = "horizon"  # parked behind its endpoint's circuit past its own horizon
    ATTEMPT_LOST = "attempt_lost"  # its retry workflow gave up on an unanswered attempt (our failure)
    POISON = "poison"  # its message failed processing repeatedly and reached the poison queue (our failure)

    @property
    def is_ours(self) -> bool:
        """A death caused by the platform, not by the endpoint: what the operator's redrive replays."""
        return self in (DeadReason.ATTEMPT_LOST, DeadReason.POISON)


# A first attempt off the queue is recorded `attempting` only once it has gone this long without an answer: about
# what a healthy endpoint takes to answer, so the happy path writes no claim, while a slow or hanging one (up to the
# 8-second attempt timeout) is shown in flight for all but its first second. The rule and its crash cases:
# domain/lifecycle.py (`claims_late`).
LATE_CLAIM_AFTER = timedelta(seconds=1)

# Statuses from which a new attempt may be claimed.
CLAIMABLE_STATUSES = frozenset({DeliveryStatus.QUEUED, DeliveryStatus.RETRYING})

STATUS_MEANINGS: dict[DeliveryStatus, str] = {
    DeliveryStatus.QUEUED: "Accepted and waiting for its first attempt. Normally momentary.",
    DeliveryStatus.ATTEMPTING: (
        "An attempt is in flight right now; `waiting_on.in_flight` says since when, and by when its message is back"
        " on the queue should the invocation making it die. A first attempt is recorded `attempting` once it has"
        f" gone {LATE_CLAIM_AFTER.total_seconds():g} s without an answer (most are answered sooner, and go from"
        " `queued` straight to their outcome in one write); a retry, from its start."
    ),
    DeliveryStatus.DELIVERED: "The endpoint returned 2xx within the attempt timeout. Done.",
    DeliveryStatus.RETRYING: "An attempt failed and another is scheduled at `next_attempt_at`.",
    DeliveryStatus.DEAD: "The schedule was exhausted or the hard-failure cap was reached. "
    "Kept with every attempt; redrivable for the retention window. Once a replay of it (a redrive's, or a single"
    " replay) is delivered it stays `dead`, with `recovered_by` naming that replay: later redrives skip it"
    " (unless `include_recovered`), and `recovered=false` lists only the dead still undelivered.",
    DeliveryStatus.CANCELLED: "Not sent: the endpoint was disabled or deleted first. Redrivable after re-enabling;"
    " marked `recovered_by` like `dead` once a replay of it is delivered.",
}
