"""Accepting an event: store it, fan it out to the tenant's matching endpoints, enqueue the deliveries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from hookrelay.domain import ids
from hookrelay.domain.circuit import park_order
from hookrelay.domain.clock import RETENTION_DAYS, epoch_seconds, utcnow
from hookrelay.domain.envelope import envelope_body, message_group_id
from hookrelay.domain.errors import InvalidRequest
from hookrelay.domain.matching import type_matches
from hookrelay.domain.models import Delivery, Endpoint, EndpointState, Event
from hookrelay.domain.schedule import RetrySchedule
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.delivery import retention_expiry
from hookrelay.services.ports import (
    DeliveryMessage,
    DeliveryQueue,
    DeliveryRepository,
    EndpointRepository,
    EventRepository,
    TenantRepository,
)


@dataclass(frozen=True)
class Accepted:
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
        event_id = ids.event_id()
        sequence = self.events.next_sequence(tenant_id, ordering_key) if ordering_key is not None else None
        # Until its deliveries end (and push it further), an event lives for the longest a delivery can.
        expires_at = epoch_seconds(now + timedelta(seconds=self.schedule.horizon, days=RETENTION_DAYS))
        event = Event(
            id=event_id,
            tenant_id=tenant_id,
            type=event_type,
            timestamp=now,
            ordering_key=ordering_key,
            sequence=sequence,
            body=envelope_body(
                event_id=event_id,
                event_type=event_type,
                timestamp=now,
                data=data,
                ordering_key=ordering_key,
                sequence=sequence,
            ),
            expires_at=expires_at,
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
        return Accepted(event_id=event_id, delivery_ids=[d.id for d in deliveries], sequence=sequence)


def queued_delivery(
    event: Event, endpoint: Endpoint, now: datetime, *, delivery_id: str | None = None, replay_of: str | None = None
) -> Delivery:
    """A new delivery of the event to the endpoint, in the endpoint's message group; replays name their original."""
    return Delivery(
        id=delivery_id or ids.delivery_id(),
        tenant_id=event.tenant_id,
        endpoint_id=endpoint.id,
        event_id=event.id,
        event_type=event.type,
        status=DeliveryStatus.QUEUED,
        message_group_id=message_group_id(endpoint.id, endpoint.max_in_flight, event.ordering_key, event.id),
        created_at=now,
        updated_at=now,
        replay_of=replay_of,
        event_order=park_order(event.timestamp, event.id),
    )


def new_delivery(event: Event, endpoint: Endpoint, now: datetime) -> Delivery:
    """`queued` for an enabled endpoint. For a disabled one, recorded `cancelled` and never sent: the tenant
    sees what it missed while the endpoint was off, and redrives `status=cancelled` after re-enabling it."""
    delivery = queued_delivery(event, endpoint, now)
    if endpoint.state is EndpointState.ENABLED:
        return delivery
    return delivery.model_copy(
        update={"status": DeliveryStatus.CANCELLED, "completed_at": now, "expires_at": retention_expiry(now)}
    )


def first_attempt_message(delivery: Delivery) -> DeliveryMessage:
    return DeliveryMessage(
        delivery_id=delivery.id,
        tenant_id=delivery.tenant_id,
        attempt=delivery.attempt_count + 1,
        group_id=delivery.message_group_id,
        deduplication_id=delivery.id,
    )
