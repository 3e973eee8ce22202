"""Endpoint health as a tenant sees it, summarised from the endpoint's most recent deliveries (pure, no I/O).

Computed on read from a bounded sample (the newest deliveries by creation time), so every number here
describes that sample, not the endpoint's whole history: cheap, and honest about what it covers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from hookrelay.domain.classification import Outcome
from hookrelay.domain.models import Attempt, Delivery
from hookrelay.domain.status import DeliveryStatus

HEALTH_SAMPLE_SIZE = 100  # the newest deliveries a health read looks at


@dataclass(frozen=True)
class RecordedAttempt:
    delivery_id: str
    attempt: Attempt


@dataclass(frozen=True)
class RetryingDelivery:
    delivery_id: str
    created_at: datetime
    age_seconds: int
    next_attempt_at: datetime | None


@dataclass(frozen=True)
class EndpointHealth:
    computed_at: datetime
    sampled: int  # deliveries looked at (at most HEALTH_SAMPLE_SIZE)
    older_not_sampled: bool  # whether the endpoint has older deliveries than the sample reaches
    counts: dict[DeliveryStatus, int]
    # delivered / (delivered + dead): deliveries that ended by their attempts; None when none has.
    # Cancelled deliveries were never sent, so they say nothing about the endpoint.
    success_rate: float | None
    last_delivered_at: datetime | None
    last_failure: RecordedAttempt | None
    consecutive_failures: int  # failed attempts since the newest successful one (all of them, if none)
    oldest_retrying: RetryingDelivery | None
    # From the endpoint record, not the sample: the first failed attempt since the last success (None: healthy).
    # The platform disables an endpoint that stays failing for AUTO_DISABLE_AFTER_DAYS (docs/endpoint-health.md).
    failing_since: datetime | None = None


def summarize(
    deliveries: Sequence[Delivery],
    now: datetime,
    *,
    older_not_sampled: bool,
    failing_since: datetime | None = None,
) -> EndpointHealth:
    counts = {status: 0 for status in DeliveryStatus}
    for delivery in deliveries:
        counts[delivery.status] += 1
    attempts = _attempts_newest_first(deliveries)
    return EndpointHealth(
        computed_at=now,
        sampled=len(deliveries),
        older_not_sampled=older_not_sampled,
        counts=counts,
        success_rate=_success_rate(counts),
        last_delivered_at=max(
            (d.completed_at for d in deliveries if d.status is DeliveryStatus.DELIVERED and d.completed_at),
            default=None,
        ),
        last_failure=next((a for a in attempts if a.attempt.outcome is not Outcome.DELIVERED), None),
        consecutive_failures=next(
            (i for i, a in enumerate(attempts) if a.attempt.outcome is Outcome.DELIVERED), len(attempts)
        ),
        oldest_retrying=_oldest_retrying(deliveries, now),
        failing_since=failing_since,
    )


def _success_rate(counts: dict[DeliveryStatus, int]) -> float | None:
    ended = counts[DeliveryStatus.DELIVERED] + counts[DeliveryStatus.DEAD]
    return round(counts[DeliveryStatus.DELIVERED] / ended, 4) if ended else None


def _attempts_newest_first(deliveries: Sequence[Delivery]) -> list[RecordedAttempt]:
    """Every recorded attempt of the sample, newest first (ties broken by delivery id, itself time-ordered)."""
    attempts = [RecordedAttempt(d.id, attempt) for d in deliveries for attempt in d.attempts]
    return sorted(attempts, key=lambda a: (a.attempt.started_at, a.delivery_id, a.attempt.number), reverse=True)


def _oldest_retrying(deliveries: Sequence[Delivery], now: datetime) -> RetryingDelivery | None:
    retrying = [d for d in deliveries if d.status is DeliveryStatus.RETRYING]
    if not retrying:
        return None
    oldest = min(retrying, key=lambda d: (d.created_at, d.id))
    return RetryingDelivery(
        delivery_id=oldest.id,
        created_at=oldest.created_at,
        age_seconds=max(0, int((now - oldest.created_at).total_seconds())),
        next_attempt_at=oldest.next_attempt_at,
    )
