"""A per-endpoint rate limit (deliveries per second, set by the tenant): when each send may start (pure rules).

The limit is kept by *slots*: sends to a limited endpoint start at least `slot_interval_us(limit)` apart, whoever
makes them (the fast and slow lanes, retries, the drain, the probe). One item per endpoint holds its next free slot
(`next_us`, virtual scheduling, as in GCRA with no burst): a send reserves the next free slot with a conditional write
(`reserve`), then waits for it in its invocation. Since slots are spaced, any second (aligned or not) holds at most
`limit` of them; the interval keeps `HEADROOM` in hand, so that a send woken a little late (thread wake-up, a slow
call) does not crowd the one after it into the same second.

Nothing waits for long, and nothing is refused or dies for the limit (services/pacing.py, services/delivery.py):
- a send takes a slot only if it lies within its wait budget (`WAIT_SECONDS`, less when its invocation has less
  time to spare); otherwise it reserves nothing and waits elsewhere: a fast lane's message (a first attempt or a
  retry) is forwarded to its slow lane (as a late one is, never handed back to SQS to count toward
  maxReceiveCount); a drain's release pauses the drain (the delivery stays parked, released again in order); a
  probe is looked at again a second later;
- a queue message in its slow lane always takes its slot. The endpoint's message groups send one message each at a
  time, and everything else reserves within its budget, so the slots taken reach at most
  `WAIT_SECONDS + max_in_flight / limit` ahead, which `check_rate_limit` bounds by `SLOW_LANE_WAIT_SECONDS`.
  Retries are the exception: each has a message group of its own, so a burst of retries forwarded to the slow lane
  at once (more than the limit serves in the function's spare time, some 30 s) would wait longer than that, and
  the last of them could outlast its invocation and come back once from SQS. Retries of a limited, healthy
  endpoint are few; a failing one's are parked behind its circuit.

A slot taken and not used (the process died between the reservation and the send, or the claim found the attempt
made already) is simply lost: that second holds fewer sends than the limit. Harmless.

Endpoints with no limit pay nothing: no reservation, no write, no wait (the endpoint is read anyway).
"""

from __future__ import annotations

from dataclasses import dataclass

from hookrelay.domain.limits import MAX_RATE_LIMIT_PER_SECOND, MIN_RATE_LIMIT_PER_SECOND

MICROS = 1_000_000
# Slots are this fraction further apart than 1/limit: a send may start a little after its slot (how late its thread
# wakes) without pushing limit + 1 starts into one second. 2% costs a drain 2% of its time.
HEADROOM = 0.02
# The most a send waits for its slot in its invocation (its budget), and what the delivery function's timeout
# allows for it (adapters/schema.py): 2 s keeps a crashed invocation's hold on its message group within 90 s
# (tests/unit/test_crash_cost.py). A slow lane's first attempt may wait up to SLOW_LANE_WAIT_SECONDS (see above); its
# second half comes out of the time the timeout keeps for throttled AWS calls' backoff (30 s), rarely both at once.
WAIT_SECONDS = 2
SLOW_LANE_WAIT_SECONDS = 2 * WAIT_SECONDS
# A pacing item outlives its last slot by this much (TTL), then goes: an idle endpoint's item is worthless.
ITEM_LIFETIME_SECONDS = 3600


def check_rate_limit(limit: int | None, max_in_flight: int) -> int | None:
    """A limit a tenant sets: None (no limit), or a whole number within the range, with no more message groups than
    the limit serves within one wait budget (else a group's first attempt could wait past its invocation)."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise ValueError("a rate limit is a whole number of deliveries per second")
    if not MIN_RATE_LIMIT_PER_SECOND <= limit <= MAX_RATE_LIMIT_PER_SECOND:
        raise ValueError(f"a rate limit is {MIN_RATE_LIMIT_PER_SECOND} to {MAX_RATE_LIMIT_PER_SECOND} per second")
    if max_in_flight > limit * WAIT_SECONDS:
        raise ValueError(
            f"max_in_flight {max_in_flight} is more than {WAIT_SECONDS} seconds of a rate limit of {limit}/s: "
            f"lower max_in_flight or raise the limit"
        )
    return limit


def slot_interval_us(limit: int) -> int:
    """The least gap between two sends' slots, in microseconds: 1/limit of a second, plus the headroom."""
    return -(-round(MICROS * (1 + HEADROOM)) // limit)


@dataclass(frozen=True)
class Reservation:
    """The slot a send was given, and the endpoint's next free slot after it (microseconds since the epoch)."""

    slot_us: int
    next_us: int


def reserve(next_us: int | None, now_us: int, interval_us: int, latest_us: int | None) -> Reservation | None:
    """The next free slot for a send at `now_us`: now if the endpoint is idle (its next free slot has passed), else
    its next free slot; None when that lies past `latest_us` (the send's budget: it reserves nothing then)."""
    slot = now_us if next_us is None or next_us <= now_us else next_us
    if latest_us is not None and slot > latest_us:
        return None
    return Reservation(slot, slot + interval_us)


def wait_budget_us(lane_cap_seconds: float, spare_seconds: float | None) -> int:
    """How long a send may wait for its slot: its lane's cap, or less when its invocation has less to spare."""
    seconds = lane_cap_seconds if spare_seconds is None else max(0.0, min(lane_cap_seconds, spare_seconds))
    return round(seconds * MICROS)


def drain_room(window: int, limit: int | None) -> int:
    """How many released deliveries the drain keeps in flight: its window, and with a limit no more slots than fit in
    a release's budget (WAIT_SECONDS), so that its releases find their slots (the rest stay parked, in order, where a
    pause or a reopen need not take them back). Still more than a second of the limit: the drain, looking every
    second, never runs dry between looks."""
    if limit is None:
        return window
    return max(1, min(window, int(limit * WAIT_SECONDS / (1 + HEADROOM))))


def backlog_seconds(next_us: int | None, now_us: int) -> float:
    """How far ahead the endpoint's slots are reserved: sends already waiting for their turn, in seconds."""
    return 0.0 if next_us is None or next_us <= now_us else (next_us - now_us) / MICROS
