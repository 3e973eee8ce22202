"""The per-key rate limit's tallies (domain/rate_limit.py, services/rate_limit.py): how many requests each container
admits and how many writes that costs, on a shared counter with DynamoDB's conditional-add semantics."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from hookrelay.domain.rate_limit import LEASE_SHARE
from hookrelay.services.rate_limit import RateLimiter
from tests.support.fakes import FakeClock

SECOND = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


@dataclass
class SharedCounters:
    """The RateLimits table as the adapter uses it: a conditional ADD that adds nothing past the limit. Each call is a
    write (a refused conditional update is billed too)."""

    counts: dict[str, int] = field(default_factory=dict)
    writes: int = 0

    def take(self, counter_id: str, amount: int, limit: int, expires_at: int) -> bool:
        self.writes += 1
        if self.counts.get(counter_id, 0) + amount > limit:
            return False
        self.counts[counter_id] = self.counts.get(counter_id, 0) + amount
        return True


def container(counters: SharedCounters, clock: FakeClock, limit: int) -> RateLimiter:
    return RateLimiter(counters, per_key_per_second=limit, clock=clock)


def test_a_keys_only_request_of_a_second_is_admitted_without_a_write() -> None:
    counters, clock = SharedCounters(), FakeClock(SECOND)
    limiter = container(counters, clock, limit=50)
    for n in range(5):  # a request every 2.5 s: each the first of its second
        clock.now = SECOND + timedelta(seconds=2.5 * n)
        assert limiter.admit("key_a")
    assert counters.writes == 0


def test_the_seconds_first_request_is_counted_by_the_next_so_one_container_gets_exactly_the_limit() -> None:
    counters, clock = SharedCounters(), FakeClock(SECOND)
    limiter = container(counters, clock, limit=3)
    assert [limiter.admit("key_a") for _ in range(5)] == [True, True, True, False, False]
    assert counters.counts == {f"key_a#{int(SECOND.timestamp())}": 3}  # the free first one included


def test_once_refused_the_key_is_refused_for_the_rest_of_the_second_without_writes() -> None:
    counters, clock = SharedCounters(), FakeClock(SECOND)
    limiter = container(counters, clock, limit=3)
    for _ in range(4):
        limiter.admit("key_a")
    writes = counters.writes
    assert not any(limiter.admit("key_a") for _ in range(100))
    assert counters.writes == writes
    clock.now = SECOND + timedelta(seconds=1)
    assert limiter.admit("key_a")  # a new second


def test_a_busy_key_is_counted_ahead_in_the_following_seconds() -> None:
    counters, clock = SharedCounters(), FakeClock(SECOND)
    limiter = container(counters, clock, limit=50)
    writes_per_second = []
    for second in range(3):
        before = counters.writes
        for n in range(40):
            clock.now = SECOND + timedelta(seconds=second, milliseconds=25 * n)
            assert limiter.admit("key_a")
        writes_per_second.append(counters.writes - before)
    # The first second writes for every request but its first; the next ones lease a quarter of the limit at a time.
    assert writes_per_second[0] == 39
    assert writes_per_second[1] <= 40 // (50 // LEASE_SHARE) + 1 and writes_per_second[2] == writes_per_second[1]


def test_a_lease_is_not_carried_over_a_quiet_gap() -> None:
    counters, clock = SharedCounters(), FakeClock(SECOND)
    limiter = container(counters, clock, limit=50)
    for _ in range(40):
        limiter.admit("key_a")
    clock.now = SECOND + timedelta(seconds=5)
    limiter.admit("key_a")
    limiter.admit("key_a")  # the second's second request counts itself and the first, and leases nothing
    assert counters.counts[f"key_a#{int(SECOND.timestamp()) + 5}"] == 2


def test_near_the_limit_a_lease_that_does_not_fit_is_dropped_and_the_request_still_counted() -> None:
    counters, clock = SharedCounters(), FakeClock(SECOND)
    limiter = container(counters, clock, limit=20)
    for _ in range(20):
        limiter.admit("key_a")
    clock.now = SECOND + timedelta(seconds=1)
    counter = f"key_a#{int(SECOND.timestamp()) + 1}"
    counters.counts[counter] = 16  # other containers' requests this second
    assert limiter.admit("key_a")  # free: the second's first here
    assert limiter.admit("key_a")  # 2 + a lease of 5 does not fit; 2 does
    assert counters.counts[counter] == 18
    assert limiter.admit("key_a") and limiter.admit("key_a")
    assert not limiter.admit("key_a")
    assert counters.counts[counter] == 20


def test_a_lease_held_unused_elsewhere_costs_the_key_at_most_its_share_of_the_limit() -> None:
    counters, clock = SharedCounters(), FakeClock(SECOND)
    quiet, flooded = container(counters, clock, limit=40), container(counters, clock, limit=40)
    clock.now = SECOND - timedelta(seconds=1)
    for _ in range(30):
        quiet.admit("key_a")  # busy the second before: it will lease ahead
    clock.now = SECOND
    assert quiet.admit("key_a") and quiet.admit("key_a")  # the second one writes 2 and leases 40 // LEASE_SHARE
    admitted = 2 + sum(flooded.admit("key_a") for _ in range(100))
    assert admitted == 40 - 40 // LEASE_SHARE


def test_keys_are_tallied_apart() -> None:
    counters, clock = SharedCounters(), FakeClock(SECOND)
    limiter = container(counters, clock, limit=2)
    assert [limiter.admit("key_a") for _ in range(3)] == [True, True, False]
    assert [limiter.admit("key_b") for _ in range(3)] == [True, True, False]


@settings(max_examples=200, deadline=None)
@given(
    limit=st.integers(min_value=1, max_value=60),
    busy_before=st.lists(st.integers(min_value=0, max_value=80), min_size=1, max_size=6),
    order=st.lists(st.integers(min_value=0, max_value=5), min_size=0, max_size=400),
)
def test_containers_together_stay_within_the_stated_bounds(
    limit: int, busy_before: list[int], order: list[int]
) -> None:
    """Any interleaving of one key's requests over several containers in one second, each container having seen the
    key at its own rate the second before: at most one request per container over the limit, and a key that asks
    enough is refused no sooner than the other containers' unused leases explain."""
    counters, clock = SharedCounters(), FakeClock(SECOND)
    containers = [container(counters, clock, limit) for _ in busy_before]
    for limiter, busy in zip(containers, busy_before, strict=True):
        clock.now = SECOND - timedelta(seconds=1)
        for _ in range(busy):
            limiter.admit("key_a")
    clock.now = SECOND
    admitted = sum(containers[i % len(containers)].admit("key_a") for i in order)
    assert admitted <= limit + len(containers)
    refused = len(order) - admitted
    if refused:
        assert admitted >= limit - (len(containers) - 1) * (limit // LEASE_SHARE)
