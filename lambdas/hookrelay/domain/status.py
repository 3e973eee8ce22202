"""Delivery statuses: the state machine every (event, endpoint) pair goes through."""

from __future__ import annotations

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


# Statuses from which a new attempt may be claimed.
CLAIMABLE_STATUSES = frozenset({DeliveryStatus.QUEUED, DeliveryStatus.RETRYING})

STATUS_MEANINGS: dict[DeliveryStatus, str] = {
    DeliveryStatus.QUEUED: "Accepted and waiting for its first attempt. Normally momentary.",
    DeliveryStatus.ATTEMPTING: (
        "An attempt is in flight right now; `waiting_on.in_flight` says since when, and by when its message is back"
        " on the queue should the invocation making it die."
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
