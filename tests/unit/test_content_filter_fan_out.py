"""Content filters at fan-out (IngestService on the fakes): applied after the event-type match, compiled once per
process however many events a batch carries, an excluded event recording nothing for the endpoint, and a keyed
retry after a crash converging on the same deliveries."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from datetime import timedelta
from typing import Any

import pytest

from hookrelay.domain import content_filter
from hookrelay.domain.models import Delivery, EndpointState
from hookrelay.domain.schedule import DEFAULT_SCHEDULE
from hookrelay.services.ingest import Accepted, BatchAccepted, BatchItem, IngestService
from tests.support.builders import T0, TENANT, an_endpoint
from tests.support.fakes import FakeDeliveries, FakeEndpoints, FakeEvents, KnownTenants, RecordingQueue

BIG = json.dumps({"data.amount": {"$gte": 100}}, separators=(",", ":"))
EUR = json.dumps({"data.currency": "EUR"}, separators=(",", ":"))


class Crash(Exception):
    pass


class CrashingOnce(FakeDeliveries):
    """Dies in its first batch write: the event is stored and none of its deliveries are."""

    def __init__(self) -> None:
        super().__init__()
        self.crashed = False

    def put_many(self, deliveries: Sequence[Delivery], logged: Collection[str] = frozenset()) -> None:
        if not self.crashed:
            self.crashed = True
            raise Crash
        super().put_many(deliveries, logged)


def service_with(*endpoints: Any, deliveries: FakeDeliveries | None = None) -> IngestService:
    return IngestService(
        tenants=KnownTenants(TENANT, created_at=T0),
        endpoints=FakeEndpoints(*endpoints),
        events=FakeEvents(),
        deliveries=deliveries or FakeDeliveries(),  # type: ignore[arg-type]  # the log's reads are not used here
        queue=RecordingQueue(),
        schedule=DEFAULT_SCHEDULE,
        writer_window=timedelta(minutes=1),
        clock=lambda: T0,
    )


@pytest.fixture
def service() -> IngestService:
    return service_with(
        an_endpoint("ep_big", content_filter=BIG),
        an_endpoint("ep_eur", event_types=["order.*"], content_filter=EUR),
        an_endpoint("ep_all"),
    )


def endpoints_of(service: IngestService, accepted: Accepted) -> list[str]:
    deliveries = service.deliveries
    assert isinstance(deliveries, FakeDeliveries)
    return sorted(deliveries.items[d].endpoint_id for d in accepted.delivery_ids)


def test_a_filter_applies_after_the_event_type_match(service: IngestService) -> None:
    paid = {"amount": 500, "currency": "EUR"}
    assert endpoints_of(service, service.publish(tenant_id=TENANT, event_type="order.paid", data=paid)) == [
        "ep_all",
        "ep_big",
        "ep_eur",
    ]
    small = service.publish(tenant_id=TENANT, event_type="order.paid", data={"amount": 5, "currency": "USD"})
    assert endpoints_of(service, small) == ["ep_all"]
    other_type = service.publish(tenant_id=TENANT, event_type="user.paid", data=paid)  # ep_eur takes order.* only
    assert endpoints_of(service, other_type) == ["ep_all", "ep_big"]


def test_an_excluded_event_records_and_sends_nothing_for_that_endpoint(service: IngestService) -> None:
    small = service.publish(tenant_id=TENANT, event_type="order.paid", data={"amount": 5, "currency": "USD"})
    deliveries = service.deliveries
    queue = service.queue
    assert isinstance(deliveries, FakeDeliveries) and isinstance(queue, RecordingQueue)
    assert {d.endpoint_id for d in deliveries.items.values()} == {"ep_all"}
    assert [m.delivery_id for m in queue.sent] == small.delivery_ids


def test_a_batch_compiles_each_stored_filter_once(service: IngestService) -> None:
    content_filter.compiled.cache_clear()
    items = [BatchItem("order.paid", {"amount": n, "currency": "EUR" if n % 2 else "USD"}) for n in range(100)]

    outcomes = service.publish_batch(tenant_id=TENANT, items=items)

    assert content_filter.compiled.cache_info().misses == 2  # two filters, a hundred events
    counts = [len(o.delivery_ids) for o in outcomes if isinstance(o, BatchAccepted)]
    assert counts == [1 + n % 2 for n in range(100)]  # ep_all, and ep_eur for the odd ones (all under 100)


def test_a_disabled_endpoints_filter_decides_what_is_recorded_cancelled() -> None:
    service = service_with(an_endpoint("ep_off", state=EndpointState.DISABLED, content_filter=EUR))
    assert service.publish(tenant_id=TENANT, event_type="a", data={"currency": "USD"}).delivery_ids == []
    kept = service.publish(tenant_id=TENANT, event_type="a", data={"currency": "EUR"})
    deliveries = service.deliveries
    assert isinstance(deliveries, FakeDeliveries)
    assert [deliveries.items[d].status.value for d in kept.delivery_ids] == ["cancelled"]


def test_a_stored_filter_that_no_longer_compiles_is_sent_everything() -> None:
    service = service_with(an_endpoint("ep_old", content_filter='{"data.x":{"$regex":"^a"}}'))
    assert len(service.publish(tenant_id=TENANT, event_type="a", data={"x": "b"}).delivery_ids) == 1


def test_a_keyed_retry_after_a_crash_before_the_deliveries_writes_the_same_filtered_ones() -> None:
    """The process dies after storing the event and before writing its deliveries (the producer got no 202); the
    retry under the same key finds the event and fans it out again through the same filters: the endpoint the filter
    excludes still gets nothing, the others get theirs, once."""
    deliveries = CrashingOnce()
    service = service_with(an_endpoint("ep_big", content_filter=BIG), an_endpoint("ep_all"), deliveries=deliveries)
    publish = {"tenant_id": TENANT, "event_type": "a", "data": {"amount": 1}, "request_key": "key-1"}
    with pytest.raises(Crash):
        service.publish(**publish)
    assert deliveries.items == {}

    retried = service.publish(**publish)

    assert endpoints_of(service, retried) == ["ep_all"]
    assert {d.endpoint_id for d in deliveries.items.values()} == {"ep_all"}
