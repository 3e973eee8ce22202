"""Operational webhooks: platform events (domain/platform_events.py) emitted to the tenant's own endpoints.

Emitting one is ingesting it: the same `IngestService.publish` a producer's event goes through (the event and
its deliveries made by domain/lifecycle.py, stored, enqueued; then signed, retried, logged and redrivable like
any delivery), with two differences:

- the recipients are the tenant's endpoints that subscribe to the type explicitly (`platform_events.subscribes`),
  never the endpoint the event is about: ingest is given those as the event's recipients;
- the event id is derived from the transition (`PlatformNotice.request_key`), as a producer's is from its
  `Idempotency-Key`, so emitting again after a crash converges on what the first run wrote (ingest's module
  docstring says what each crash point leaves): one event, one delivery per recipient, per transition.

The callers (the sweeper's notices, the circuit, the failing spell, redrive completion) each say where they
emit relative to their own write and what a crash between the two leaves.
"""

from __future__ import annotations

from dataclasses import dataclass

from hookrelay.domain.models import EndpointState
from hookrelay.domain.platform_events import PlatformNotice, subscribes
from hookrelay.services.ingest import IngestService


@dataclass
class OperationalEvents:
    ingest: IngestService

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
        self.ingest.publish(
            tenant_id=notice.tenant_id,
            event_type=notice.type.value,
            data=notice.data,
            ordering_key=notice.ordering_key,
            request_key=notice.request_key,
            recipients=listed,  # read once here, not again by ingest
        )
