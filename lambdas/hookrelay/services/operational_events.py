"""Operational webhooks: platform events (domain/platform_events.py) emitted to the tenant's own endpoints.

Emitting one is ingesting it: the same `IngestService.publish` a producer's event goes through (the event and
its deliveries made by domain/lifecycle.py, stored, enqueued; then signed, retried, logged and redrivable like
any delivery), with two differences:

- the recipients are the tenant's endpoints that subscribe to the type explicitly (`platform_events.subscribes`),
  never the endpoint the event is about: ingest is given a view of the endpoints that lists only those;
- the event id is derived from the transition (`PlatformNotice.request_key`), as a producer's is from its
  `Idempotency-Key`, so emitting again after a crash converges on what the first run wrote (ingest's module
  docstring says what each crash point leaves): one event, one delivery per recipient, per transition.

The callers (the sweeper's notices, the circuit, the failing spell, redrive completion) each say where they
emit relative to their own write and what a crash between the two leaves.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from hookrelay.domain.models import Endpoint, EndpointState
from hookrelay.domain.platform_events import PlatformNotice, subscribes
from hookrelay.services.ingest import IngestService
from hookrelay.services.ports import EndpointRepository


@dataclass
class OperationalEvents:
    ingest: IngestService  # its endpoint repository is replaced, per event, by the subscribers' view

    def emit(self, notice: PlatformNotice) -> None:
        listed = [
            endpoint
            for endpoint in self.ingest.endpoints.list_for_tenant(notice.tenant_id)
            if endpoint.id != notice.about
            and endpoint.state is not EndpointState.DELETED
            and subscribes(endpoint.event_types, notice.type)
        ]
        if not listed:
            return  # nobody asked for it (most tenants): nothing is written, no sequence is taken
        replace(self.ingest, endpoints=_Subscribers(self.ingest.endpoints, listed)).publish(
            tenant_id=notice.tenant_id,
            event_type=notice.type.value,
            data=notice.data,
            ordering_key=notice.ordering_key,
            request_key=notice.request_key,
        )


@dataclass(frozen=True)
class _Subscribers:
    """The tenant's endpoints as ingest sees them for one platform event: those that ask for its type by name, less
    the endpoint it is about, as the emitter read them (one query per event, not one more in ingest). Reads only; every
    write goes to the repository underneath."""

    endpoints: EndpointRepository
    listed: list[Endpoint]

    def list_for_tenant(self, tenant_id: str) -> list[Endpoint]:
        return [endpoint for endpoint in self.listed if endpoint.tenant_id == tenant_id]

    def get(self, tenant_id: str, endpoint_id: str) -> Endpoint | None:
        return self.endpoints.get(tenant_id, endpoint_id)

    def put(self, endpoint: Endpoint) -> None:
        self.endpoints.put(endpoint)

    def replace(self, endpoint: Endpoint, *, expected_updated_at: datetime, read: Endpoint | None = None) -> bool:
        return self.endpoints.replace(endpoint, expected_updated_at=expected_updated_at, read=read)

    def mark_failing(self, tenant_id: str, endpoint_id: str, since: datetime) -> bool:
        return self.endpoints.mark_failing(tenant_id, endpoint_id, since)

    def mark_recovered(self, tenant_id: str, endpoint_id: str) -> bool:
        return self.endpoints.mark_recovered(tenant_id, endpoint_id)
