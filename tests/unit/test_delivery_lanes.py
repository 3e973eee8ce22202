"""Delivery lanes (domain/lanes.py) in the delivery service, on the fakes: when an endpoint moves to its slow lane
and back, what is forwarded there, and that each message group's order holds across the switch, crashes included."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from hookrelay.domain import lanes
from hookrelay.domain.circuit import CircuitState
from hookrelay.domain.classification import FailureKind
from hookrelay.domain.lanes import message_key, quickens, slows
from hookrelay.domain.queues import DeliveryLane
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.delivery import DELIVERIES_FORWARDED, LANE_ERRORS, LANE_QUICKENED, LANE_SLOWED, Lanes
from hookrelay.services.ports import DeliveryMessage, SendResult
from tests.support.delivery_world import OK, TIMEOUT, World, make_world
from tests.support.fakes import FakeSlowTails

THRESHOLD_MS = 1000
SLOW = SendResult(200, 1500)


@dataclass
class RecordingQueue:
    sent: list[DeliveryMessage] = field(default_factory=list)
    sends: int = 0
    fail_next: bool = False

    def enqueue(self, messages: Sequence[DeliveryMessage]) -> None:
        if self.fail_next:
            self.fail_next = False
            raise ConnectionError("the process died between the tail and the send")
        self.sent.extend(messages)
        self.sends += 1


@pytest.fixture
def world() -> World:
    world = make_world()
    world.service.lanes = Lanes(queue=RecordingQueue(), tails=FakeSlowTails(), slow_after_ms=THRESHOLD_MS)
    return world


def queue(world: World) -> RecordingQueue:
    assert world.service.lanes is not None
    recording = world.service.lanes.queue
    assert isinstance(recording, RecordingQueue)
    return recording


def endpoint(world: World):  # type: ignore[no-untyped-def]
    return world.endpoints.items[("tn_1", "ep_1")]


def tails_store(world: World) -> FakeSlowTails:
    assert world.service.lanes is not None and isinstance(world.service.lanes.tails, FakeSlowTails)
    return world.service.lanes.tails


def tails(world: World) -> dict[str, str]:
    """The groups' tails, where the slow lane keeps them."""
    return tails_store(world).items


def forwarded_earlier(world: World, group: str, key: str) -> None:
    """A message of `group` forwarded before, still waiting in the slow lane: its tail and its mark."""
    tails(world)[group] = key
    world.endpoints.mark_slow_tail("tn_1", "ep_1", lanes.tail_mark("ep_1", group))


def slow_lane(message: DeliveryMessage) -> DeliveryMessage:
    return replace(message, lane=DeliveryLane.SLOW)


def test_the_rule_slow_over_the_threshold_or_timed_out_quick_again_within_half() -> None:
    assert slows(1001, None, 1000) and slows(10, FailureKind.TIMEOUT, 1000) and not slows(1000, None, 1000)
    assert quickens(500, None, 1000) and not quickens(501, None, 1000)
    assert not quickens(10, FailureKind.CONNECTION, 1000)  # no answer is no sign of health


@pytest.mark.parametrize("result", [SLOW, TIMEOUT])
def test_a_slow_attempt_in_the_fast_lane_moves_the_endpoint_to_the_slow_lane(world: World, result: SendResult) -> None:
    world.script(result)
    world.service.attempt(world.message(1))
    assert endpoint(world).lane is DeliveryLane.SLOW
    assert world.telemetry.counts.get(LANE_SLOWED) == 1


def test_a_quick_attempt_leaves_the_endpoint_in_the_fast_lane(world: World) -> None:
    world.script(OK)
    world.service.attempt(world.message(1))
    assert endpoint(world).lane is DeliveryLane.FAST and queue(world).sent == []


def test_a_slow_endpoint_s_message_is_forwarded_unattempted_its_group_s_tail_first(world: World) -> None:
    world.endpoints.switch_lane("tn_1", "ep_1", DeliveryLane.SLOW)
    message = world.message(1)

    report = world.service.attempt(message)

    assert report.forwarded and not report.sent and world.sender.sent == []
    [forwarded] = queue(world).sent
    assert forwarded == replace(message, lane=DeliveryLane.SLOW, shard=endpoint(world).queue_shard)
    assert tails(world) == {message.group_id: message_key(message.delivery_id, 1)}
    assert endpoint(world).tail_marks == {lanes.tail_mark("ep_1", message.group_id)}
    assert world.current().status is DeliveryStatus.QUEUED
    assert world.telemetry.counts.get(DELIVERIES_FORWARDED) == 1


