"""A fresh message (`DeliveryMessage.fresh`: sent by the ingest request that wrote its delivery) is attempted without
reading its delivery, which it rebuilds exactly as ingest wrote it; any other message reads it, as before."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from hookrelay.domain.lifecycle import fresh_fan_out, new_delivery
from hookrelay.domain.models import Delivery, EndpointState
from hookrelay.domain.queues import DeliveryLane
from hookrelay.domain.schedule import DEFAULT_SCHEDULE
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ingest import BatchItem, IngestService
from hookrelay.services.ports import DeliveryMessage, first_attempt_message
from tests.support.builders import T0, TENANT, an_endpoint
from tests.support.delivery_world import OK, World, make_world
from tests.support.fakes import FakeDeliveries, FakeEndpoints, FakeEvents, KnownTenants, RecordingQueue


class CountedReads:
    """Wraps the world's deliveries, counting the reads of each kind."""

    def __init__(self, world: World) -> None:
        self.reads: list[str] = []
        inner = world.deliveries
        for name in ("get", "peek"):
            original = getattr(inner, name)

            def counted(delivery_id: str, _original: Any = original, _name: str = name) -> Delivery | None:
                self.reads.append(_name)
                return _original(delivery_id)

            setattr(inner, name, counted)


def fan_out_world() -> tuple[World, DeliveryMessage, CountedReads]:
    """The world with its delivery replaced by the event's fan-out to the endpoint, as ingest writes it, and the
    fresh message ingest sends for it."""
    world = make_world()
    endpoint = world.endpoints.get("tn_1", "ep_1")
    assert endpoint is not None
    delivery = new_delivery(world.event, endpoint, world.event.timestamp)
    world.deliveries.items = {delivery.id: delivery}
    world.delivery = delivery
    return world, first_attempt_message(delivery, world.event, fresh=True), CountedReads(world)


def test_ingest_s_fan_out_is_rebuilt_exactly_as_it_was_written() -> None:
    world, message, _ = fan_out_world()
    endpoint = world.endpoints.get("tn_1", "ep_1")
    assert endpoint is not None
    assert fresh_fan_out(world.event, endpoint, message.delivery_id, message.group_id) == world.delivery
    assert fresh_fan_out(world.event, endpoint, "dlv_other", message.group_id) is None  # not the fan-out


def test_a_fresh_message_is_attempted_and_recorded_without_reading_its_delivery() -> None:
    world, message, counted = fan_out_world()
    world.script(OK)

    report = world.service.attempt(message)

    assert report.sent and report.status is DeliveryStatus.DELIVERED
    assert counted.reads == []
    assert world.current().status is DeliveryStatus.DELIVERED and world.current().attempt_count == 1


@pytest.mark.parametrize(
    "change",
    [
        {"fresh": False},
        {"receive_count": 2},  # handed out before: an earlier receipt may have made the attempt
        {"lane": DeliveryLane.SLOW},  # a forwarded copy
    ],
    ids=["not fresh", "received again", "forwarded"],
)
def test_any_other_message_reads_its_delivery_and_sends_nothing_already_made(change: dict[str, Any]) -> None:
    world, message, counted = fan_out_world()
    world.script(OK)
    world.service.attempt(message)  # made and recorded
    counted.reads.clear()

    again = world.service.attempt(replace(message, **change))

    assert counted.reads and not again.sent
    assert len(world.sender.sent) == 1  # nothing sent twice


def test_a_fresh_message_for_a_disabled_endpoint_cancels_its_delivery() -> None:
    world, message, _ = fan_out_world()
    endpoint = world.endpoints.get("tn_1", "ep_1")
    assert endpoint is not None
    world.endpoints.put(replace(endpoint, state=EndpointState.DISABLED))

    report = world.service.attempt(message)

    assert not report.sent and world.current().status is DeliveryStatus.CANCELLED
    assert world.sender.sent == []


def ingest() -> tuple[IngestService, RecordingQueue]:
    queue = RecordingQueue()
    service = IngestService(
        tenants=KnownTenants(TENANT, created_at=T0),
        endpoints=FakeEndpoints(an_endpoint("ep_1")),
        events=FakeEvents(),
        deliveries=FakeDeliveries(),  # type: ignore[arg-type]  # the delivery-log reads are not used here
        queue=queue,
        schedule=DEFAULT_SCHEDULE,
        writer_window=timedelta(minutes=1),
        clock=lambda: T0,
    )
    return service, queue


def test_ingest_marks_fresh_only_the_messages_of_deliveries_the_request_wrote() -> None:
    service, queue = ingest()
    service.publish(tenant_id=TENANT, event_type="a.b", data={}, request_key="k")
    service.publish(tenant_id=TENANT, event_type="a.b", data={}, request_key="k")  # a retry: the stored deliveries
    service.publish_batch(tenant_id=TENANT, items=[BatchItem("a.b", {}, key="b"), BatchItem("a.b", {}, key="b")])
    service.publish_batch(tenant_id=TENANT, items=[BatchItem("a.b", {}, key="b")])  # a retry of that item

    assert [message.fresh for message in queue.sent] == [True, False, True, False]
