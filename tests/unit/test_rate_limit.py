"""The per-key rate limit's tallies (domain/rate_limit.py, services/rate_limit.py): how many requests each container
admits and how many writes that costs, on shared counters with DynamoDB's conditional-add semantics; a high limit's
counters split over shards of at most REQUESTS_PER_COUNTER requests each."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookrelay.domain.rate_limit import (
    DEFAULT_PER_KEY_PER_SECOND,
    LEASE_SHARE,
    REQUESTS_PER_COUNTER,
    SHARD_TRIES,
    counter_shards,
    shard_limit,
    window,
)
from hookrelay.services.rate_limit import RateLimiter
from tests.support.fakes import FakeClock

SECOND = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
EPOCH = int(SECOND.timestamp())


@dataclass
class SharedCounters:
    """The RateLimits table as the adapter uses it: a conditional ADD that adds nothing past the limit. Each call is a
    write (a refused conditional update is billed too)."""

    counts: dict[str, int] = field(default_factory=dict)
    writes: int = 0
    asked: list[str] = field(default_factory=list)  # the counters written, in order (refused writes too)

    def take(self, counter_id: str, amount: int, limit: int, expires_at: int) -> bool:
        self.writes += 1
        self.asked.append(counter_id)
        if self.counts.get(counter_id, 0) + amount > limit:
            return False
        self.counts[counter_id] = self.counts.get(counter_id, 0) + amount
        return True


def container(counters: SharedCounters, clock: FakeClock, limit: int, start: int | None = None) -> RateLimiter:
    """One container's limiter; `start`: the counter shard it starts each second on (the first, unless given)."""
    pick: Callable[[int], int] = (lambda shards: 0) if start is None else (lambda shards: start % shards)
    return RateLimiter(counters, per_key_per_second=limit, clock=clock, pick_shard=pick)


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


# --- a high limit's counters, sharded -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "shards"), [(1, 1), (50, 1), (999, 1), (1_000, 1), (1_001, 2), (2_500, 3), (3_000, 3), (62_500, 63)]
)
def test_a_limit_has_a_counter_per_thousand_requests(limit: int, shards: int) -> None:
    assert counter_shards(limit) == shards


@settings(max_examples=300, deadline=None)
@given(limit=st.one_of(st.sampled_from([1, 999, 1_000, 1_001, 62_500]), st.integers(min_value=1, max_value=10**7)))
def test_the_shards_limits_add_up_to_the_limit_each_within_a_counters_most(limit: int) -> None:
    shards = counter_shards(limit)
    parts = [shard_limit(limit, shard) for shard in range(shards)]
    assert shards == math.ceil(limit / REQUESTS_PER_COUNTER)
    assert sum(parts) == limit
    assert max(parts) <= REQUESTS_PER_COUNTER and max(parts) - min(parts) <= 1


def test_up_to_a_thousand_the_keys_one_counter_keeps_its_id_and_past_it_each_shard_has_its_own() -> None:
    second = window("key_a", SECOND)
    assert second.counter_id(0, 1) == f"key_a#{EPOCH}"  # as before shards: deployed counters and tests unchanged
    assert [second.counter_id(shard, 3) for shard in range(3)] == [f"key_a#{EPOCH}#{n}" for n in range(3)]
    counters, clock = SharedCounters(), FakeClock(SECOND)
    limiter = container(counters, clock, limit=1_000, start=7)
    assert all(limiter.admit("key_a") for _ in range(1_000))
    assert not limiter.admit("key_a")
    assert counters.counts == {f"key_a#{EPOCH}": 1_000}


def flood(containers: list[RateLimiter]) -> int:
    """Round after round, one request of key_a from each container still admitted, until every one is refused."""
    admitted, open_ = 0, list(containers)
    while open_:
        answers = [limiter.admit("key_a") for limiter in open_]
        admitted += sum(answers)
        open_ = [limiter for limiter, answer in zip(open_, answers, strict=True) if answer]
    return admitted


def test_a_limit_over_three_counters_admits_exactly_the_limit_from_several_containers_and_refuses_after() -> None:
    counters, clock = SharedCounters(), FakeClock(SECOND)
    containers = [container(counters, clock, limit=3_000, start=n) for n in range(4)]  # two start on counter 0
    writes = []
    for second in range(2):  # the first second with no leases, the next with each container's lease
        clock.now = SECOND + timedelta(seconds=second)
        before = counters.writes
        assert flood(containers) == 3_000
        assert not any(limiter.admit("key_a") for limiter in containers)
        assert [counters.counts[f"key_a#{EPOCH + second}#{n}"] for n in range(3)] == [1_000] * 3
        writes.append(counters.writes - before)
    # Leased, each counter's first three quarters cost a write a lease; its last, where no lease fits, one a request.
    assert writes[1] < 0.6 * writes[0]


def test_a_container_whose_counter_is_full_moves_to_the_next_and_stays_there() -> None:
    counters, clock = SharedCounters(), FakeClock(SECOND)
    counters.counts[f"key_a#{EPOCH}#0"] = 1_000  # other containers filled counter 0 this second
    limiter = container(counters, clock, limit=3_000, start=0)
    assert all(limiter.admit("key_a") for _ in range(3))
    assert counters.asked == [f"key_a#{EPOCH}#0", f"key_a#{EPOCH}#1", f"key_a#{EPOCH}#1"]
    assert counters.counts[f"key_a#{EPOCH}#1"] == 3