def test_in_the_slow_lane_the_message_is_attempted_its_tail_cleared_and_a_quick_answer_brings_the_endpoint_back(
    world: World,
) -> None:
    world.endpoints.switch_lane("tn_1", "ep_1", DeliveryLane.SLOW)
    world.service.attempt(world.message(1))
    [forwarded] = queue(world).sent
    world.script(OK)

    report = world.service.attempt(forwarded)

    assert report.sent and report.status is DeliveryStatus.DELIVERED
    assert tails(world) == {} and endpoint(world).lane is DeliveryLane.FAST
    assert world.telemetry.counts.get(LANE_QUICKENED) == 1


def test_back_in_the_fast_lane_a_group_with_a_message_still_in_the_slow_lane_is_forwarded_behind_it(
    world: World,
) -> None:
    forwarded_earlier(world, "grp", "dlv_0#1")  # an earlier message of the group waits there
    report = world.service.attempt(world.message(1))
    assert report.forwarded and world.sender.sent == []
    assert tails(world) == {"grp": "dlv_1#1"}


def test_a_settled_message_leaves_the_tail_of_a_later_one_forwarded_since(world: World) -> None:
    world.endpoints.switch_lane("tn_1", "ep_1", DeliveryLane.SLOW)
    world.service.attempt(world.message(1))
    [forwarded] = queue(world).sent
    forwarded_earlier(world, "grp", "dlv_2#1")  # the group's next message, forwarded since
    world.script(OK)
    world.service.attempt(forwarded)
    assert tails(world) == {"grp": "dlv_2#1"} and endpoint(world).tail_marks == {"grp"}


def test_a_crash_between_the_tail_and_the_send_forwards_it_when_the_message_comes_back(world: World) -> None:
    world.endpoints.switch_lane("tn_1", "ep_1", DeliveryLane.SLOW)
    queue(world).fail_next = True
    with pytest.raises(ConnectionError):  # the invocation fails: the message is not deleted
        world.service.attempt(world.message(1))
    assert tails(world) == {"grp": "dlv_1#1"} and queue(world).sent == []

    world.service.attempt(world.message(1))  # back after its visibility timeout, first in its group

    assert len(queue(world).sent) == 1 and tails(world) == {"grp": "dlv_1#1"}
    assert world.sender.sent == []


