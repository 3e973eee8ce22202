"""IngestService.publish_batch on the fakes: per-item outcomes in order, sequences per ordering key, and how an
item whose idempotency key published its event before converges (or waits for the request still writing it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from hookrelay.domain.models import Delivery, EndpointState
from hookrelay.domain.schedule import DEFAULT_SCHEDULE
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ingest import (
    BATCH_ITEM_SPACING,
    BatchAccepted,
    BatchItem,
    IdempotencyKeyInFlight,
    IdempotencyKeyReused,
    IngestService,
)
from tests.support.builders import T0, TENANT, an_endpoint
from tests.support.fakes import FakeDeliveries, FakeEndpoints, FakeEvents, KnownTenants, RecordingQueue

WINDOW = timedelta(minutes=1)


class CountingEvents(FakeEvents):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def append(self, events: Sequence[Any]) -> None:
        self.calls.append(f"append {len(events)}")
        super().append(events)

    def next_sequence(self, tenant_id: str, ordering_key: str, count: int = 1) -> int:
        self.calls.append(f"next_sequence {ordering_key} {count}")
        return super().next_sequence(tenant_id, ordering_key, count)


@pytest.fixture
def service() -> IngestService:
    return IngestService(
        tenants=KnownTenants(TENANT, created_at=T0),
        endpoints=FakeEndpoints(an_endpoint("ep_1"), an_endpoint("ep_2", event_types=["order.*"])),
        events=CountingEvents(),
        deliveries=FakeDeliveries(),  # type: ignore[arg-type]  # the delivery-log reads are not used here
        queue=RecordingQueue(),
        schedule=DEFAULT_SCHEDULE,
        writer_window=WINDOW,
        clock=lambda: T0,
    )


def queue_of(service: IngestService) -> RecordingQueue:
    assert isinstance(service.queue, RecordingQueue)
    return service.queue


def accepted(outcome: object) -> BatchAccepted:
    assert isinstance(outcome, BatchAccepted), outcome
    return outcome


def test_each_item_is_answered_in_order_and_every_delivery_is_sent_once(service: IngestService) -> None:
    items = [BatchItem("order.paid", {"n": 1}), BatchItem("user.created", {"n": 2}), BatchItem("order.sent", {})]
    outcomes = [accepted(o) for o in service.publish_batch(tenant_id=TENANT, items=items)]
    assert [len(o.delivery_ids) for o in outcomes] == [2, 1, 2]  # ep_2 takes order.* only
    events = service.events
    assert isinstance(events, FakeEvents)
    assert [events.items[o.event_id].type for o in outcomes] == ["order.paid", "user.created", "order.sent"]
    assert [m.delivery_id for m in queue_of(service).sent] == [d for o in outcomes for d in o.delivery_ids]
    assert not any(o.duplicate for o in outcomes)


def test_items_are_stamped_in_batch_order(service: IngestService) -> None:
    outcomes = service.publish_batch(tenant_id=TENANT, items=[BatchItem("a", {}) for _ in range(3)])
    events = service.events
    assert isinstance(events, FakeEvents)
    stamps = [events.items[accepted(o).event_id].timestamp for o in outcomes]
    assert stamps == [T0, T0 + BATCH_ITEM_SPACING, T0 + 2 * BATCH_ITEM_SPACING]


def test_ordering_keys_get_consecutive_numbers_in_batch_order_with_one_draw_per_key(service: IngestService) -> None:
    keys = ["a", "b", "a", None, "a", "b"]
    outcomes = service.publish_batch(tenant_id=TENANT, items=[BatchItem("x", {}, ordering_key=k) for k in keys])
    assert [accepted(o).sequence for o in outcomes] == [1, 1, 2, None, 3, 2]
    events = service.events
    assert isinstance(events, CountingEvents)
    assert [c for c in events.calls if c.startswith("next_sequence")] == ["next_sequence a 3", "next_sequence b 2"]
    again = service.publish_batch(tenant_id=TENANT, items=[BatchItem("x", {}, ordering_key="a")])
    assert accepted(again[0]).sequence == 4


def test_events_without_a_key_are_written_in_one_batch(service: IngestService) -> None:
    service.publish_batch(tenant_id=TENANT, items=[BatchItem("x", {}) for _ in range(10)])
    events = service.events
    assert isinstance(events, CountingEvents)
    assert events.calls == ["append 10"]


def test_an_unknown_tenant_refuses_the_whole_batch(service: IngestService) -> None:
    from hookrelay.domain.errors import InvalidRequest

    with pytest.raises(InvalidRequest):
        service.publish_batch(tenant_id="ten_other", items=[BatchItem("x", {})])


def test_a_retried_keyed_item_answers_the_same_ids_and_writes_nothing(service: IngestService) -> None:
    items = [BatchItem("order.paid", {"n": 1}, key="k:1"), BatchItem("order.paid", {"n": 2}, key="k:2")]
    first = [accepted(o) for o in service.publish_batch(tenant_id=TENANT, items=items)]
    sent = len(queue_of(service).sent)
    again = [accepted(o) for o in service.publish_batch(tenant_id=TENANT, items=items)]
    assert [(o.event_id, o.delivery_ids) for o in again] == [(o.event_id, o.delivery_ids) for o in first]
    assert all(o.duplicate for o in again)
    # Nothing was attempted yet: the first messages are sent again (FIFO deduplicates them on the delivery id).
    assert [m.deduplication_id for m in queue_of(service).sent[sent:]] == [d for o in first for d in o.delivery_ids]


def test_a_retried_item_whose_deliveries_started_sends_nothing_again(service: IngestService) -> None:
    item = BatchItem("order.paid", {}, key="k:1")
    [first] = service.publish_batch(tenant_id=TENANT, items=[item])
    deliveries = service.deliveries
    assert isinstance(deliveries, FakeDeliveries)
    for delivery_id in accepted(first).delivery_ids:
        deliveries.items[delivery_id] = replace(
            deliveries.items[delivery_id], status=DeliveryStatus.DELIVERED, attempt_count=1
        )
    sent = len(queue_of(service).sent)
    [again] = service.publish_batch(tenant_id=TENANT, items=[item])
    assert accepted(again).duplicate and queue_of(service).sent[sent:] == []


def test_a_key_reused_for_another_event_is_refused_in_its_place(service: IngestService) -> None:
    service.publish_batch(tenant_id=TENANT, items=[BatchItem("order.paid", {"n": 1}, key="k:1")])
    outcomes = service.publish_batch(
        tenant_id=TENANT,
        items=[BatchItem("a", {}), BatchItem("order.paid", {"n": 2}, key="k:1"), BatchItem("b", {})],
    )
    assert isinstance(outcomes[1], IdempotencyKeyReused) and outcomes[1].status == 422
    assert not accepted(outcomes[0]).duplicate and not accepted(outcomes[2]).duplicate


def crashed_after_the_event(service: IngestService, item: BatchItem) -> list[Delivery]:
    """The first request stored the item's event and died before its deliveries."""
    deliveries = service.deliveries
    assert isinstance(deliveries, FakeDeliveries)
    [first] = service.publish_batch(tenant_id=TENANT, items=[item])
    lost = [deliveries.items.pop(d) for d in accepted(first).delivery_ids]
    queue_of(service).sent.clear()
    return lost


