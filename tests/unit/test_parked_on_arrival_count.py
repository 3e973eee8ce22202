"""Ingest counts the deliveries it parks on arrival (`DeliveriesParked`, as the delivery function counts those it
parks from the queue): in an outage, most parks happen here, and an operator reading the metric must see them."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from hookrelay.domain.circuit import CircuitState
from hookrelay.domain.models import Tenant
from hookrelay.domain.schedule import DEFAULT_SCHEDULE
from hookrelay.services.ingest import BatchItem, IngestService
from hookrelay.services.parking import Parking
from hookrelay.services.ports import DELIVERIES_PARKED
from tests.support.builders import T0, TENANT, an_endpoint
from tests.support.fakes import (
    FakeCircuits,
    FakeDeliveries,
    FakeEndpoints,
    FakeEvents,
    FakeParkingLot,
    RecordingQueue,
    RecordingTelemetry,
)


class OneTenant:
    def get(self, tenant_id: str) -> Tenant | None:
        return Tenant(id=tenant_id, name="acme", created_at=T0)

    def put(self, tenant: Tenant) -> None:
        raise AssertionError("ingest creates no tenant")


def ingest_beside_an_open_circuit() -> tuple[IngestService, RecordingTelemetry]:
    endpoints = FakeEndpoints(
        an_endpoint("ep_down", circuit=CircuitState.OPEN, circuit_opened_at=T0),
        an_endpoint("ep_up"),
    )
    deliveries = FakeDeliveries()
    telemetry = RecordingTelemetry()
    service = IngestService(
        tenants=OneTenant(),
        endpoints=endpoints,
        events=FakeEvents(),
        deliveries=deliveries,  # type: ignore[arg-type]  # the delivery-log reads are not used here
        queue=RecordingQueue(),
        schedule=DEFAULT_SCHEDULE,
        writer_window=timedelta(minutes=1),
        parking=Parking(FakeParkingLot(deliveries), FakeCircuits(endpoints), endpoints),
        telemetry=telemetry,
        clock=lambda: T0 + timedelta(minutes=1),
    )
    return service, telemetry


def test_each_delivery_parked_on_arrival_is_counted_and_none_sent() -> None:
    service, telemetry = ingest_beside_an_open_circuit()
    service.publish(tenant_id=TENANT, event_type="order.paid", data={})
    service.publish_batch(tenant_id=TENANT, items=[BatchItem("order.paid", {}), BatchItem("order.paid", {})])
    assert telemetry.counts == {DELIVERIES_PARKED: 3}  # the healthy endpoint's three are sent, not counted
    assert len(service.queue.sent) == 3  # type: ignore[attr-defined]


def test_a_delivery_taken_back_out_because_the_circuit_closed_is_not_counted() -> None:
    service, telemetry = ingest_beside_an_open_circuit()
    assert service.parking is not None
    endpoints = service.parking.endpoints
    down = endpoints.get(TENANT, "ep_down")
    assert down is not None
    read_open = replace(down)
    endpoints.put(replace(down, circuit=CircuitState.CLOSED))  # closed after ingest's listing
    service.endpoints = FakeEndpoints(read_open, an_endpoint("ep_up"))  # the listing still says open
    service.publish(tenant_id=TENANT, event_type="order.paid", data={})
    assert telemetry.counts == {}
    assert len(service.queue.sent) == 2  # type: ignore[attr-defined]


def test_the_other_endpoints_messages_are_sent_before_the_open_circuits_lot_is_written() -> None:
    """An endpoint whose circuit is open costs the event's other endpoints no wait: their messages go first."""
    service, _ = ingest_beside_an_open_circuit()
    assert service.parking is not None
    lot = service.parking.lot
    lot_entries_when_sent: list[int] = []
    queue = service.queue
    enqueue = queue.enqueue

    def enqueue_seeing_the_lot(messages: Any) -> None:
        lot_entries_when_sent.append(len(lot.parked_by))  # type: ignore[attr-defined]
        enqueue(messages)

    queue.enqueue = enqueue_seeing_the_lot  # type: ignore[method-assign]
    service.publish(tenant_id=TENANT, event_type="order.paid", data={})

    assert lot_entries_when_sent == [0]  # the healthy endpoint's message, before the down one's lot entry
    assert len(lot.parked_by) == 1  # type: ignore[attr-defined]
