"""Accepting an event: store it, fan it out to the tenant's matching endpoints, enqueue the deliveries.

Three writes, none of them a transaction (see docs/api.md, "Nothing stranded"): the event, its deliveries,
their messages. If the process dies between two of them, the producer got no 202:

- after the event and before the deliveries: the event is stored with no delivery. It was never accepted (no
  202), and nothing waits on it. A retry under the same `Idempotency-Key` (and body) converges on the same
  event id, finds it stored and fans it out; a retry without a key makes a new event.
- after (some of) the deliveries and before (all of) their messages: `queued` deliveries with no message. A
  retry under the key re-runs the fan-out: the delivery ids are derived from the event and endpoint, so it
  finds them, creates the missing ones, and enqueues those that never started (a duplicate message is
  harmless: FIFO deduplicates on the delivery id, and the claim admits one attempt). Without a retry, the
  reconciler (`services/reconcile.py`) finds them within minutes and enqueues them.

A batch (`publish_batch`, POST /v1/events/batch) makes the same three writes for all its items at once, each in as
few calls as DynamoDB and SQS allow: the events (a batch write for those without an idempotency key, whose ids are
new; a conditional put each for those with one, since the condition is what finds a retry), then every fresh
event's deliveries in one batch write, then every message in `SendMessageBatch` calls of ten, in batch order. If
the process dies between them, the producer got no answer for any item, and:

- events stored and no deliveries: an item with a key, retried, finds its event (same key, same event id) and,
  once the invocation that stored it must be over (`writer_window`), fans it out; until then it answers 409 for
  that item (the writer may still be alive: it alone batch-writes the deliveries, unconditionally). An item
  without a key was never accepted and nothing waits on it; its retry is a new event.
- deliveries stored and no messages: the reconciler enqueues them within minutes, and a keyed item's retry finds
  every delivery written and enqueues those never started (FIFO deduplicates on the delivery id).

Other items of the batch are not held up by one refused item: each gets its own result, in order.

Which endpoints an event reaches is decided once per distinct event type of a request, not once per event: the
tenant's endpoints are indexed by their filters for the request (`domain/matching.FilterIndex`: exact types in a
dict, each distinct wildcard pattern evaluated once, in linear time), so a batch of 100 events of 3 types costs 3
matchings; the bound for the worst tenant the limits allow is in FilterIndex's docstring (domain/limits.py).
Then each endpoint reached that has a content filter evaluates it against the event's envelope (`_fan_out`,
domain/content_filter.py: linear in the payload, bounded by the filter caps); an event it excludes gets no delivery
for that endpoint at all, and its id is not in the answer. No write is added: the filter decides which deliveries
the writes above carry. A keyed retry fans out again with the filters as they are then, as with event types.

A delivery to an endpoint whose circuit ingest reads open (or draining) is parked on arrival instead of enqueued:
written marked as parked in the same batch write as the others, then its lot entry, then the endpoint read again
(`Parking.park_new`, once per endpoint), and a message only if the circuit closed meanwhile. An outage then costs
no message, no delivery invocation and no read per event, and the drain releases these in event order with the
rest. If the process dies after the deliveries and before their entries, or after the entries and before that read
(with the circuit closing unseen), they wait where nothing releases them; the reconciler takes them back out and
sends their first messages (`services/reconcile.py`). A keyed retry re-runs only what the first run left unwritten,
and sends nothing for a delivery written parked.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from hookrelay.domain import ids, trace_context
from hookrelay.domain.clock import utcnow
from hookrelay.domain.content_filter import EventView, compiled
from hookrelay.domain.errors import (
    DomainError,
    IdempotencyKeyInFlight,
    IdempotencyKeyReused,
    InvalidDocument,
    InvalidRequest,
)
from hookrelay.domain.event_types import UNKNOWN_EVENT_TYPE, unknown_type_detail
from hookrelay.domain.lifecycle import awaits_first_message, new_delivery, new_event, parked_on_arrival
from hookrelay.domain.matching import FilterIndex
from hookrelay.domain.models import Delivery, Endpoint, EndpointState, Event
from hookrelay.domain.schedule import RetrySchedule
from hookrelay.domain.status import DeliveryStatus
from hookrelay.domain.trace_context import TraceContext
from hookrelay.services.event_types import EventDataCheck
from hookrelay.services.parking import Parking
from hookrelay.services.ports import (
    DELIVERIES_PARKED,
    DeliveryLog,
    DeliveryQueue,
    DeliveryTelemetry,
    EndpointLists,
    EventRepository,
    TenantRepository,
    first_attempt_message,
)


class IngestWarning(BaseModel):
    """Something about an accepted event the producer may want to fix (openapi: IngestWarning)."""

    code: str
    detail: str


class Accepted(BaseModel):
    """What a producer is told (and, under an `Idempotency-Key`, told again): the event and its deliveries."""

    event_id: str
    delivery_ids: list[str]
    sequence: int | None = None
    warnings: list[IngestWarning] = Field(default_factory=list)

    def answer(self) -> dict[str, Any]:
        """The response body: `warnings` only when there are some."""
        return self.model_dump(exclude=None if self.warnings else {"warnings"})


class BatchAccepted(Accepted):
    """One accepted item of a batch; `duplicate` when its idempotency key had published it already."""

    duplicate: bool = False


@dataclass(frozen=True)
class BatchItem:
    """One event of a batch, validated at the edge."""

    event_type: str
    data: dict[str, Any]
    ordering_key: str | None = None
    key: str | None = None  # its idempotency key, scoped to the caller: the event's id is derived from it
    trace: TraceContext | None = None  # the producer's trace context; None: the platform starts one


ItemOutcome = BatchAccepted | DomainError

# The items of a batch are stamped this far apart, in batch order: event time (the order the parking lot drains
# in) then orders them as the batch did, as it orders single events as they came.
BATCH_ITEM_SPACING = timedelta(milliseconds=1)
# Batch items' keys derive their events' ids in a space of their own (no body in it: a key reused with another
# body is found and refused by comparing the stored event).
_BATCH_KEY_SPACE = "batch"


@dataclass
class _Planned:
    """An item's event, with the deliveries answered for it and those of them to send now."""

    event: Event
    deliveries: list[Delivery]
    unsent: list[Delivery]
    duplicate: bool


