"""Accepting an event: store it, fan it out to the tenant's matching endpoints, enqueue the deliveries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from hookrelay.domain.clock import utcnow
from hookrelay.domain.errors import InvalidRequest
from hookrelay.domain.lifecycle import new_delivery, new_event
from hookrelay.domain.matching import type_matches
from hookrelay.domain.models import EndpointState
from hookrelay.domain.schedule import RetrySchedule
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ports import (
    DeliveryQueue,
    DeliveryRepository,
    EndpointRepository,
    EventRepository,
    TenantRepository,
    first_attempt_message,
)


class Accepted(BaseModel):
    """What a producer is told (and, under an `Idempotency-Key`, told again): the event and its deliveries."""

    event_id: str
    delivery_ids: list[str]
    sequence: int | None = None


@dataclass
class IngestService:
    tenants: TenantRepository
    endpoints: EndpointRepository
    events: EventRepository
    deliveries: DeliveryRepository
    queue: DeliveryQueue
    schedule: RetrySchedule

    def publish(
        self, *, tenant_id: str, event_type: str, data: dict[str, Any], ordering_key: str | None = None
    ) -> Accepted:
        if self.tenants.get(tenant_id) is None:
            raise InvalidRequest(f"unknown tenant {tenant_id!r}")
        now = utcnow()
        sequence = self.events.next_sequence(tenant_id, ordering_key) if ordering_key is not None else None
        event = new_event(
            tenant_id=tenant_id,
            event_type=event_type,
            data=data,
            now=now,
            horizon_seconds=self.schedule.horizon,
            ordering_key=ordering_key,
            sequence=sequence,
        )
        self.events.put(event)
        deliveries = [
            new_delivery(event, endpoint, now)
            for endpoint in self.endpoints.list_for_tenant(tenant_id)
            if endpoint.state is not EndpointState.DELETED and type_matches(event_type, endpoint.event_types)
        ]
        if deliveries:
            self.deliveries.put_many(deliveries)
            self.queue.enqueue([first_attempt_message(d) for d in deliveries if d.status is DeliveryStatus.QUEUED])
        return Accepted(event_id=event.id, delivery_ids=[d.id for d in deliveries], sequence=sequence)