def test_a_retry_while_the_writer_may_be_alive_answers_409_and_writes_nothing(service: IngestService) -> None:
    item = BatchItem("order.paid", {}, key="k:1")
    crashed_after_the_event(service, item)
    service.clock = lambda: T0 + WINDOW - timedelta(milliseconds=1)
    [outcome] = service.publish_batch(tenant_id=TENANT, items=[item])
    assert isinstance(outcome, IdempotencyKeyInFlight) and outcome.status == 409
    assert outcome.retry_after == 1  # the writer's window ends a millisecond later: retry then, not before
    service.clock = lambda: T0 + timedelta(seconds=1)
    [outcome] = service.publish_batch(tenant_id=TENANT, items=[item])
    assert (
        isinstance(outcome, IdempotencyKeyInFlight) and outcome.retry_after == (WINDOW - timedelta(seconds=1)).seconds
    )
    deliveries = service.deliveries
    assert isinstance(deliveries, FakeDeliveries)
    assert deliveries.items == {} and queue_of(service).sent == []


def test_a_retry_after_the_writer_is_over_creates_and_sends_what_it_left(service: IngestService) -> None:
    item = BatchItem("order.paid", {}, key="k:1")
    lost = crashed_after_the_event(service, item)
    service.clock = lambda: T0 + WINDOW
    [outcome] = service.publish_batch(tenant_id=TENANT, items=[item])
    assert accepted(outcome).duplicate and accepted(outcome).delivery_ids == [d.id for d in lost]
    deliveries = service.deliveries
    assert isinstance(deliveries, FakeDeliveries)
    assert sorted(deliveries.items) == sorted(d.id for d in lost)
    assert [m.delivery_id for m in queue_of(service).sent] == [d.id for d in lost]


def test_a_disabled_endpoints_delivery_is_recorded_cancelled_and_not_sent(service: IngestService) -> None:
    endpoints = service.endpoints
    assert isinstance(endpoints, FakeEndpoints)
    endpoints.put(an_endpoint("ep_2", event_types=["order.*"], state=EndpointState.DISABLED))
    [outcome] = service.publish_batch(tenant_id=TENANT, items=[BatchItem("order.paid", {})])
    assert len(accepted(outcome).delivery_ids) == 2
    assert [m.endpoint_id for m in queue_of(service).sent] == ["ep_1"]
