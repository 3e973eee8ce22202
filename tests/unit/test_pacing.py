"""The per-endpoint rate limit (domain/pacing.py): the pacing rule, and the delivery service keeping it on the fakes:
sends wait for their slots, endpoints without a limit pay nothing, and a send with no slot in its budget waits
elsewhere (forwarded, the drain paused) and is never handed back."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import pytest

from hookrelay.domain import pacing
from hookrelay.domain.circuit import CircuitState, Via
from hookrelay.domain.limits import MAX_RATE_LIMIT_PER_SECOND, MIN_RATE_LIMIT_PER_SECOND
from hookrelay.domain.queues import DeliveryLane
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.delivery import Lanes
from hookrelay.services.pacing import Pacing
from hookrelay.services.ports import DeliveryMessage
from tests.support.delivery_world import OK, World, make_world
from tests.support.fakes import FakePacer, FakeSlowTails

# --- The rule ---


def starts_per_window(starts_us: Sequence[int]) -> int:
    """The most starts in any one-second window (not only the aligned ones)."""
    ordered, most, low = sorted(starts_us), 0, 0
    for high, start in enumerate(ordered):
        while start - ordered[low] >= pacing.MICROS:
            low += 1
        most = max(most, high - low + 1)
    return most


@pytest.mark.parametrize("limit", [1, 3, 7, 50, 333, MAX_RATE_LIMIT_PER_SECOND])
def test_back_to_back_slots_never_put_more_than_the_limit_in_any_second(limit: int) -> None:
    next_us, slots = None, []
    for _ in range(limit * 5):
        taken = pacing.reserve(next_us, 0, pacing.slot_interval_us(limit), None)  # everyone asks at once
        assert taken is not None
        next_us = taken.next_us
        slots.append(taken.slot_us)
    assert limit * (1 - 2 * pacing.HEADROOM) <= starts_per_window(slots) <= limit  # the limit, less the headroom
    # The headroom: a start up to a little late does not crowd the limit + 1st into a second.
    late = [slot + (pacing.slot_interval_us(limit) - pacing.MICROS // limit) * (i % 2) for i, slot in enumerate(slots)]
    assert starts_per_window(late) <= limit


def test_an_idle_endpoint_sends_now_and_a_busy_one_at_its_next_free_slot() -> None:
    interval = pacing.slot_interval_us(50)
    assert pacing.reserve(None, 1_000, interval, None) == pacing.Reservation(1_000, 1_000 + interval)
    assert pacing.reserve(500, 1_000, interval, None) == pacing.Reservation(1_000, 1_000 + interval)  # passed: idle
    assert pacing.reserve(9_000, 1_000, interval, None) == pacing.Reservation(9_000, 9_000 + interval)


def test_a_slot_past_the_budget_is_not_taken() -> None:
    assert pacing.reserve(9_000, 1_000, 100, latest_us=8_999) is None
    assert pacing.reserve(9_000, 1_000, 100, latest_us=9_000) == pacing.Reservation(9_000, 9_100)


def test_the_budget_is_the_lanes_cap_or_what_the_invocation_has_to_spare() -> None:
    assert pacing.wait_budget_us(5, None) == 5 * pacing.MICROS
    assert pacing.wait_budget_us(5, 2.5) == 2_500_000
    assert pacing.wait_budget_us(5, -3) == 0


def test_the_limit_is_optional_a_whole_number_in_range_and_serves_its_message_groups() -> None:
    assert pacing.check_rate_limit(None, 50) is None
    assert pacing.check_rate_limit(1, pacing.WAIT_SECONDS) == 1
    for bad in (0, MAX_RATE_LIMIT_PER_SECOND + 1, True, 2.5):
        with pytest.raises(ValueError):
            pacing.check_rate_limit(bad, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_in_flight"):
        pacing.check_rate_limit(1, pacing.WAIT_SECONDS + 1)


def test_the_drain_keeps_what_its_releases_budget_holds_in_flight() -> None:
    assert pacing.drain_room(500, None) == 500
    room = pacing.drain_room(500, 50)  # the slots that fit a release's budget, more than a second of the limit
    assert room > 50 and pacing.reserve(None, 0, pacing.slot_interval_us(50), None) is not None
    assert (room - 1) * pacing.slot_interval_us(50) <= pacing.WAIT_SECONDS * pacing.MICROS
    assert pacing.drain_room(200, 1_000) == 200
    assert pacing.drain_room(200, 1) == 1


def test_the_backlog_is_how_far_ahead_the_slots_are_taken() -> None:
    assert pacing.backlog_seconds(None, 10) == 0 and pacing.backlog_seconds(5, 10) == 0
    assert pacing.backlog_seconds(3 * pacing.MICROS, pacing.MICROS) == 2


# --- The delivery service ---


@dataclass
class RecordingQueue:
    sent: list[DeliveryMessage] = field(default_factory=list)

    def enqueue(self, messages: Sequence[DeliveryMessage]) -> None:
        self.sent.extend(messages)


@pytest.fixture
def world() -> World:
    world = make_world()
    world.service.pacing = Pacing(FakePacer())
    world.service.lanes = Lanes(queue=RecordingQueue(), tails=FakeSlowTails())
    return world


def pacer(world: World) -> FakePacer:
    assert world.service.pacing is not None and isinstance(world.service.pacing.pacer, FakePacer)
    return world.service.pacing.pacer


def limit(world: World, per_second: int | None) -> None:
    key = ("tn_1", "ep_1")
    world.endpoints.items[key] = replace(world.endpoints.items[key], rate_limit_per_second=per_second)


def test_an_endpoint_without_a_limit_reserves_nothing_and_waits_for_nothing(world: World) -> None:
    world.script(OK)
    assert world.service.attempt(world.message(1)).status is DeliveryStatus.DELIVERED
    assert pacer(world).reservations == [] and world.clock.slept == []


def test_a_limited_endpoints_send_waits_for_its_slot_and_starts_at_it(world: World) -> None:
    limit(world, 2)
    ahead = world.clock.now + timedelta(seconds=1.5)
    pacer(world).next_us["ep_1"] = round(ahead.timestamp() * pacing.MICROS)  # others took the slots before it
    world.script(OK)
    assert world.service.attempt(replace(world.message(1), lane=DeliveryLane.SLOW)).sent
    assert world.clock.slept == [pytest.approx(1.5)]
    assert world.current().attempts[0].started_at == ahead


def test_a_fast_lane_message_with_no_slot_in_its_budget_is_forwarded_not_handed_back(world: World) -> None:
    limit(world, 1)
    far = world.clock.now + timedelta(seconds=pacing.WAIT_SECONDS + 1)
    pacer(world).next_us["ep_1"] = round(far.timestamp() * pacing.MICROS)
    report = world.service.attempt(world.message(1))
    assert report.forwarded and not report.sent
    queue = world.service.lanes.queue if world.service.lanes else None
    assert isinstance(queue, RecordingQueue) and [m.lane for m in queue.sent] == [DeliveryLane.SLOW]
    assert pacer(world).reservations == [] and world.current().status is DeliveryStatus.QUEUED


def test_a_slow_lane_first_attempt_always_takes_its_slot(world: World) -> None:
    limit(world, 1)
    far = world.clock.now + timedelta(seconds=pacing.WAIT_SECONDS + 1)
    pacer(world).next_us["ep_1"] = round(far.timestamp() * pacing.MICROS)
    world.script(OK)
    assert world.service.attempt(replace(world.message(1), lane=DeliveryLane.SLOW)).sent
    assert world.current().attempts[0].started_at == far


def test_a_drain_release_with_no_slot_in_its_budget_pauses_the_drain_and_stays_parked(world: World) -> None:
    limit(world, 1)
    key = ("tn_1", "ep_1")
    world.endpoints.items[key] = replace(world.endpoints.items[key], circuit=CircuitState.DRAINING)
    far = world.clock.now + timedelta(seconds=pacing.WAIT_SECONDS + 1)
    pacer(world).next_us["ep_1"] = round(far.timestamp() * pacing.MICROS)
    message = replace(world.message(1), via=Via.DRAIN, endpoint_id="ep_1", lane=DeliveryLane.SLOW)
    report = world.service.attempt(message)
    assert report.parked and not report.sent
    paused = world.endpoints.items[key].drain_paused_until
    assert paused == world.clock.now + timedelta(seconds=pacing.WAIT_SECONDS)
    assert world.current().attempts == []


def test_a_hundred_sends_in_a_row_hold_the_limit(world: World) -> None:
    """Sends one after another as fast as they come: their starts are spaced by the slots."""
    limit(world, 10)
    starts: list[datetime] = []
    for n in range(100):
        world.script(OK)
        world.delivery = replace(world.delivery, id=f"dlv_{n}")
        world.deliveries.put_many([world.delivery])
        world.service.attempt(replace(world.message(1), lane=DeliveryLane.SLOW))
        starts.append(world.current().attempts[0].started_at)
    per_second = Counter(int(s.timestamp()) for s in starts)
    assert max(per_second.values()) <= 10
    assert starts_per_window([round(s.timestamp() * pacing.MICROS) for s in starts]) <= 10


def test_the_consumer_guide_states_the_limits_numbers() -> None:
    from pathlib import Path

    guide = (Path(__file__).parents[2] / "docs" / "consumer-guide.md").read_text()
    assert f"a whole number from {MIN_RATE_LIMIT_PER_SECOND} to {MAX_RATE_LIMIT_PER_SECOND}" in guide
    assert f"at most {pacing.WAIT_SECONDS} x the limit" in guide and f"about {pacing.WAIT_SECONDS} seconds" in guide
    assert f"with {pacing.HEADROOM:.0%} to spare" in guide


def test_a_crash_between_taking_a_slot_and_sending_loses_the_slot_and_nothing_else(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reservation is the one write before the send: a crash after it leaves the delivery as it was (a first
    attempt is not claimed before its send), so the message, come back, takes a new slot and is sent once."""
    limit(world, 5)
    message = replace(world.message(1), lane=DeliveryLane.SLOW)
    send = world.sender.send

    def crash(*args: object) -> object:
        raise ConnectionError("the process died after its slot and before the send")

    monkeypatch.setattr(world.sender, "send", crash)
    with pytest.raises(ConnectionError):
        world.service.attempt(message)
    assert len(pacer(world).reservations) == 1 and world.current().status is DeliveryStatus.QUEUED

    monkeypatch.setattr(world.sender, "send", send)
    world.script(OK)
    assert world.service.attempt(message).status is DeliveryStatus.DELIVERED
    first, second = (slot for _, slot in pacer(world).reservations)
    assert second - first >= pacing.slot_interval_us(5)  # the lost slot is one send fewer that second
    assert len(world.sender.sent) == 1 and world.current().attempt_count == 1