# Tenants are never deleted (no route or job deletes one), so a tenant found once exists for as long as the process
# lives: ingest reads a tenant once per container, not once per request (a read and a round trip saved on every
# event). An unknown tenant is not remembered: it is read again, and accepted once an admin has created it. The memory
# is bounded for platforms with very many tenants: past the limit it starts over.
KNOWN_TENANTS_LIMIT = 10_000


@dataclass
class IngestService:
    tenants: TenantRepository
    # The tenant's endpoints to fan out to: producers' ingest keeps each list ENDPOINT_LIST_SECONDS (endpoint_lists.py)
    endpoints: EndpointLists
    events: EventRepository
    deliveries: DeliveryLog
    queue: DeliveryQueue
    schedule: RetrySchedule
    # How long the invocation that stored an event may still be writing its deliveries: the reconciler's grace,
    # which leaves the same writes alone for as long (wiring passes `services.reconcile.RECONCILE_GRACE`).
    writer_window: timedelta
    event_types: EventDataCheck | None = None  # data held to its type's registered schema (the catalogue)
    # Parks new deliveries behind their endpoint's open circuit on arrival; None: every delivery is enqueued, and the
    # delivery function parks those that must wait (platform events, sent from functions without the lot).
    parking: Parking | None = None
    telemetry: DeliveryTelemetry | None = None  # counts the deliveries parked on arrival
    # The sampled flag of the traces the platform starts for events that came without one (domain/trace_context.py):
    # set when the platform's own tracing is on, so that a consumer's tracer knows the platform may have recorded it.
    new_traces_sampled: bool = False
    clock: Callable[[], datetime] = field(default=utcnow)
    _known_tenants: set[str] = field(default_factory=set, init=False, repr=False)

    def publish(
        self,
        *,
        tenant_id: str,
        event_type: str,
        data: dict[str, Any],
        ordering_key: str | None = None,
        request_key: str | None = None,
        recipients: list[Endpoint] | None = None,
        trace: TraceContext | None = None,
    ) -> Accepted:
        """`request_key`: the request's `Idempotency-Key` (scoped to the caller) and body, when it has one: the
        event's id is derived from it, so that a retry after a crash converges on the event the first run stored.
        `recipients`: the endpoints to fan out to when the caller has chosen them (operational webhooks, which
        listed them already); otherwise the tenant's. `trace`: the producer's trace context, kept with the event (a
        retry that finds the event stored keeps the first request's); None: the platform starts a trace."""
        self._require_tenant(tenant_id)
        if self.event_types is not None:
            self.event_types.check(event_type, data)
        now = self.clock()
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
            trace=self._trace(trace),
        )
        if request_key is None:  # logged: the event, then its deliveries (adapters/event_log.py says why)
            endpoints = self._recipients(tenant_id, recipients)
            deliveries = _fan_out(event, _index(endpoints), now)
            self.events.append([(event, deliveries)])
            unsent = self._record(self._parked_on_arrival(deliveries, endpoints, now), logged=True)
        else:
            fresh = self.events.put(event)
            if not fresh:  # a retry of a request that died after storing its event: carry on with the stored one
                stored = self.events.get(tenant_id, event.id)
                if stored is None:
                    raise LookupError(f"event {event.id} was stored and is not readable")
                event = stored
            endpoints = self._recipients(tenant_id, recipients)
            deliveries = _fan_out(event, _index(endpoints), now)
            if fresh:
                unsent = self._record(self._parked_on_arrival(deliveries, endpoints, now))
            else:
                unsent = self._record_again(deliveries)
        if unsent:
            self._send(tenant_id, [(d, event) for d in unsent])
        return Accepted(
            event_id=event.id,
            delivery_ids=[d.id for d in deliveries],
            sequence=event.sequence,
            warnings=self._warnings(event_type) if not deliveries else [],
        )

    def publish_batch(self, *, tenant_id: str, items: Sequence[BatchItem]) -> list[ItemOutcome]:
        """Each item's outcome, in order: accepted (perhaps a duplicate of its key's earlier event) or refused.

        At most one read of the tenant (none once this process knows it) and one of its endpoints for the whole
        batch; one sequence write per ordering key; the writes batched as the module's docstring says."""
        self._require_tenant(tenant_id)
        refused = self._refused_by_catalogue(items)  # those items answer their problem in place
        kept = [item for position, item in enumerate(items) if position not in refused]
        answers = iter(self._publish_items(tenant_id, kept) if kept else [])
        return [refused[position] if position in refused else next(answers) for position in range(len(items))]

    def _recipients(self, tenant_id: str, recipients: list[Endpoint] | None) -> list[Endpoint]:
        return _deliverable(self.endpoints.list_for_tenant(tenant_id) if recipients is None else recipients)

    def _trace(self, given: TraceContext | None) -> TraceContext | None:
        """The event's trace to store: the producer's, or a new sampled one; None: the platform's unsampled one,
        derived from the event's id (`Event.trace`), so that every event has one."""
        if given is not None or not self.new_traces_sampled:
            return given
        return trace_context.start(sampled=True)

    def _require_tenant(self, tenant_id: str) -> None:
        if tenant_id in self._known_tenants:
            return
        if self.tenants.get(tenant_id) is None:
            raise InvalidRequest(f"unknown tenant {tenant_id!r}")
        if len(self._known_tenants) >= KNOWN_TENANTS_LIMIT:
            self._known_tenants.clear()
        self._known_tenants.add(tenant_id)

    def _publish_items(self, tenant_id: str, items: Sequence[BatchItem]) -> list[ItemOutcome]:
        now = self.clock()
        endpoints = _deliverable(self.endpoints.list_for_tenant(tenant_id))
        index = _index(endpoints)  # one matching per distinct event type of the batch, not one per item
        events = self._new_events(tenant_id, items, now)
        # The items without a key are logged, all at once, before any delivery is written (adapters/event_log.py):
        # each event's fan-out created at the event's own time, its place in the log.
        logged = {
            event.id: self._parked_on_arrival(_fan_out(event, index, event.timestamp), endpoints, now)
            for event, item in zip(events, items, strict=True)
            if item.key is None
        }
        self.events.append([(event, logged[event.id]) for event in events if event.id in logged])
        outcomes: list[_Planned | DomainError] = []
        for event, item in zip(events, items, strict=True):
            if item.key is None or self.events.put(event):
                if event.id in logged:
                    deliveries = logged[event.id]
                else:
                    deliveries = self._parked_on_arrival(_fan_out(event, index, now), endpoints, now)
                unsent = [d for d in deliveries if d.status is DeliveryStatus.QUEUED]
                outcomes.append(_Planned(event, deliveries, unsent, duplicate=False))
            else:
                outcomes.append(self._published_before(tenant_id, item, event.id, index, now))
        planned = [outcome for outcome in outcomes if isinstance(outcome, _Planned)]
        listed = {d.id for deliveries in logged.values() for d in deliveries}
        self.deliveries.put_many([d for p in planned if not p.duplicate for d in p.deliveries], logged=listed)
        self._send(tenant_id, [(d, p.event) for p in planned for d in p.unsent])
        return [_answer(outcome, self._warnings) for outcome in outcomes]

    def _warnings(self, event_type: str) -> list[IngestWarning]:
        """For an event that matched no endpoint: a warning when its type is not in the catalogue (a typo?)."""
        if self.event_types is None:
            return []
        detail = unknown_type_detail(event_type, self.event_types.registered_names())
        return [IngestWarning(code=UNKNOWN_EVENT_TYPE, detail=detail)] if detail else []

    def _parked_on_arrival(
        self, deliveries: list[Delivery], endpoints: list[Endpoint], now: datetime
    ) -> list[Delivery]:
        if self.parking is None:
            return deliveries
        by_id = {endpoint.id: endpoint for endpoint in endpoints}
        return [parked_on_arrival(d, by_id[d.endpoint_id], now) for d in deliveries]

    def _send(self, tenant_id: str, pairs: list[tuple[Delivery, Event]]) -> None:
        """The deliveries' first messages; those written parked get their lot entries instead, and a message only
        if the circuit closed as they parked (`Parking.park_new`). The others' messages go first, so that an
        endpoint whose circuit is open costs the event's other endpoints no wait (its lot entries and circuit read
        come after); a crash between the two leaves parked records with no entry, which the reconciler finds."""
        sending: list[tuple[Delivery, Event]] = []
        behind: dict[str, list[tuple[Delivery, Event]]] = {}
        for delivery, event in pairs:
            if self.parking is None or delivery.parked_at is None:
                sending.append((delivery, event))
            else:
                behind.setdefault(delivery.endpoint_id, []).append((delivery, event))
        if sending:
            self.queue.enqueue([first_attempt_message(d, event) for d, event in sending])
        taken_out: list[tuple[Delivery, Event]] = []
        for endpoint_id, parked in behind.items():
            assert self.parking is not None
            back = {d.id for d in self.parking.park_new([d for d, _ in parked], tenant_id, endpoint_id)}
            taken_out.extend(pair for pair in parked if pair[0].id in back)
            if self.telemetry is not None and len(parked) > len(back):
                self.telemetry.count(DELIVERIES_PARKED, len(parked) - len(back))
        if taken_out:  # the circuit closed as they parked (rare): their messages after all
            self.queue.enqueue([first_attempt_message(d, event) for d, event in taken_out])

    def _refused_by_catalogue(self, items: Sequence[BatchItem]) -> dict[int, DomainError]:
        """Items whose data fails their type's registered schema, by position (pointers into the batch body)."""
        refused: dict[int, DomainError] = {}
        if self.event_types is None:
            return refused
        for position, item in enumerate(items):
            try:
                self.event_types.check(item.event_type, item.data)
            except InvalidDocument as problem:
                errors = [{**e, "pointer": f"/events/{position}{e['pointer']}"} for e in problem.errors]
                refused[position] = InvalidDocument(str(problem), errors)
        return refused

    def _new_events(self, tenant_id: str, items: Sequence[BatchItem], now: datetime) -> list[Event]:
        sequences = self._draw_sequences(tenant_id, items)
        return [
            new_event(
                tenant_id=tenant_id,
                event_type=item.event_type,
                data=item.data,
                now=now + position * BATCH_ITEM_SPACING,
                horizon_seconds=self.schedule.horizon,
                ordering_key=item.ordering_key,
                sequence=sequence,
                event_id=ids.keyed_id("evt", _BATCH_KEY_SPACE, item.key) if item.key else None,
                trace=self._trace(item.trace),
            )
            for position, (item, sequence) in enumerate(zip(items, sequences, strict=True))
        ]

    def _draw_sequences(self, tenant_id: str, items: Sequence[BatchItem]) -> list[int | None]:
        """One counter write per ordering key, drawing as many numbers as the batch has items under it, handed
        out in batch order."""
        counts: dict[str, int] = {}
        for item in items:
            if item.ordering_key is not None:
                counts[item.ordering_key] = counts.get(item.ordering_key, 0) + 1
        following = {key: self.events.next_sequence(tenant_id, key, count) - count + 1 for key, count in counts.items()}
        sequences: list[int | None] = []
        for item in items:
            if item.ordering_key is None:
                sequences.append(None)
            else:
                sequences.append(following[item.ordering_key])
                following[item.ordering_key] += 1
        return sequences

    def _published_before(
        self, tenant_id: str, item: BatchItem, event_id: str, index: FilterIndex[Endpoint], now: datetime
    ) -> _Planned | DomainError:
        """An item whose key stored its event before: the same item converges on it; another is refused.

        The invocation that stored it may still be running (a concurrent retry) for up to `writer_window`: it
        batch-writes the deliveries unconditionally, so this one writes none until then, only sends what is
        written, and answers 409 if some are not written yet. After that, the writer is over: what it left
        undone is finished here, each missing delivery created only if still missing."""
        stored = self.events.get(tenant_id, event_id)
        if stored is None:
            raise LookupError(f"event {event_id} was stored and is not readable")
        if not _same_event(stored, tenant_id, item):
            return IdempotencyKeyReused("this idempotency key published a different event")
        deliveries = _fan_out(stored, index, now)
        if stored.timestamp + self.writer_window <= now:
            return _Planned(stored, deliveries, self._record_again(deliveries), duplicate=True)
        written = [self.deliveries.get(d.id) for d in deliveries]
        if any(d is None for d in written):
            over = math.ceil((stored.timestamp + self.writer_window - now).total_seconds())
            return IdempotencyKeyInFlight(
                "a request with this idempotency key may still be publishing it; retry after its writer's window",
                retry_after=max(1, over),
            )
        unsent = [d for d in written if d is not None and awaits_first_message(d)]
        return _Planned(stored, deliveries, unsent, duplicate=True)

    def _record(self, deliveries: list[Delivery], *, logged: bool = False) -> list[Delivery]:
        """A new event's deliveries (none can exist yet: their ids derive from the event's), written in batches;
        `logged`: listed by their event in the event log already."""
        self.deliveries.put_many(deliveries, logged={d.id for d in deliveries} if logged else frozenset())
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


