"""Ingest reads a tenant once per process: tenants are never deleted, so one found stays found. An unknown tenant is
read again each time, so that the tenant an admin creates next is accepted at once."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hookrelay.domain.errors import InvalidRequest
from hookrelay.domain.models import Tenant
from hookrelay.domain.schedule import DEFAULT_SCHEDULE
from hookrelay.services import ingest
from hookrelay.services.ingest import BatchItem, IngestService
from tests.support.builders import T0, TENANT, an_endpoint
from tests.support.fakes import FakeDeliveries, FakeEndpoints, FakeEvents, RecordingQueue


class CountedTenants:
    def __init__(self, *ids: str) -> None:
        self.ids = set(ids)
        self.reads: list[str] = []

    def put(self, tenant: Tenant) -> None:
        self.ids.add(tenant.id)

    def get(self, tenant_id: str) -> Tenant | None:
        self.reads.append(tenant_id)
        return Tenant(id=tenant_id, name="acme", created_at=T0) if tenant_id in self.ids else None


def service_with(tenants: CountedTenants) -> IngestService:
    return IngestService(
        tenants=tenants,
        endpoints=FakeEndpoints(an_endpoint("ep_1")),
        events=FakeEvents(),
        deliveries=FakeDeliveries(),  # type: ignore[arg-type]  # the delivery-log reads are not used here
        queue=RecordingQueue(),
        schedule=DEFAULT_SCHEDULE,
        writer_window=timedelta(minutes=1),
        clock=lambda: T0,
    )


def test_a_known_tenant_is_read_once_for_all_its_events_and_batches() -> None:
    tenants = CountedTenants(TENANT)
    service = service_with(tenants)
    for n in range(3):
        service.publish(tenant_id=TENANT, event_type="order.paid", data={"n": n})
    service.publish_batch(tenant_id=TENANT, items=[BatchItem("order.paid", {})])
    assert tenants.reads == [TENANT]
    assert len(service.queue.sent) == 4  # type: ignore[attr-defined]


def test_an_unknown_tenant_is_read_every_time_and_accepted_once_created() -> None:
    tenants = CountedTenants()
    service = service_with(tenants)
    for _ in range(2):
        with pytest.raises(InvalidRequest):
            service.publish(tenant_id=TENANT, event_type="order.paid", data={})
    tenants.put(Tenant(id=TENANT, name="acme", created_at=T0))
    assert service.publish(tenant_id=TENANT, event_type="order.paid", data={}).delivery_ids
    assert tenants.reads == [TENANT] * 3


def test_the_memory_of_tenants_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest, "KNOWN_TENANTS_LIMIT", 2)
    tenants = CountedTenants("t_a", "t_b", "t_c")
    service = service_with(tenants)
    for tenant_id in ("t_a", "t_b", "t_c", "t_a"):
        service.publish(tenant_id=tenant_id, event_type="order.paid", data={})
    assert tenants.reads == ["t_a", "t_b", "t_c", "t_a"]  # full at the third: forgotten, t_a is read again
