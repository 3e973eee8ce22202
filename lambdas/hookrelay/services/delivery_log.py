"""The delivery log: every delivery with its attempts, and the events, as a tenant reads them (newest first)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

from hookrelay.domain import delivery_stats, paging
from hookrelay.domain.clock import to_rfc3339, utcnow
from hookrelay.domain.delivery_stats import EndpointStats
from hookrelay.domain.errors import InvalidCursor, InvalidRequest, NotFound
from hookrelay.domain.lifecycle import fan_out_id, is_visible_to
from hookrelay.domain.models import Delivery, Endpoint, Event
from hookrelay.domain.paging import FOREIGN_CURSOR, BoundedCount, Position
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.parking import Parking
from hookrelay.services.ports import (
    DeliveryFilter,
    DeliveryLog,
    DeliveryPage,
    EndpointRepository,
    EventRepository,
    UnknownPosition,
)

DEFAULT_LIMIT = 50
MAX_LIMIT = 250


# --- Cursors: opaque to clients, bound to the tenant and the query they came from ---


# Filters added after cursors were first issued: left out of the digest while unset, so that a cursor issued before
# one existed still resumes its query.
_ADDED_LATER = frozenset({"recovered"})


def _scope(where: DeliveryFilter) -> dict[str, object]:
    """The whole query, tenant included, as a cursor is bound to it: a cursor only resumes the query that produced
    it (domain/paging.py). Fields added later are left out while unset, so the cursors issued before them resume."""
    return {
        k: (to_rfc3339(v) if isinstance(v, datetime) else v)
        for k, v in asdict(where).items()
        if not (k in _ADDED_LATER and v is None)
    }


def encode_cursor(where: DeliveryFilter, position: Position) -> str:
    return paging.encode_cursor(_scope(where), position)


def decode_cursor(where: DeliveryFilter, cursor: str) -> Position:
    """The resume position in `cursor`, or InvalidCursor (400) for anything not produced by this very query.

    Tenant safety does not rest on this check (every read also filters on the tenant); it makes a
    cursor from another query, tenant or a forgery a clear 400 instead of a silently wrong page. (The
    log checks the position itself again: it alone knows what one looks like.)
    """
    return paging.decode_cursor(_scope(where), cursor)


@dataclass(frozen=True)
class InFlight:
    """A delivery's message held by an invocation: since when, and when it is back on the queue at the latest."""

    since: datetime
    back_by: datetime


@dataclass(frozen=True)
class LogPage:
    deliveries: list[Delivery]
    next_cursor: str | None


