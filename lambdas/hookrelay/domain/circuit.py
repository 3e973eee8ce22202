"""The circuit of an endpoint: when its deliveries stop being attempted one by one, and how they come back.

    closed ──(OPEN_AFTER_FAILURES retriable failures in a row)──▶ open
    open ──(a probe is delivered, or answered with anything but a retriable failure)──▶ draining
    draining ──(a released delivery fails retriably)──▶ open
    draining ──(nothing parked, nothing released still in flight)──▶ closed

While the circuit is open, deliveries are *parked*: recorded as waiting on the circuit, in the endpoint's
parked index (event order), with no attempt and no workflow each. One probe workflow per outage attempts
the oldest parked delivery on the published schedule, anchored at the circuit's opening. Once a probe gets
through, the drain releases the parked deliveries oldest first, a window at a time, at the endpoint's
concurrency; deliveries that arrive meanwhile are parked behind the drain, so order holds across the
recovery. Pure rules only: the services apply them, the adapters store them.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from enum import StrEnum

from hookrelay.domain.classification import Outcome
from hookrelay.domain.clock import to_rfc3339
from hookrelay.domain.paging import BoundedCount
from hookrelay.domain.schedule import RetrySchedule

# Retriable failures in a row (timeouts, connection errors, 5xx, 408, 425, 429) that open the circuit. One
# stray 500 never parks an endpoint; a success in between starts the count again. Hard failures (most 4xx)
# are the endpoint answering, about one event: they never count.
OPEN_AFTER_FAILURES = 5
# The drain keeps at most this many released deliveries in flight per message group of the endpoint (its
# `max_in_flight`), and never more than DRAIN_WINDOW_MAX in all: what a pause or a reopen has to take back.
DRAIN_WINDOW_PER_SLOT = 50
DRAIN_WINDOW_MAX = 500
# How often the drain looks at its window (Step Functions waits in whole seconds).
DRAIN_POLL_SECONDS = 1
# After this many commands one probe workflow hands over to a fresh one (Step Functions keeps at most
# 25,000 history events per execution; a command is about ten).
COMMANDS_PER_EXECUTION = 1000


class CircuitState(StrEnum):
    CLOSED = "closed"  # deliveries are attempted as they come
    OPEN = "open"  # deliveries are parked; one probe workflow retries the oldest on the schedule
    DRAINING = "draining"  # parked deliveries are released oldest first; new ones park behind them

    @property
    def meaning(self) -> str:
        return CIRCUIT_MEANINGS[self]


# A count of an endpoint's parked deliveries reads at most this many of its lot entries, and says "at least" past
# them: an outage at volume parks millions (an hour at 1,000 events a second, 3.6 million), and counted whole, every
# health read, every read of a parked delivery and every sweep of the circuit read them all, one sequential 1 MB
# Query page after another (entries of about 300 bytes, some 13 to a strongly consistent read unit:
# bench/parked_count.py). This many is one page.
PARKED_COUNT_LIMIT = 1_000


NONE_PARKED = BoundedCount(0, exact=True)


CIRCUIT_MEANINGS: dict[CircuitState, str] = {
    CircuitState.CLOSED: "Deliveries are attempted as they come.",
    CircuitState.OPEN: f"{OPEN_AFTER_FAILURES} retriable failures in a row: new deliveries and waking retries are "
    "parked, and one probe retries the oldest parked delivery on the published schedule.",
    CircuitState.DRAINING: "A probe got through: parked deliveries go out oldest first at the endpoint's "
    "concurrency, and new ones wait behind them. A retriable failure reopens the circuit.",
}


class Via(StrEnum):
    """How a delivery message reached the delivery function."""

    QUEUE = "queue"  # ingest, replay, redrive, or a retry workflow's wake-up
    DRAIN = "drain"  # released from the parked index by the drain
    PROBE = "probe"  # the probe of an open circuit


class Gate(StrEnum):
    ATTEMPT = "attempt"
    PARK = "park"  # not attempted: parked behind the circuit (a no-op when it is parked already)


def gate(circuit: CircuitState, via: Via, *, drain_paused: bool) -> Gate:
    """Whether a delivery message is attempted now or parked behind the endpoint's circuit."""
    if circuit is CircuitState.CLOSED or via is Via.PROBE:
        return Gate.ATTEMPT
    if circuit is CircuitState.DRAINING and via is Via.DRAIN and not drain_paused:
        return Gate.ATTEMPT
    return Gate.PARK


def parks_new_deliveries(circuit: CircuitState) -> bool:
    """Whether a new delivery to the endpoint waits behind its circuit from the start: what the delivery function
    would do with its first message (`gate` for a queue message), decided as the event is accepted instead."""
    return gate(circuit, Via.QUEUE, drain_paused=False) is Gate.PARK


def counts_toward_opening(outcome: Outcome) -> bool:
    return outcome is Outcome.RETRY


def drain_window(max_in_flight: int) -> int:
    return min(DRAIN_WINDOW_PER_SLOT * max(1, max_in_flight), DRAIN_WINDOW_MAX)


def next_probe_at(
    schedule: RetrySchedule,
    *,
    opened_at: datetime,
    probes_made: int,
    now: datetime,
    retry_after: float | None = None,
) -> datetime:
    """When the next probe is due: the published schedule's gaps, anchored at the circuit's opening.

    The failures that opened the circuit were the outage's first attempt, so probe n is planned where a
    delivery's attempt n+1 would be. Past the schedule's horizon the circuit does not give up (each parked
    delivery keeps its own horizon; auto-disable ends the outage): it probes every longest gap. A
    Retry-After pushes the probe later, never earlier, up to the schedule's cap.
    """
    planned = schedule.next_attempt_at(
        first_attempt_at=opened_at, attempts_made=probes_made + 1, now=now, attempt_started=now, rng=_NO_JITTER
    )
    if planned is None:
        planned = now + timedelta(seconds=max(schedule.longest_gap, 1))
    if retry_after is not None:
        planned = max(planned, now + timedelta(seconds=min(retry_after, schedule.effective_retry_after_cap)))
    return planned


def next_probe_after_failure(
    schedule: RetrySchedule, *, opened_at: datetime, probes_made: int, now: datetime, retry_after: float | None
) -> datetime:
    """After a failed probe (or a failed release, which counts as one): the outage's next slot."""
    return next_probe_at(schedule, opened_at=opened_at, probes_made=probes_made + 1, now=now, retry_after=retry_after)


class _Midpoint(random.Random):
    """Probes are one per endpoint, not a crowd: no jitter needed to spread them."""

    def uniform(self, low: float, high: float) -> float:
        return (low + high) / 2


_NO_JITTER = _Midpoint()


def park_order(event_timestamp: datetime, event_id: str) -> str:
    """The parked index's sort key: event time, then event id (time-ordered too), so it sorts as events happened.

    Within one ordering key, events are numbered (`sequence`) in the order they were accepted, which is the
    order of their timestamps for one producer; across keys, event time is the order.
    """
    return f"{to_rfc3339(event_timestamp)}#{event_id}"


def horizon_passed(anchor: datetime, schedule: RetrySchedule, now: datetime) -> bool:
    """A parked delivery keeps its own promise: no attempt later than the horizon after its first attempt
    (or, never attempted, after it was created)."""
    return now >= anchor + timedelta(seconds=schedule.horizon)