def _deliverable(endpoints: list[Endpoint]) -> list[Endpoint]:
    """The endpoints new events fan out to (a disabled one's deliveries are recorded `cancelled`)."""
    return [endpoint for endpoint in endpoints if endpoint.state is not EndpointState.DELETED]


def _index(endpoints: list[Endpoint]) -> FilterIndex[Endpoint]:
    """The endpoints by their filters, for one request: matched once per distinct event type (domain/matching.py)."""
    return FilterIndex([(endpoint, endpoint.event_types) for endpoint in endpoints])


def _fan_out(event: Event, index: FilterIndex[Endpoint], now: datetime) -> list[Delivery]:
    """A delivery for each endpoint the event's type reaches and its content filter (if any) lets through; an event a
    filter excludes records nothing for that endpoint. The envelope is parsed once per event, and only if one of
    those endpoints has a filter; each filter is compiled once per process (`content_filter.compiled`), and all of
    them read the event through one `EventView` (each path resolved once, each distinct filter evaluated once)."""
    view: EventView | None = None
    deliveries = []
    for endpoint in index.matching(event.type):
        if endpoint.content_filter is not None:
            content_filter = compiled(endpoint.content_filter)
            if content_filter is not None:
                view = EventView(json.loads(event.body)) if view is None else view
                if not view.passes(content_filter):
                    continue
        deliveries.append(new_delivery(event, endpoint, now))
    return deliveries


def _same_event(stored: Event, tenant_id: str, item: BatchItem) -> bool:
    return (
        stored.tenant_id == tenant_id
        and stored.type == item.event_type
        and stored.ordering_key == item.ordering_key
        and stored.data == item.data
    )


def _answer(outcome: _Planned | DomainError, warnings: Callable[[str], list[IngestWarning]]) -> ItemOutcome:
    if isinstance(outcome, DomainError):
        return outcome
    return BatchAccepted(
        event_id=outcome.event.id,
        delivery_ids=[d.id for d in outcome.deliveries],
        sequence=outcome.event.sequence,
        duplicate=outcome.duplicate,
        warnings=warnings(outcome.event.type) if not outcome.deliveries else [],
    )