def test_when_every_counter_a_container_tries_is_full_the_key_is_over_there_for_the_second() -> None:
    counters, clock = SharedCounters(), FakeClock(SECOND)
    limit = 5_000  # five counters: a container tries three
    for shard in (4, 0, 1):
        counters.counts[f"key_a#{EPOCH}#{shard}"] = 1_000
    limiter = container(counters, clock, limit=limit, start=4)
    assert limiter.admit("key_a")  # the second's first, unwritten
    assert not limiter.admit("key_a")
    assert counters.asked == [f"key_a#{EPOCH}#{shard}" for shard in (4, 0, 1)]  # consecutive, modulo the five
    assert not any(limiter.admit("key_a") for _ in range(100)) and counters.writes == SHARD_TRIES
    # The trade: counters 2 and 3 had room, which a container starting on them still gets.
    assert container(counters, clock, limit=limit, start=2).admit("key_a")


def test_a_container_tries_each_counter_once_when_there_are_fewer_than_its_tries() -> None:
    counters, clock = SharedCounters(), FakeClock(SECOND)
    counters.counts |= {f"key_a#{EPOCH}#0": 1_000, f"key_a#{EPOCH}#1": 1_000}
    limiter = container(counters, clock, limit=2_000, start=1)
    assert limiter.admit("key_a") and not limiter.admit("key_a")
    assert counters.asked == [f"key_a#{EPOCH}#1", f"key_a#{EPOCH}#0"]


def test_a_container_picks_its_counter_once_a_second_among_the_keys_counters() -> None:
    picked: list[int] = []

    def pick(shards: int) -> int:
        picked.append(shards)
        return len(picked) % shards

    counters, clock = SharedCounters(), FakeClock(SECOND)
    limiter = RateLimiter(counters, per_key_per_second=62_500, clock=clock, pick_shard=pick)
    for second in range(2):
        clock.now = SECOND + timedelta(seconds=second)
        assert all(limiter.admit("key_a") for _ in range(5))
    assert picked == [63, 63]
    assert set(counters.counts) == {f"key_a#{EPOCH}#1", f"key_a#{EPOCH + 1}#2"}
    assert RateLimiter(counters, per_key_per_second=1).pick_shard == random.randrange  # deployed: at random


def test_a_lease_is_bounded_by_a_counters_share_not_the_keys() -> None:
    counters, clock = SharedCounters(), FakeClock(SECOND - timedelta(seconds=1))
    limiter = container(counters, clock, limit=62_500, start=5)
    for _ in range(400):
        limiter.admit("key_a")
    clock.now = SECOND
    assert limiter.admit("key_a") and limiter.admit("key_a")
    lease = shard_limit(62_500, 62) // LEASE_SHARE  # 992 // 4: the key's share, 15,625, would fit no counter
    assert counters.counts == {f"key_a#{EPOCH - 1}#5": 400, f"key_a#{EPOCH}#5": 2 + lease}


@settings(max_examples=200, deadline=None)
@given(
    limit=st.integers(min_value=1_001, max_value=4_000),
    filled=st.lists(st.integers(min_value=0, max_value=1_000), min_size=4, max_size=4),
    starts=st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=6),
    order=st.lists(st.integers(min_value=0, max_value=5), min_size=0, max_size=400),
)
def test_sharded_counters_each_stay_within_their_part_of_the_limit(
    limit: int, filled: list[int], starts: list[int], order: list[int]
) -> None:
    """Any interleaving of one key's requests over containers starting on any counters, the counters already part
    full from other containers: no counter counts past its part, and the key gets at most one request over its
    limit from each container (its second's first, when never counted)."""
    counters, clock = SharedCounters(), FakeClock(SECOND)
    shards = counter_shards(limit)
    for shard in range(shards):
        counters.counts[f"key_a#{EPOCH}#{shard}"] = min(filled[shard], shard_limit(limit, shard))
    before = sum(counters.counts.values())
    containers = [container(counters, clock, limit, start) for start in starts]
    admitted = sum(containers[i % len(containers)].admit("key_a") for i in order)
    for shard in range(shards):
        assert counters.counts[f"key_a#{EPOCH}#{shard}"] <= shard_limit(limit, shard)
    assert before + admitted <= limit + len(containers)


def test_the_deploying_doc_states_the_numbers_the_code_sets() -> None:
    doc = " ".join((Path(__file__).resolve().parents[2] / "docs" / "deploying.md").read_text().split())
    assert f"one counter per {REQUESTS_PER_COUNTER:,} requests of its limit" in doc
    assert f"up to {REQUESTS_PER_COUNTER:,}, the default among them" in doc
    assert DEFAULT_PER_KEY_PER_SECOND <= REQUESTS_PER_COUNTER
    assert f"tries the next ({SHARD_TRIES} in all)" in doc and f"with more than {SHARD_TRIES} counters" in doc
    assert LEASE_SHARE == 4 and "up to a quarter of its counter's limit per write" in doc