def test_a_crash_before_the_tail_is_cleared_sends_nothing_again_and_clears_it_when_the_message_comes_back(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.endpoints.switch_lane("tn_1", "ep_1", DeliveryLane.SLOW)
    world.service.attempt(world.message(1))
    [forwarded] = queue(world).sent
    world.script(SLOW)  # answered, slowly: the endpoint stays slow
    store = tails_store(world)
    clear = store.clear

    def dies(*args: object) -> bool:
        raise ConnectionError("the process died after settling the attempt")

    monkeypatch.setattr(store, "clear", dies)
    with pytest.raises(ConnectionError):
        world.service.attempt(forwarded)
    assert world.current().status is DeliveryStatus.DELIVERED and tails(world) == {"grp": "dlv_1#1"}
    monkeypatch.setattr(store, "clear", clear)

    report = world.service.attempt(forwarded)  # back: its attempt is recorded, so nothing is sent

    assert not report.sent and len(world.sender.sent) == 1
    assert tails(world) == {}


def test_an_open_circuit_parks_the_message_where_it_is_instead_of_forwarding_it(world: World) -> None:
    world.endpoints.switch_lane("tn_1", "ep_1", DeliveryLane.SLOW)
    world.endpoints.put(replace(endpoint(world), circuit=CircuitState.OPEN))
    report = world.service.attempt(world.message(1))
    assert report.parked and queue(world).sent == []


def test_a_slow_lane_message_that_is_no_forward_clears_nothing(world: World) -> None:
    world.script(OK)
    tails(world)["grp"] = "dlv_1#1"  # named, but never marked: its forward died before the mark, and never sent it
    world.service.attempt(slow_lane(world.message(1)))  # e.g. a drain's release, sent to the slow lane directly
    assert tails(world) == {"grp": "dlv_1#1"}


def test_a_message_its_batch_has_no_time_left_to_attempt_is_forwarded_instead(world: World) -> None:
    report = world.service.attempt(world.message(1), late=True)
    assert report.forwarded and world.sender.sent == []
    assert endpoint(world).lane is DeliveryLane.FAST  # the endpoint stays where it is: only this message moved
    assert tails(world) == {"grp": "dlv_1#1"}  # and its group's next ones follow it there, in order


def test_a_late_message_behind_an_open_circuit_is_parked_not_forwarded(world: World) -> None:
    world.endpoints.put(replace(endpoint(world), circuit=CircuitState.OPEN))
    report = world.service.attempt(world.message(1), late=True)
    assert report.parked and queue(world).sent == []


def test_a_batch_releases_its_settled_groups_after_a_multiple_of_its_quickest_and_never_sooner_than_the_floor() -> None:
    assert lanes.release_after(0.001) == lanes.RELEASE_FLOOR_SECONDS
    assert lanes.release_after(0.5) == lanes.RELEASE_RATIO * 0.5


def test_the_architecture_doc_states_the_release_rule_of_the_code() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    assert f"`RELEASE_RATIO` ({lanes.RELEASE_RATIO}) times" in doc
    assert f"`RELEASE_FLOOR_SECONDS` ({lanes.RELEASE_FLOOR_SECONDS * 1000:.0f} ms)" in doc


# --- A run of a group's messages, forwarded together (DeliveryService.attempt_run) ---


def group_messages(*numbers: int, endpoint_id: str = "ep_1") -> list[DeliveryMessage]:
    return [DeliveryMessage(f"dlv_{n}", "tn_1", 1, "grp", f"dedup-{n}", endpoint_id=endpoint_id) for n in numbers]


def never_read() -> Iterator[DeliveryMessage]:
    raise AssertionError("the messages after the first were read")
    yield  # a generator


def test_a_slow_endpoint_s_run_is_forwarded_in_one_send_in_order_behind_one_tail_naming_its_last(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.endpoints.switch_lane("tn_1", "ep_1", DeliveryLane.SLOW)
    named: list[tuple[str, ...]] = []
    name = tails_store(world).name
    monkeypatch.setattr(tails_store(world), "name", lambda *args: named.append(args) or name(*args))
    first, *rest = group_messages(1, 2, 3, 4)

    reports = world.service.attempt_run(first, iter(rest))

    assert [r.delivery_id for r in reports] == ["dlv_1", "dlv_2", "dlv_3", "dlv_4"]
    assert all(r.forwarded and not r.sent for r in reports) and world.sender.sent == []
    assert queue(world).sends == 1
    assert queue(world).sent == [
        replace(m, lane=DeliveryLane.SLOW, shard=endpoint(world).queue_shard) for m in [first, *rest]
    ]
    assert named == [("grp", "dlv_4#1")] and tails(world) == {"grp": "dlv_4#1"}
    assert world.telemetry.counts.get(DELIVERIES_FORWARDED) == 4


def test_the_run_ends_before_a_message_that_is_not_its_endpoint_s(world: World) -> None:
    world.endpoints.switch_lane("tn_1", "ep_1", DeliveryLane.SLOW)
    first, second, other = [*group_messages(1, 2), *group_messages(3, endpoint_id="ep_2")]

    reports = world.service.attempt_run(first, iter([second, other]))

    assert [r.delivery_id for r in reports] == ["dlv_1", "dlv_2"]  # dlv_3 is left to `attempt`
    assert [m.delivery_id for m in queue(world).sent] == ["dlv_1", "dlv_2"]


def test_a_healthy_endpoint_s_first_message_is_attempted_alone_and_the_rest_not_even_read(world: World) -> None:
    world.script(OK)
    first = replace(world.message(1), endpoint_id="ep_1")

    [report] = world.service.attempt_run(first, never_read())

    assert report.sent and report.status is DeliveryStatus.DELIVERED and queue(world).sent == []


def test_a_crash_between_the_run_s_tail_and_its_send_forwards_each_once_in_order_when_they_come_back(
    world: World,
) -> None:
    world.endpoints.switch_lane("tn_1", "ep_1", DeliveryLane.SLOW)
    first, *rest = group_messages(1, 2, 3)
    queue(world).fail_next = True
    with pytest.raises(ConnectionError):  # the invocation fails: the group's messages are not deleted
        world.service.attempt_run(first, iter(rest))
    assert tails(world) == {"grp": "dlv_3#1"} and queue(world).sent == []

    world.service.attempt_run(first, iter(rest))  # back after their visibility timeout, in order

    assert [m.delivery_id for m in queue(world).sent] == ["dlv_1", "dlv_2", "dlv_3"]
    assert tails(world) == {"grp": "dlv_3#1"}


def test_the_slow_lane_clears_the_tail_only_when_the_run_s_last_message_settles(world: World) -> None:
    world.endpoints.switch_lane("tn_1", "ep_1", DeliveryLane.SLOW)
    first, *rest = group_messages(1, 2, 3)
    world.service.attempt_run(first, iter(rest))
    forwarded = list(queue(world).sent)
    world.script(SLOW)  # dlv_1's attempt (the others' deliveries are not in this world: nothing to send)

    for message in forwarded[:2]:
        world.service.attempt(message)
        assert tails(world) == {"grp": "dlv_3#1"}  # a fast-lane message would still go behind them
    world.service.attempt(forwarded[2])

    assert tails(world) == {}


# --- The tails off the endpoint's item: a group's mark, written once per slow spell, not around every forward ---


def test_a_marked_group_s_later_forwards_write_its_tail_only_not_the_endpoint(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.endpoints.switch_lane("tn_1", "ep_1", DeliveryLane.SLOW)
    marked: list[tuple[str, ...]] = []
    mark = world.endpoints.mark_slow_tail
    monkeypatch.setattr(world.endpoints, "mark_slow_tail", lambda *args: marked.append(args) or mark(*args))

    for n in (1, 2, 3):
        world.service.attempt(DeliveryMessage(f"dlv_{n}", "tn_1", 1, "grp", f"dedup-{n}", endpoint_id="ep_1"))

    assert marked == [("tn_1", "ep_1", "grp")]  # the first forward's only
    assert tails(world) == {"grp": "dlv_3#1"} and [m.delivery_id for m in queue(world).sent] == [
        "dlv_1",
        "dlv_2",
        "dlv_3",
    ]


def test_a_crash_between_the_tail_and_the_mark_sent_nothing_and_the_message_is_forwarded_again_with_both(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.endpoints.switch_lane("tn_1", "ep_1", DeliveryLane.SLOW)
    mark = world.endpoints.mark_slow_tail

    def dies(*args: object) -> None:
        raise ConnectionError("the process died between the tail and the mark")

    monkeypatch.setattr(world.endpoints, "mark_slow_tail", dies)
    with pytest.raises(ConnectionError):
        world.service.attempt(world.message(1))
    assert tails(world) == {"grp": "dlv_1#1"} and endpoint(world).tail_marks == frozenset()
    assert queue(world).sent == []  # unmarked, but nothing waits in the slow lane: its next message may go fast
    monkeypatch.setattr(world.endpoints, "mark_slow_tail", mark)

    world.service.attempt(world.message(1))  # back, first in its group

    assert [m.delivery_id for m in queue(world).sent] == ["dlv_1"] and endpoint(world).tail_marks == {"grp"}


def test_a_marked_group_whose_tail_settled_is_unmarked_and_attempted_in_the_fast_lane(world: World) -> None:
    world.endpoints.mark_slow_tail("tn_1", "ep_1", "grp")  # its slow-lane message settled; the mark is left
    world.script(OK)

    report = world.service.attempt(world.message(1))

    assert report.sent and report.status is DeliveryStatus.DELIVERED and queue(world).sent == []
    assert endpoint(world).tail_marks == frozenset()  # the group's next message reads no tail


def test_a_mark_that_cannot_be_taken_off_costs_a_read_not_the_attempt(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.endpoints.mark_slow_tail("tn_1", "ep_1", "grp")

    def fails(*args: object) -> None:
        raise ConnectionError("throttled")

    monkeypatch.setattr(world.endpoints, "unmark_slow_tail", fails)
    world.script(OK)

    report = world.service.attempt(world.message(1))

    assert report.sent and report.status is DeliveryStatus.DELIVERED
    assert [(metric, str(error)) for metric, _, error in world.telemetry.errors] == [(LANE_ERRORS, "throttled")]
    assert endpoint(world).tail_marks == {"grp"}


def test_an_unmarked_group_s_message_reads_no_tail(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    def unread(group: str) -> str | None:
        raise AssertionError(f"{group}'s tail was read")

    monkeypatch.setattr(tails_store(world), "tail", unread)
    world.script(OK)
    assert world.service.attempt(world.message(1)).status is DeliveryStatus.DELIVERED


def test_a_tail_the_endpoint_kept_in_its_own_item_still_holds_its_group_back_and_is_cleared_when_settled(
    world: World,
) -> None:
    """Endpoints stored before the tails' table kept them in a map: read and cleared, never written."""
    world.endpoints.put(replace(endpoint(world), slow_tails={"grp": "dlv_1#1"}))
    report = world.service.attempt(world.message(2))
    assert report.forwarded and tails(world) == {"grp": "dlv_1#2"}

    world.script(SLOW, SLOW)
    world.service.attempt(slow_lane(world.message(1)))  # the map's message settles: the map forgets it
    assert endpoint(world).slow_tails == {} and tails(world) == {"grp": "dlv_1#2"}
