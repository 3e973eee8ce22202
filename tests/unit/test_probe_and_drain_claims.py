"""A probe or drain attempt whose worker died between its claim and its record (found by the crash-point matrix,
tests/integration/test_crash_points.py [probe] and [drain]): the delivery is `attempting`, out of the lot, and the
message that comes back, or the probe's command sent again, carries it on."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hookrelay.domain.circuit import Via
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ports import DeliveryMessage
from tests.support.delivery_world import OK, World, make_world


def message(world: World, attempt: int, via: Via) -> DeliveryMessage:
    return DeliveryMessage(world.delivery.id, "tn_1", attempt, "grp", f"d-{attempt}", endpoint_id="ep_1", via=via)


def claimed_by_a_worker_that_died(world: World, *, keep_entry: bool) -> None:
    lot = world.service.parking.lot
    lot.park(world.delivery.id, "tn_1", "ep_1", 1, world.clock.now)
    assert lot.claim(world.delivery.id, "tn_1", "ep_1", 1, world.clock.now, keep_entry=keep_entry) is not None


def test_a_drain_attempt_left_claimed_is_made_by_its_message_once_the_claim_is_stale() -> None:
    world = make_world()
    claimed_by_a_worker_that_died(world, keep_entry=False)
    world.script(OK)

    early = world.service.attempt(message(world, 1, Via.DRAIN))  # a copy while the claim is fresh: nothing
    assert not early.sent and world.sender.sent == []
    world.clock.advance(world.service.claim_timeout.total_seconds() + 1)  # the message's visibility timeout
    later = world.service.attempt(message(world, 1, Via.DRAIN))

    assert later.sent and len(world.sender.sent) == 1
    assert world.current().status is DeliveryStatus.DELIVERED and world.current().attempt_count == 1


def test_a_probe_keeps_its_lot_entry_until_the_attempt_is_settled() -> None:
    world = make_world()
    claimed_by_a_worker_that_died(world, keep_entry=True)
    lot = world.service.parking.lot
    [entry] = lot.parked("ep_1", 10)  # still the oldest: the probe command, sent again, finds it
    assert entry.id == world.delivery.id and world.current().parked_at is None

    world.clock.advance(world.service.claim_timeout.total_seconds() + 1)
    world.script(OK)
    assert world.service.attempt(message(world, 1, Via.PROBE)).sent
    assert world.current().status is DeliveryStatus.DELIVERED


def test_a_probe_attempt_recorded_and_not_parked_again_is_resumed_by_a_fresh_execution() -> None:
    """The worker died after recording a failed probe and before parking the delivery again: `retrying`, carried by
    nothing. The command sent again probes it again; its first retry execution's name may be taken already."""
    world = make_world()
    due = world.clock.now + timedelta(seconds=10)
    world.deliveries.items[world.delivery.id] = replace(
        world.delivery, status=DeliveryStatus.RETRYING, attempt_count=1, next_attempt_at=due
    )

    report = world.service.attempt(message(world, 1, Via.PROBE))

    assert not report.sent and world.workflow.started == []
    [ticket] = world.workflow.resumed
    assert (ticket.delivery_id, ticket.attempt, ticket.next_attempt_at) == (world.delivery.id, 2, due)
