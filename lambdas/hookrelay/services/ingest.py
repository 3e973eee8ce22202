"""Accepting an event: store it, fan it out to the tenant's matching endpoints, enqueue the deliveries.

Three writes, none of them a transaction (see the README's "Nothing stranded"): the event, its deliveries,
their messages. If the process dies between two of them, the producer got no 202:

- after the event and before the deliveries: the event is stored with no delivery. It was never accepted (no
  202), and nothing waits on it. A retry under the same `Idempotency-Key` (and body) converges on the same
  event id, finds it stored and fans it out; a retry without a key makes a new event.
- after (some of) the deliveries and before (all of) their messages: `queued` deliveries with no message. A
  retry under the key re-runs the fan-out: the delivery ids are derived from the event and endpoint, so it
  finds them, creates the missing ones, and enqueues those that never started (a duplicate message is
  harmless: FIFO deduplicates on the delivery id, and the claim admits one attempt). Without a retry, the
  reconciler (`services/reconcile.py`) finds them within minutes and enqueues them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from hookrelay.domain import ids
from hookrelay.domain.clock import utcnow
from hookrelay.domain.errors import InvalidRequest
from hookrelay.domain.lifecycle import awaits_first_message, new_delivery, new_event
from hookrelay.domain.matching import type_matches
from hookrelay.domain.models import Delivery, EndpointState
from hookrelay.domain.schedule import RetrySchedule
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.event_types import EventDataCheck
from hookrelay.services.ports import (
    DeliveryLog,
    DeliveryQueue,
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
    deliveries: DeliveryLog
    queue: DeliveryQueue
    schedule: RetrySchedule
    event_types: EventDataCheck | None = None  # data held to its type's registered schema (the catalogue)

    def publish(
        self,
        *,
        tenant_id: str,
        event_type: str,
        data: dict[str, Any],
        ordering_key: str | None = None,
        request_key: str | None = None,
    ) -> Accepted:
        """`request_key`: the request's `Idempotency-Key` (scoped to the caller) and body, when it has one: the
        event's id is derived from it, so that a retry after a crash converges on the event the first run stored."""
        if self.tenants.get(tenant_id) is None:
            raise InvalidRequest(f"unknown tenant {tenant_id!r}")
        if self.event_types is not None:
            self.event_types.check(event_type, data)
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
            event_id=ids.keyed_id("evt", request_key) if request_key else None,
        )
        fresh = self.events.put(event)
        if not fresh:  # a retry of a request that died after storing its event: carry on with the stored one
            stored = self.events.get(event.id)
            if stored is None or stored.tenant_id != tenant_id:
                raise LookupError(f"event {event.id} was stored and is not readable")
            event = stored
        deliveries = [
            new_delivery(event, endpoint, now)
            for endpoint in self.endpoints.list_for_tenant(tenant_id)
            if endpoint.state is not EndpointState.DELETED and type_matches(event_type, endpoint.event_types)
        ]
        if deliveries:
            unsent = self._record(deliveries) if fresh else self._record_again(deliveries)
            self.queue.enqueue([first_attempt_message(d) for d in unsent])
        return Accepted(event_id=event.id, delivery_ids=[d.id for d in deliveries], sequence=event.sequence)

    def _record(self, deliveries: list[Delivery]) -> list[Delivery]:
        """A new event's deliveries (none can exist yet: their ids derive from the event's), written in batches."""
        self.deliveries.put_many(deliveries)
        return [d for d in deliveries if d.status is DeliveryStatus.QUEUED]

    def _record_again(self, deliveries: list[Delivery]) -> list[Delivery]:
        """A re-run's: each created only if missing; those still waiting for their first attempt are sent again."""
        unsent = []
        for delivery in deliveries:
            if self.deliveries.put_new(delivery):
                existing: Delivery | None = delivery
            else:
                existing = self.deliveries.get(delivery.id)
            if existing is not None and awaits_first_message(existing):
                unsent.append(existing)
        return unsent
