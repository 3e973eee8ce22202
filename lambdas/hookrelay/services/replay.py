"""New deliveries of recorded events: a replay, a redrive's replays, the test event.

A replay resends what was recorded (same event id, same body bytes), as a new delivery with its own
attempts; the endpoint's event-type filter and content filter are not re-evaluated: a replay, a redrive and the test
event name their delivery or endpoint explicitly, and a delivery that exists passed the filters its endpoint had when
its event arrived (domain/content_filter.py applies at fan-out only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hookrelay.domain.clock import RETENTION_DAYS, utcnow
from hookrelay.domain.errors import Conflict, Gone, NotFound
from hookrelay.domain.lifecycle import (
    awaits_first_message,
    ensure_deliverable,
    event_expiry,
    is_expired,
    is_visible_to,
    new_event,
    queued_delivery,
)
from hookrelay.domain.models import Delivery, Endpoint, Event
from hookrelay.domain.schedule import RetrySchedule
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ports import (
    DeliveryFilter,
    DeliveryLog,
    DeliveryQueue,
    EndpointRepository,
    EventRepository,
    first_attempt_message,
)

TEST_EVENT_TYPE = "webhook.test"
_EVENT_DELIVERIES_PAGE = 250  # an event's deliveries read at a time when looking for a replay delivered


@dataclass
class ReplayService:
    deliveries: DeliveryLog
    events: EventRepository
    endpoints: EndpointRepository
    queue: DeliveryQueue
    schedule: RetrySchedule

    # --- The API: replay one delivery, send a test event ---

    def replay(self, tenant_id: str, delivery_id: str) -> Delivery:
        original = self.deliveries.get(delivery_id, tenant_id) if delivery_id.startswith("dlv_") else None
        if original is None or not is_visible_to(tenant_id, original, utcnow()):
            raise NotFound(f"no delivery {delivery_id!r}")
        endpoint = self.deliverable_endpoint(tenant_id, original.endpoint_id)
        return self.resend(original, endpoint, utcnow())

    def send_test(self, tenant_id: str, endpoint_id: str) -> Delivery:
        """A `webhook.test` event, recorded like any other, delivered to this endpoint only, now."""
        endpoint = self.endpoints.get(tenant_id, endpoint_id)
        if endpoint is None:
            raise NotFound(f"no endpoint {endpoint_id!r}")
        ensure_deliverable(endpoint)
        now = utcnow()
        data: dict[str, Any] = {"endpoint_id": endpoint.id, "message": "a test event sent from the API"}
        event = new_event(
            tenant_id=tenant_id,
            event_type=TEST_EVENT_TYPE,
            data=data,
            now=now,
            horizon_seconds=self.schedule.horizon,
            trace=None,  # nobody traced this one before: its trace is derived from its id (`Event.trace`)
        )
        self.events.put(event)
        delivery, _ = self._record(event, endpoint, now)
        self.enqueue_first_attempts([delivery])
        return delivery

    # --- Shared with redrive and the dead-letter drain ---

    def deliverable_endpoint(self, tenant_id: str, endpoint_id: str) -> Endpoint:
        """The endpoint new deliveries may go to: 409 when it is gone or its state forbids it."""
        endpoint = self.endpoints.get(tenant_id, endpoint_id)
        if endpoint is None:
            raise Conflict(f"endpoint {endpoint_id!r} no longer exists")
        return ensure_deliverable(endpoint)

    def resend(
        self, original: Delivery, endpoint: Endpoint, now: datetime, *, replay_id: str | None = None
    ) -> Delivery:
        """A new delivery of `original`'s event, enqueued. With `replay_id`, replaying twice creates it once."""
        delivery, unsent = self.record_replay(original, endpoint, now, replay_id=replay_id)
        if unsent:
            self.enqueue_first_attempts([delivery])
        return delivery

    def record_replay(
        self, original: Delivery, endpoint: Endpoint, now: datetime, *, replay_id: str | None = None
    ) -> tuple[Delivery, bool]:
        """The replay recorded but not enqueued (for callers that enqueue in batches), and whether it needs it."""
        event = self._live_event(original.tenant_id, original.event_id, now)
        return self._record(event, endpoint, now, replay_of=original.id, delivery_id=replay_id)

    def delivered_replay(self, original: Delivery, now: datetime, *, other_than: str | None = None) -> Delivery | None:
        """The first delivered replay of `original` (other than `other_than`), or None: looked up among its event's
        deliveries other than the fan-out (replays are indexed by event: one query, usually finding nothing)."""
        where = DeliveryFilter(
            tenant_id=original.tenant_id, event_id=original.event_id, status=DeliveryStatus.DELIVERED
        )
        found: list[Delivery] = []
        start = None
        while True:
            page = self.deliveries.find_of_event(where, (), _EVENT_DELIVERIES_PAGE, start, now)
            found += [d for d in page.deliveries if d.replay_of == original.id and d.id != other_than]
            if page.resume_after is None:
                return min(found, key=lambda d: (d.completed_at or d.created_at, d.id), default=None)
            start = page.resume_after

    def enqueue_first_attempts(self, deliveries: Sequence[Delivery]) -> None:
        self.queue.enqueue([first_attempt_message(d) for d in deliveries])

    def _live_event(self, tenant_id: str, event_id: str, now: datetime) -> Event:
        event = self.events.get(tenant_id, event_id)
        if event is None or is_expired(event.expires_at, now):
            raise Gone(f"event {event_id!r} has left the {RETENTION_DAYS}-day retention window")
        return event

    def _record(
        self,
        event: Event,
        endpoint: Endpoint,
        now: datetime,
        *,
        replay_of: str | None = None,
        delivery_id: str | None = None,
    ) -> tuple[Delivery, bool]:
        # The event must outlive the new delivery however long its retries take.
        self.events.extend_expiry(event.tenant_id, event.id, event_expiry(now, self.schedule.horizon))
        delivery = queued_delivery(event, endpoint, now, delivery_id=delivery_id, replay_of=replay_of)
        if self.deliveries.put_new(delivery):
            return delivery, True
        # Made before (a re-run): enqueue again only if it never started, in case the crash came before
        # the enqueue. A duplicate message is harmless: FIFO deduplicates on the id, the claim admits one.
        existing = self.deliveries.get(delivery.id) or delivery
        return existing, awaits_first_message(existing)
