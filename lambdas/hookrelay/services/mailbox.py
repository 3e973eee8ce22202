"""Reading a poll endpoint's mailbox (domain/mailbox.py): acknowledge up to the cursor, then the next messages.

Acknowledging a message writes up to three things, in this order: the delivery's record (delivered, its one
attempt), for a replay its original's `recovered_by` mark, and the entry's removal. If the process dies between
them, the entry is still there; the next read from that cursor or a later one acknowledges it again: the record's
write, conditional on the delivery being still unattempted, and the mark, conditional on the original not being
marked yet, do nothing the second time, and the entry is removed then. Nothing is acknowledged twice, nothing lost.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from hookrelay.domain import trace_context
from hookrelay.domain.classification import Outcome
from hookrelay.domain.clock import utcnow
from hookrelay.domain.destinations import DestinationKind, kind_of
from hookrelay.domain.errors import Conflict, InvalidRequest, NotFound
from hookrelay.domain.lifecycle import retention_expiry
from hookrelay.domain.mailbox import ACKNOWLEDGED, ACKNOWLEDGED_PER_READ, DEFAULT_READ_LIMIT, MAX_READ_LIMIT
from hookrelay.domain.models import Attempt, Endpoint, EndpointState, Event
from hookrelay.domain.signing import signed_headers
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ports import (
    AttemptRecord,
    DeliveryRepository,
    EndpointRepository,
    EventRepository,
    Mailbox,
    Unclaimed,
)


@dataclass(frozen=True)
class PolledMessage:
    seq: int
    delivery_id: str
    event: Event
    # webhook-id, webhook-timestamp, webhook-signature, and the trace context's: as the webhook would carry them
    headers: dict[str, str]


@dataclass(frozen=True)
class MailboxPage:
    messages: list[PolledMessage]
    # The cursor to read after next: the last message's number (reading after it acknowledges the page), or the
    # cursor read after when the page is empty.
    next_after: int


@dataclass
class MailboxService:
    endpoints: EndpointRepository
    events: EventRepository
    deliveries: DeliveryRepository
    mailbox: Mailbox
    clock: Callable[[], datetime] = field(default=utcnow)

    def read(self, tenant_id: str, endpoint_id: str, *, after: int = 0, limit: int = DEFAULT_READ_LIMIT) -> MailboxPage:
        if not 1 <= limit <= MAX_READ_LIMIT:
            raise InvalidRequest(f"limit must be between 1 and {MAX_READ_LIMIT}")
        if after < 0:
            raise InvalidRequest("after must be 0 or a message's seq")
        endpoint = self._poll_endpoint(tenant_id, endpoint_id)
        now = self.clock()
        if after:
            self._acknowledge(endpoint, after, now)
        secrets = endpoint.active_secrets(now)
        messages = []
        for entry in self.mailbox.after(endpoint.id, after, limit):
            event = self.events.get(tenant_id, entry.event_id)
            if event is None:  # cannot happen while events outlive their deliveries; skip rather than fail the read
                continue
            headers = signed_headers(secrets, event.id, now, event.body)
            # The event's trace, with a span of this read's (domain/trace_context.py).
            headers |= trace_context.child(event.trace).headers()
            messages.append(PolledMessage(entry.seq, entry.delivery_id, event, headers))
        return MailboxPage(messages, messages[-1].seq if messages else after)

    def _poll_endpoint(self, tenant_id: str, endpoint_id: str) -> Endpoint:
        endpoint = self.endpoints.get(tenant_id, endpoint_id)
        if endpoint is None or endpoint.state is EndpointState.DELETED:
            raise NotFound("endpoint not found")
        if kind_of(endpoint.url) is not DestinationKind.POLL:
            raise Conflict("this endpoint is sent its webhooks: only a poll endpoint has messages to read")
        return endpoint

    def _acknowledge(self, endpoint: Endpoint, through: int, now: datetime) -> None:
        for entry in self.mailbox.through(endpoint.id, through, ACKNOWLEDGED_PER_READ):
            attempt = Attempt(
                number=1,
                started_at=entry.posted_at,
                latency_ms=max(0, int((now - entry.posted_at).total_seconds() * 1000)),
                status_code=200,
                response_excerpt=ACKNOWLEDGED,
                outcome=Outcome.DELIVERED,
            )
            record = AttemptRecord(attempt, DeliveryStatus.DELIVERED, None, now, retention_expiry(now))
            if self.deliveries.record_attempt(entry.delivery_id, endpoint.tenant_id, 1, record, Unclaimed()):
                self.events.extend_expiry(endpoint.tenant_id, entry.event_id, retention_expiry(now))
            if entry.replay_of is not None:  # a replay had: its original is recovered (once: the mark is conditional)
                self.deliveries.mark_recovered(entry.replay_of, endpoint.tenant_id, entry.delivery_id, now)
            self.mailbox.remove(endpoint.id, entry.seq)
