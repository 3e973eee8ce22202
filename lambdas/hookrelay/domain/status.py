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

# Statuses from which a new attempt may be claimed.
CLAIMABLE_STATUSES = frozenset({DeliveryStatus.QUEUED, DeliveryStatus.RETRYING})

STATUS_MEANINGS: dict[DeliveryStatus, str] = {
    DeliveryStatus.QUEUED: "Accepted and waiting for its first attempt. Normally momentary.",
    DeliveryStatus.ATTEMPTING: "An attempt is in flight right now.",
    DeliveryStatus.DELIVERED: "The endpoint returned 2xx within the attempt timeout. Done.",
    DeliveryStatus.RETRYING: "An attempt failed and another is scheduled at `next_attempt_at`.",
    DeliveryStatus.DEAD: "The schedule was exhausted or the hard-failure cap was reached. "
    "Kept with every attempt; redrivable for the retention window.",
    DeliveryStatus.CANCELLED: "Not sent: the endpoint was disabled or deleted first. Redrivable after re-enabling.",
}
