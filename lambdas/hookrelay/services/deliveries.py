"""The delivery log, replay and the test endpoint: what a tenant needs to recover from its own outage."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from hookrelay.domain import ids
from hookrelay.domain.clock import RETENTION_DAYS, epoch_seconds, to_rfc3339, utcnow
from hookrelay.domain.envelope import envelope_body
from hookrelay.domain.errors import Conflict, Gone, InvalidCursor, InvalidRequest, NotFound
from hookrelay.domain.models import Delivery, Endpoint, EndpointState, Event
from hookrelay.domain.schedule import RetrySchedule
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ingest import first_attempt_message, queued_delivery
from hookrelay.services.ports import (
    DeliveryFilter,
    DeliveryLog,
    DeliveryQueue,
    EndpointRepository,
    EventRepository,
)

DEFAULT_LIMIT = 50
MAX_LIMIT = 250
TEST_EVENT_TYPE = "webhook.test"


def _expired(expires_at: int | None, now: datetime) -> bool:
    return expires_at is not None and expires_at <= epoch_seconds(now)


# --- Cursors: opaque to clients, bound to the tenant and the query they came from ---


def _fingerprint(where: DeliveryFilter) -> str:
    """A digest of the whole query, tenant included: a cursor only resumes the query that produced it."""
    fields = {k: (to_rfc3339(v) if isinstance(v, datetime) else v) for k, v in asdict(where).items()}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:32]


def encode_cursor(where: DeliveryFilter, position: dict[str, str]) -> str:
    document = json.dumps({"q": _fingerprint(where), "p": position}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(document.encode()).decode().rstrip("=")


def decode_cursor(where: DeliveryFilter, cursor: str, log: DeliveryLog) -> dict[str, str]:
    """The resume position in `cursor`, or InvalidCursor (400) for anything not produced by this very query.

    Tenant safety does not rest on this check (every read also filters on the tenant); it makes a
    cursor from another query, tenant or a forgery a clear 400 instead of a silently wrong page.
    """
    try:
        document = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError):
        raise InvalidCursor("the cursor is not one this API issued") from None
    if not isinstance(document, dict) or not isinstance(document.get("p"), dict):
        raise InvalidCursor("the cursor is not one this API issued")
    if document.get("q") != _fingerprint(where) or not log.is_position_of(where, document["p"]):
        raise InvalidCursor("the cursor belongs to a different query: repeat the same filters, or start over")
    return document["p"]


@dataclass(frozen=True)
class LogPage:
    deliveries: list[Delivery]
    next_cursor: str | None


# --- Making new deliveries of recorded events: replay, redrive, the test event ---


@dataclass
class Replayer:
    """Creates a new delivery of a recorded event (same event id, same body bytes) and enqueues it.

    The endpoint's event-type filter is not re-evaluated: a replay resends what was recorded.
    """

    deliveries: DeliveryLog
    events: EventRepository
    endpoints: EndpointRepository
    queue: DeliveryQueue
    schedule: RetrySchedule

    def deliverable_endpoint(self, tenant_id: str, endpoint_id: str) -> Endpoint:
        """The endpoint new deliveries may go to: 409 when its state forbids it (they would only be cancelled)."""
        endpoint = self.endpoints.get(tenant_id, endpoint_id)
        if endpoint is None:
            raise Conflict(f"endpoint {endpoint_id!r} no longer exists")
        if endpoint.state is EndpointState.DELETED:
            raise Conflict(f"endpoint {endpoint_id!r} is deleted")
        if endpoint.state is not EndpointState.ENABLED:
            raise Conflict(f"endpoint {endpoint_id!r} is {endpoint.state.value}: enable it first")
        return endpoint

    def live_event(self, event_id: str, now: datetime) -> Event:
        event = self.events.get(event_id)
        if event is None or _expired(event.expires_at, now):
            raise Gone(f"event {event_id!r} has left the {RETENTION_DAYS}-day retention window")
        return event

    def replay(
        self, original: Delivery, endpoint: Endpoint, now: datetime, *, replay_id: str | None = None
    ) -> Delivery:
        """A new delivery of `original`'s event, enqueued. With `replay_id`, replaying twice creates it once."""
        delivery, unsent = self.prepare_replay(original, endpoint, now, replay_id=replay_id)
        if unsent:
            self.queue.enqueue([first_attempt_message(delivery)])
        return delivery

    def prepare_replay(
        self, original: Delivery, endpoint: Endpoint, now: datetime, *, replay_id: str | None = None
    ) -> tuple[Delivery, bool]:
        """The replay recorded but not enqueued (for callers that enqueue in batches), and whether it needs it."""
        event = self.live_event(original.event_id, now)
        return self._record(event, endpoint, now, replay_of=original.id, delivery_id=replay_id)

    def deliver(self, event: Event, endpoint: Endpoint, now: datetime) -> Delivery:
        delivery, _ = self._record(event, endpoint, now)
        self.queue.enqueue([first_attempt_message(delivery)])
        return delivery

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
        self.events.extend_expiry(
            event.id, epoch_seconds(now + timedelta(seconds=self.schedule.horizon, days=RETENTION_DAYS))
        )
        delivery = queued_delivery(event, endpoint, now, delivery_id=delivery_id, replay_of=replay_of)
        if self.deliveries.put_new(delivery):
            return delivery, True
        # Made before (a re-run): enqueue again only if it never started, in case the crash came before
        # the enqueue. A duplicate message is harmless: FIFO deduplicates on the id, the claim admits one.
        existing = self.deliveries.get(delivery.id) or delivery
        return existing, existing.status is DeliveryStatus.QUEUED and existing.attempt_count == 0


