"""An endpoint's recent deliveries per hour, as the portal's chart and `deliveries stats` show them (pure, no I/O).

Computed on read from the delivery log: the endpoint's deliveries created in the window (newest first, at most
`MAX_DELIVERIES_READ` of them, so a read costs a bounded number of items; `partial` says when older ones in the
window were left unread). Each figure is put in the hour it happened in:
- `delivered`: deliveries that ended delivered, by the hour they ended;
- `failed_attempts`: attempts that did not deliver (each is retried, or was the last), by the hour they started;
- `dead`: deliveries that ended dead, by the hour they ended;
- latency p50/p95/p99 (nearest rank) over every attempt started that hour, failed ones included (a timeout is
  latency the endpoint caused too); None for an hour without attempts;
- wait p50/p95/p99 over the first attempts started that hour: from the delivery's creation (its event accepted, or
  the replay made) to its first attempt's start, in ms. What the endpoint's deliveries waited on our side: for their
  turn among its `max_in_flight` requests, for a slot of its rate limit, or parked behind its open circuit. A wait
  that grows hour by hour while latency holds says the endpoint takes fewer requests than it is sent, which no
  failure shows. None for an hour without first attempts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from hookrelay.domain.classification import Outcome
from hookrelay.domain.models import Attempt, Delivery
from hookrelay.domain.status import DeliveryStatus

DEFAULT_HOURS = 24
MAX_HOURS = 48
# The read cost's cap: a stats read looks at no more than this many deliveries (in pages of PAGE_SIZE, so at most
# MAX_DELIVERIES_READ / PAGE_SIZE log reads, each the log's own bounded page read). Past it the answer is partial.
MAX_DELIVERIES_READ = 1000
PAGE_SIZE = 250
PERCENTILES = (50, 95, 99)
HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class HourStats:
    start: datetime
    delivered: int = 0
    failed_attempts: int = 0
    dead: int = 0
    attempts: int = 0
    latency_ms: dict[int, int | None] = field(default_factory=lambda: {p: None for p in PERCENTILES})
    wait_ms: dict[int, int | None] = field(default_factory=lambda: {p: None for p in PERCENTILES})


@dataclass(frozen=True)
class EndpointStats:
    since: datetime  # the first hour's start
    until: datetime  # the last hour's end (the current hour's end: it is still filling)
    hours: list[HourStats]
    deliveries_read: int
    partial: bool  # the window held more deliveries than MAX_DELIVERIES_READ: the oldest were not counted


def window(now: datetime, hours: int) -> tuple[datetime, datetime]:
    """`hours` whole hours ending with the one `now` is in."""
    until = now.replace(minute=0, second=0, microsecond=0) + HOUR
    return until - hours * HOUR, until


def percentile(values: Sequence[int], p: int) -> int | None:
    """Nearest rank: the smallest value with at least p% of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(math.ceil(p / 100 * len(ordered)), 1) - 1]


def _ended_at(delivery: Delivery) -> datetime:
    return delivery.completed_at or delivery.updated_at


def _wait_ms(delivery: Delivery, first: Attempt) -> int:
    """Creation to the first attempt's start; never negative (the two clocks are one function's, or two)."""
    return max(0, round((first.started_at - delivery.created_at) / timedelta(milliseconds=1)))


def summarize(
    deliveries: Sequence[Delivery], since: datetime, until: datetime, *, partial: bool = False
) -> EndpointStats:
    count = int((until - since) / HOUR)
    delivered, failed, dead = [0] * count, [0] * count, [0] * count
    latencies: list[list[int]] = [[] for _ in range(count)]
    waits: list[list[int]] = [[] for _ in range(count)]

    def slot(moment: datetime) -> int | None:
        index = math.floor((moment - since) / HOUR)
        return index if 0 <= index < count else None

    for delivery in deliveries:
        first = next((attempt for attempt in delivery.attempts if attempt.number == 1), None)
        if first is not None and (at := slot(first.started_at)) is not None:
            waits[at].append(_wait_ms(delivery, first))
        for attempt in delivery.attempts:
            at = slot(attempt.started_at)
            if at is None:
                continue
            latencies[at].append(attempt.latency_ms)
            if attempt.outcome is not Outcome.DELIVERED:
                failed[at] += 1
        ended = slot(_ended_at(delivery))
        if ended is not None and delivery.status is DeliveryStatus.DELIVERED:
            delivered[ended] += 1
        elif ended is not None and delivery.status is DeliveryStatus.DEAD:
            dead[ended] += 1
    hours = [
        HourStats(
            start=since + i * HOUR,
            delivered=delivered[i],
            failed_attempts=failed[i],
            dead=dead[i],
            attempts=len(latencies[i]),
            latency_ms={p: percentile(latencies[i], p) for p in PERCENTILES},
            wait_ms={p: percentile(waits[i], p) for p in PERCENTILES},
        )
        for i in range(count)
    ]
    return EndpointStats(since, until, hours, deliveries_read=len(deliveries), partial=partial)