@dataclass
class DeliveryLogService:
    deliveries: DeliveryLog
    events: EventRepository
    endpoints: EndpointRepository
    parking: Parking
    # How long the delivery queue keeps a received message from everyone else (its visibility timeout): an attempt's
    # message whose invocation died is back on the queue by then, and takes the dead invocation's claim over.
    message_hold: timedelta

    def list(self, where: DeliveryFilter, *, limit: int = DEFAULT_LIMIT, cursor: str | None = None) -> LogPage:
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidRequest(f"limit must be between 1 and {MAX_LIMIT}")
        if where.since and where.until and where.since >= where.until:
            raise InvalidRequest("since must be before until")
        event = self._check_owned(where)
        start = decode_cursor(where, cursor) if cursor else None
        try:
            if event is not None:
                page = self._find_of_event(where, event, limit, start)
            else:
                page = self.deliveries.find(where, limit, start, utcnow())
        except UnknownPosition:
            raise InvalidCursor(FOREIGN_CURSOR) from None
        next_cursor = encode_cursor(where, page.resume_after) if page.resume_after else None
        return LogPage(page.deliveries, next_cursor)

    def _find_of_event(self, where: DeliveryFilter, event: Event, limit: int, start: Position | None) -> DeliveryPage:
        """The event's deliveries: its fan-out's ids derive from the event and each endpoint the tenant has had (a
        deleted endpoint is kept, so its deliveries stay findable), so no index entry is written for them."""
        fan_out = [fan_out_id(event, endpoint) for endpoint in self.endpoints.list_for_tenant(where.tenant_id)]
        return self.deliveries.find_of_event(where, fan_out, limit, start, utcnow())

    def _check_owned(self, where: DeliveryFilter) -> Event | None:
        """Filtering by another tenant's endpoint or event answers 404, as reading it does: otherwise the
        index read would still hand back a cursor positioned on that tenant's records. The event filtered on."""
        if where.endpoint_id and self.endpoints.get(where.tenant_id, where.endpoint_id) is None:
            raise NotFound(f"no endpoint {where.endpoint_id!r}")
        return self.event(where.tenant_id, where.event_id) if where.event_id else None

    def get(self, tenant_id: str, delivery_id: str) -> Delivery:
        delivery = self.deliveries.get(delivery_id, tenant_id) if delivery_id.startswith("dlv_") else None
        if delivery is None or not is_visible_to(tenant_id, delivery, utcnow()):
            raise NotFound(f"no delivery {delivery_id!r}")
        return delivery

    def waiting_on(self, delivery: Delivery) -> tuple[Endpoint, BoundedCount] | None:
        """The endpoint whose circuit a parked delivery waits on (its state and next probe) and how many wait
        behind it; None if not parked."""
        if delivery.parked_at is None:
            return None
        endpoint = self.endpoints.get(delivery.tenant_id, delivery.endpoint_id)
        return None if endpoint is None else (endpoint, self.parking.parked_behind(endpoint))

    def in_flight(self, delivery: Delivery) -> InFlight | None:
        """When the delivery's message is in flight: claimed for an attempt (`attempting`) since its claim, and back on
        the queue by the claim plus the queue's visibility timeout, should the invocation holding it die (it was
        received before it was claimed). None otherwise.

        Read from the record alone: a message received by an invocation that died before claiming the delivery
        leaves no trace on it (recording every receive would cost a write per delivery on the happy path), so such a
        delivery reads `queued` until its message comes back."""
        if delivery.status is not DeliveryStatus.ATTEMPTING or delivery.claimed_at is None:
            return None
        return InFlight(since=delivery.claimed_at, back_by=delivery.claimed_at + self.message_hold)

    def stats(
        self,
        tenant_id: str,
        endpoint_id: str,
        hours: int = delivery_stats.DEFAULT_HOURS,
        *,
        cap: int = delivery_stats.MAX_DELIVERIES_READ,
        page_size: int = delivery_stats.PAGE_SIZE,
    ) -> EndpointStats:
        """The endpoint's last `hours` hours (domain/delivery_stats.py), from its deliveries created in them.

        Bounded: at most `cap` deliveries are read, in log pages of `page_size` (so at most cap / page_size + 1
        `find` calls: one more may come back short, as the log's page read is bounded too). Past the cap the
        answer is `partial` (the oldest deliveries of the window were not counted), never a longer read."""
        if not 1 <= hours <= delivery_stats.MAX_HOURS:
            raise InvalidRequest(f"hours must be between 1 and {delivery_stats.MAX_HOURS}")
        if self.endpoints.get(tenant_id, endpoint_id) is None:
            raise NotFound(f"no endpoint {endpoint_id!r}")
        now = utcnow()
        since, until = delivery_stats.window(now, hours)
        where = DeliveryFilter(tenant_id=tenant_id, endpoint_id=endpoint_id, since=since)
        read: list[Delivery] = []
        start: Position | None = None
        for _ in range(cap // page_size + 1):
            page = self.deliveries.find(where, min(page_size, cap - len(read)), start, now)
            read.extend(page.deliveries)
            start = page.resume_after
            if start is None or len(read) >= cap:
                break
        return delivery_stats.summarize(read, since, until, partial=start is not None)

    def event(self, tenant_id: str, event_id: str) -> Event:
        event = self.events.get(tenant_id, event_id)
        if event is None or not is_visible_to(tenant_id, event, utcnow()):
            raise NotFound(f"no event {event_id!r}")
        return event