@dataclass
class DeliveryLogService:
    deliveries: DeliveryLog
    events: EventRepository
    endpoints: EndpointRepository
    replayer: Replayer

    def list(self, where: DeliveryFilter, *, limit: int = DEFAULT_LIMIT, cursor: str | None = None) -> LogPage:
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidRequest(f"limit must be between 1 and {MAX_LIMIT}")
        if where.since and where.until and where.since >= where.until:
            raise InvalidRequest("since must be before until")
        self._check_owned(where)
        start = decode_cursor(where, cursor, self.deliveries) if cursor else None
        page = self.deliveries.find(where, limit, start, utcnow())
        next_cursor = encode_cursor(where, page.resume_after) if page.resume_after else None
        return LogPage(page.deliveries, next_cursor)

    def _check_owned(self, where: DeliveryFilter) -> None:
        """Filtering by another tenant's endpoint or event answers 404, as reading it does: otherwise the
        index read would still hand back a cursor positioned on that tenant's records."""
        if where.endpoint_id and self.endpoints.get(where.tenant_id, where.endpoint_id) is None:
            raise NotFound(f"no endpoint {where.endpoint_id!r}")
        if where.event_id:
            self.event(where.tenant_id, where.event_id)

    def get(self, tenant_id: str, delivery_id: str) -> Delivery:
        delivery = self.deliveries.get(delivery_id) if delivery_id.startswith("dlv_") else None
        # Another tenant's delivery is indistinguishable from a missing one.
        if delivery is None or delivery.tenant_id != tenant_id or _expired(delivery.expires_at, utcnow()):
            raise NotFound(f"no delivery {delivery_id!r}")
        return delivery

    def event(self, tenant_id: str, event_id: str) -> Event:
        # The events table also holds sequence counters (`seq#…`): only event ids are looked up.
        event = self.events.get(event_id) if event_id.startswith("evt_") else None
        if event is None or event.tenant_id != tenant_id or _expired(event.expires_at, utcnow()):
            raise NotFound(f"no event {event_id!r}")
        return event

    def replay(self, tenant_id: str, delivery_id: str) -> Delivery:
        original = self.get(tenant_id, delivery_id)
        endpoint = self.replayer.deliverable_endpoint(tenant_id, original.endpoint_id)
        return self.replayer.replay(original, endpoint, utcnow())

    def send_test(self, tenant_id: str, endpoint_id: str) -> Delivery:
        """A `webhook.test` event, recorded like any other, delivered to this endpoint only, now."""
        if self.endpoints.get(tenant_id, endpoint_id) is None:
            raise NotFound(f"no endpoint {endpoint_id!r}")
        endpoint = self.replayer.deliverable_endpoint(tenant_id, endpoint_id)
        now = utcnow()
        event_id = ids.event_id()
        data: dict[str, Any] = {"endpoint_id": endpoint.id, "message": "a test event sent from the API"}
        event = Event(
            id=event_id,
            tenant_id=tenant_id,
            type=TEST_EVENT_TYPE,
            timestamp=now,
            body=envelope_body(event_id=event_id, event_type=TEST_EVENT_TYPE, timestamp=now, data=data),
            expires_at=epoch_seconds(now + timedelta(seconds=self.replayer.schedule.horizon, days=RETENTION_DAYS)),
        )
        self.events.put(event)
        return self.replayer.deliver(event, endpoint, now)
