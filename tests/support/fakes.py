"""In-memory fakes of the delivery service's ports, with the same conditional semantics as the adapters."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from hookrelay.adapters.event_log import is_loggable
from hookrelay.domain.circuit import CircuitState
from hookrelay.domain.event_types import EventType
from hookrelay.domain.lifecycle import parkable, parked
from hookrelay.domain.models import (
    DELIVERY_PATH_FIELDS,
    Delivery,
    Endpoint,
    EndpointState,
    Event,
    FailureNotice,
    Tenant,
)
from hookrelay.domain.pacing import reserve
from hookrelay.domain.paging import BoundedCount, Position
from hookrelay.domain.queues import DeliveryLane
from hookrelay.domain.status import CLAIMABLE_STATUSES, DeadReason, DeliveryStatus
from hookrelay.services.parking import Parking
from hookrelay.services.ports import (
    AttemptRecord,
    CircuitCommand,
    DeliveryFilter,
    DeliveryMessage,
    DeliveryPage,
    ParkedDelivery,
    ParkOutcome,
    RetryTicket,
    SendResult,
    Unclaimed,
    UnknownPosition,
)


@dataclass
class FakeClock:
    """Time that moves only when told to (or when the service sleeps)."""

    now: datetime = field(default_factory=lambda: datetime(2025, 3, 7, 18, 0, tzinfo=UTC))
    slept: list[float] = field(default_factory=list)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(seconds)


def claim(delivery: Delivery, attempt_number: int, now: datetime) -> dict[str, Any]:
    """What a claim changes on a delivery, taken from the queue or out of the lot: the attempt it is taken for."""
    return {
        "status": DeliveryStatus.ATTEMPTING,
        "attempt_count": attempt_number,
        "claimed_at": now,
        "updated_at": now,
        "first_attempt_at": delivery.first_attempt_at or now,
    }


def _whose(delivery: Delivery | None, tenant_id: str | None) -> Delivery | None:
    """The delivery, if it is the tenant's (when one is named), as the adapter reads one with a tenant."""
    return delivery if delivery is None or tenant_id is None or delivery.tenant_id == tenant_id else None


class FakeDeliveries:
    def __init__(self) -> None:
        self.items: dict[str, Delivery] = {}
        # Deliveries an eventually consistent read still shows as they were (None: not yet written), by id.
        self.behind: dict[str, Delivery | None] = {}

    def put_many(self, deliveries: Sequence[Delivery], logged: Collection[str] = frozenset()) -> None:
        for delivery in deliveries:  # (the fake's log is its items, logged or not)
            self.items[delivery.id] = delivery

    def get(self, delivery_id: str, tenant_id: str | None = None) -> Delivery | None:
        return _whose(self.items.get(delivery_id), tenant_id)

    def peek(self, delivery_id: str, tenant_id: str | None = None) -> Delivery | None:
        """An eventually consistent read: what `behind` says it still shows, if anything, else the item."""
        if delivery_id in self.behind:
            return _whose(self.behind[delivery_id], tenant_id)
        return _whose(self.items.get(delivery_id), tenant_id)

    def claim(
        self,
        delivery_id: str,
        tenant_id: str,
        attempt_number: int,
        now: datetime,
        stale_before: datetime,
        unstored: Delivery | None = None,
    ) -> Delivery | None:
        current = self.items.get(delivery_id, unstored)  # (the adapter's claim creates one that has no record)
        if current is None or current.tenant_id != tenant_id or current.parked_at is not None:
            return None
        fresh = current.status in CLAIMABLE_STATUSES and current.attempt_count == attempt_number - 1
        abandoned = (
            current.status is DeliveryStatus.ATTEMPTING
            and current.attempt_count == attempt_number
            and current.claimed_at is not None
            and current.claimed_at < stale_before
        )
        if not (fresh or abandoned):
            return None
        claimed = replace(current, **claim(current, attempt_number, now))
        self.items[delivery_id] = claimed
        return claimed

    def record_attempt(
        self,
        delivery_id: str,
        tenant_id: str,
        attempt_number: int,
        record: AttemptRecord,
        unclaimed: Unclaimed | None = None,
    ) -> bool:
        current = self.items.get(delivery_id)
        if current is None and unclaimed is not None and unclaimed.unstored is not None:
            current = unclaimed.unstored  # (the adapter's record creates a delivery that has none, as read)
        if current is None:
            return False
        held = current.status is DeliveryStatus.ATTEMPTING and current.attempt_count == attempt_number
        if unclaimed is not None:
            free = (
                current.tenant_id == tenant_id
                and current.parked_at is None
                and current.status in CLAIMABLE_STATUSES
                and current.attempt_count == attempt_number - 1
            )
            late = unclaimed.late_claim_at is not None and current.claimed_at == unclaimed.late_claim_at
            held = free or (held and late)
        if not held:
            return False
        self.items[delivery_id] = record.applied_to(current, attempt_number)
        return True

    def set_status(
        self,
        delivery_id: str,
        tenant_id: str,
        status: DeliveryStatus,
        now: datetime,
        expires_at: int | None,
        *,
        expected: DeliveryStatus | None = None,
    ) -> bool:
        current = self.items.get(delivery_id)
        if current is None or (expected is not None and current.status is not expected):
            return False
        update: dict[str, object] = {"status": status, "updated_at": now, "claimed_at": None, "next_attempt_at": None}
        if status.is_terminal:
            update["completed_at"] = now
        if expires_at is not None:
            update["expires_at"] = expires_at
        self.items[delivery_id] = replace(current, **update)
        return True

    def mark_dead_lettered(self, delivery_id: str, at: datetime, reason: DeadReason) -> bool:
        current = self.items.get(delivery_id)
        if current is None or current.status is not DeliveryStatus.DEAD or current.dead_lettered_at is not None:
            return False
        self.items[delivery_id] = replace(current, dead_lettered_at=at, dead_reason=reason)
        return True

    def mark_recovered(self, delivery_id: str, tenant_id: str, replay_id: str, at: datetime) -> bool:
        current = self.items.get(delivery_id)
        if (
            current is None
            or current.tenant_id != tenant_id
            or current.status not in (DeliveryStatus.DEAD, DeliveryStatus.CANCELLED)
            or current.recovered_by is not None
        ):
            return False
        self.items[delivery_id] = replace(current, recovered_by=replay_id, recovered_at=at)
        return True

    def put_new(self, delivery: Delivery) -> bool:
        if delivery.id in self.items:
            return False
        self.items[delivery.id] = delivery
        return True


class FakeSlowTails:
    """The slow lane's tails (adapters/slow_tails.py), a dict."""

    def __init__(self) -> None:
        self.items: dict[str, str] = {}

    def tail(self, group: str) -> str | None:
        return self.items.get(group)

    def name(self, group: str, key: str) -> None:
        self.items[group] = key

    def clear(self, group: str, key: str) -> bool:
        if self.items.get(group) != key:
            return False
        del self.items[group]
        return True


class FakeEndpoints:
    def __init__(self, *endpoints: Endpoint) -> None:
        self.items = {(e.tenant_id, e.id): e for e in endpoints}

    def put(self, endpoint: Endpoint) -> None:
        self.items[(endpoint.tenant_id, endpoint.id)] = endpoint

    def get(self, tenant_id: str, endpoint_id: str) -> Endpoint | None:
        return self.items.get((tenant_id, endpoint_id))

    def list_for_tenant(self, tenant_id: str) -> list[Endpoint]:
        return [e for (tenant, _), e in self.items.items() if tenant == tenant_id]

    def page_for_tenant(
        self, tenant_id: str, limit: int, start: Position | None
    ) -> tuple[list[Endpoint], Position | None]:
        """As EndpointTable.page_for_tenant: live ones, newest (highest id) first; the position is the last id."""
        live = sorted(
            (e for e in self.list_for_tenant(tenant_id) if e.state is not EndpointState.DELETED),
            key=lambda e: e.id,
            reverse=True,
        )
        if start is not None:
            tenant, _, after = start.partition("/")
            if tenant != tenant_id:
                raise UnknownPosition(start)
            live = [e for e in live if e.id < after]
        page = live[:limit]
        return page, Position(f"{tenant_id}/{page[-1].id}") if len(live) > limit else None

    # The failing spell, with the adapter's conditions.

    @staticmethod
    def same_spell(current: Endpoint, read: Endpoint) -> bool:
        return (current.failing_since, current.failure_notice) == (read.failing_since, read.failure_notice)

    def replace(self, endpoint: Endpoint, *, expected_updated_at: datetime, read: Endpoint | None = None) -> bool:
        """As EndpointTable.replace: conditional on `updated_at` and the spell, leaving the circuit as stored."""
        current = self.items.get((endpoint.tenant_id, endpoint.id))
        if (
            current is None
            or current.updated_at != expected_updated_at
            or not self.same_spell(current, read or endpoint)
        ):
            return False
        self.put(replace(endpoint, **{name: getattr(current, name) for name in DELIVERY_PATH_FIELDS}))
        return True

    def _update(self, endpoint: Endpoint, **changes: object) -> None:
        self.items[(endpoint.tenant_id, endpoint.id)] = replace(endpoint, **changes)

    def mark_failing(self, tenant_id: str, endpoint_id: str, since: datetime) -> bool:
        current = self.items.get((tenant_id, endpoint_id))
        if current is None or current.failing_since is not None or current.state is not EndpointState.ENABLED:
            return False
        self._update(current, failing_since=since, failure_notice=None)
        return True

    def mark_recovered(self, tenant_id: str, endpoint_id: str) -> bool:
        current = self.items.get((tenant_id, endpoint_id))
        if current is None or current.failing_since is None:
            return False
        self._update(current, failing_since=None, failure_notice=None)
        return True

    def switch_lane(self, tenant_id: str, endpoint_id: str, to: DeliveryLane) -> bool:
        current = self.items.get((tenant_id, endpoint_id))
        if current is None or current.lane is to:
            return False
        self._update(current, lane=to)
        return True

    def mark_slow_tail(self, tenant_id: str, endpoint_id: str, mark: str) -> None:
        current = self.items[(tenant_id, endpoint_id)]
        self._update(current, tail_marks=current.tail_marks | {mark})

    def unmark_slow_tail(self, tenant_id: str, endpoint_id: str, mark: str) -> None:
        current = self.items[(tenant_id, endpoint_id)]
        self._update(current, tail_marks=current.tail_marks - {mark})

    def clear_legacy_slow_tail(self, tenant_id: str, endpoint_id: str, group: str, key: str) -> bool:
        current = self.items.get((tenant_id, endpoint_id))
        if current is None or current.slow_tails.get(group) != key:
            return False
        self._update(current, slow_tails={g: k for g, k in current.slow_tails.items() if g != group})
        return True

    def failing(self, since_before: datetime) -> Iterator[Endpoint]:
        found = [
            e
            for e in self.items.values()
            if e.state is EndpointState.ENABLED and e.failing_since is not None and e.failing_since <= since_before
        ]
        yield from sorted(found, key=lambda e: e.failing_since or since_before)

    def record_notice(self, endpoint: Endpoint, notice: FailureNotice) -> bool:
        current = self.items.get((endpoint.tenant_id, endpoint.id))
        if current is None or current.state is not EndpointState.ENABLED or not self.same_spell(current, endpoint):
            return False
        self._update(current, failure_notice=notice)
        return True

    def withdraw_notice(self, endpoint: Endpoint, notice: FailureNotice) -> None:
        current = self.items.get((endpoint.tenant_id, endpoint.id))
        if current is not None and self.same_spell(current, replace(endpoint, failure_notice=notice)):
            self._update(current, failure_notice=endpoint.failure_notice)


class ConditionalEndpoints(FakeEndpoints):
    """FakeEndpoints counting its conditional writes; `before_write` lets a test slip in a concurrent writer."""

    def __init__(self, *endpoints: Endpoint) -> None:
        super().__init__(*endpoints)
        self.before_write: Callable[[], None] | None = None
        self.writes = 0

    def replace(self, endpoint: Endpoint, *, expected_updated_at: datetime, read: Endpoint | None = None) -> bool:
        self.writes += 1
        if self.before_write is not None:
            self.before_write()
        return super().replace(endpoint, expected_updated_at=expected_updated_at, read=read)


class FakeEvents:
    def __init__(self, *events: Event) -> None:
        self.items = {e.id: e for e in events}
        self.extensions: list[tuple[str, int]] = []
        self.sequences: dict[tuple[str, str], int] = {}  # apart from the events, as the adapter keeps them
        self.reads: list[str] = []  # the ids `get` was asked for, in order

    def put(self, event: Event) -> bool:
        if event.id in self.items:
            return False
        self.items[event.id] = event
        return True

    def get(self, tenant_id: str, event_id: str) -> Event | None:
        self.reads.append(event_id)
        event = self.items.get(event_id)
        return event if event is not None and event.tenant_id == tenant_id else None

    def append(self, events: Sequence[tuple[Event, Sequence[Delivery]]]) -> None:
        for event, _ in events:  # (the fake's log is its deliveries, whoever lists them)
            if not is_loggable(event):  # as the adapter refuses it: its key would not follow from its id
                raise ValueError(f"event {event.id} is not timed at its own millisecond: it cannot be logged")
            self.items[event.id] = event

    def next_sequence(self, tenant_id: str, ordering_key: str, count: int = 1) -> int:
        key = (tenant_id, ordering_key)
        self.sequences[key] = self.sequences.get(key, 0) + count
        return self.sequences[key]

    def extend_expiry(self, tenant_id: str, event_id: str, expires_at: int) -> None:
        self.extensions.append((event_id, expires_at))
        event = self.items.get(event_id)
        if event is not None and event.tenant_id == tenant_id:
            self.items[event_id] = replace(event, expires_at=max(event.expires_at, expires_at))


@dataclass
class SentRequest:
    url: str
    headers: dict[str, str]
    body: bytes


class ScriptedSender:
    """Answers each send with the next scripted result; the clock moves by each result's latency."""

    def __init__(self, clock: FakeClock, results: Iterable[SendResult] = ()) -> None:
        self.clock = clock
        self.results: deque[SendResult] = deque(results)
        self.sent: list[SentRequest] = []

    def send(self, url: str, headers: dict[str, str], body: bytes, timeout: float | None = None) -> SendResult:
        self.sent.append(SentRequest(url, headers, body))
        result = self.results.popleft()
        self.clock.advance(result.latency_ms / 1000)
        return result


@dataclass
class RecordingWorkflow:
    started: list[RetryTicket] = field(default_factory=list)
    resumed: list[RetryTicket] = field(default_factory=list)
    reports: list[tuple[str, DeliveryStatus, RetryTicket | None]] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)
    dead_tokens: set[str] = field(default_factory=set)  # tokens whose task timed out: reports to them are refused

    def start(self, ticket: RetryTicket) -> None:
        if all(t.delivery_id != ticket.delivery_id for t in self.started):  # named after the delivery: idempotent
            self.started.append(ticket)

    def resume(self, ticket: RetryTicket) -> None:
        # Named after the delivery and the attempt: idempotent per attempt.
        if all((t.delivery_id, t.attempt) != (ticket.delivery_id, ticket.attempt) for t in self.resumed):
            self.resumed.append(ticket)

    parked_tokens: list[str] = field(default_factory=list)
    probes: list[CircuitCommand] = field(default_factory=list)
    answers: list[tuple[str, CircuitCommand]] = field(default_factory=list)
    running: set[tuple[str, int]] = field(default_factory=set)
    stopped: list[str] = field(default_factory=list)

    def report(self, reply_to: str, status: DeliveryStatus, ticket: RetryTicket | None) -> bool:
        self.reports.append((reply_to, status, ticket))
        return reply_to not in self.dead_tokens

    def parked(self, reply_to: str) -> bool:
        self.parked_tokens.append(reply_to)
        return reply_to not in self.dead_tokens

    def delivery_missing(self, reply_to: str, delivery_id: str) -> None:
        self.failures.append((reply_to, delivery_id))

    def stop(self, delivery_id: str) -> None:
        self.stopped.append(delivery_id)

    def start_probe(self, command: CircuitCommand) -> None:
        if (command.endpoint_id, command.step) not in self.running:
            self.running.add((command.endpoint_id, command.step))
            self.probes.append(command)

    def probe_running(self, endpoint_id: str, step: int) -> bool:
        return (endpoint_id, step) in self.running

    def answer(self, reply_to: str, command: CircuitCommand) -> bool:
        self.answers.append((reply_to, command))
        return reply_to not in self.dead_tokens


@dataclass
class RecordingTelemetry:
    errors: list[tuple[str, str, Exception]] = field(default_factory=list)  # (metric, delivery id, error)

    counts: dict[str, int] = field(default_factory=dict)

    def bookkeeping_failed(self, metric: str, delivery_id: str, error: Exception) -> None:
        self.errors.append((metric, delivery_id, error))

    def count(self, metric: str, value: int = 1) -> None:
        self.counts[metric] = self.counts.get(metric, 0) + value


@dataclass
class RecordingDeadLetters:
    published: list[Delivery] = field(default_factory=list)
    reasons: list[DeadReason] = field(default_factory=list)

    def publish(self, delivery: Delivery, reason: DeadReason) -> None:
        self.published.append(delivery)
        self.reasons.append(reason)


# What closing the circuit (or resetting it) clears, as DynamoCircuits.close and .reset remove it.
_CLOSED_CIRCUIT: dict[str, object] = {
    "circuit": CircuitState.CLOSED,
    "next_probe_at": None,
    "drain_paused_until": None,
    "circuit_failures": 0,
    "circuit_closing": False,
}


class FakeCircuits:
    """The circuit's conditional updates, on FakeEndpoints' records."""

    def __init__(self, endpoints: FakeEndpoints) -> None:
        self.endpoints = endpoints

    def _now(self, endpoint: Endpoint) -> Endpoint | None:
        return self.endpoints.get(endpoint.tenant_id, endpoint.id)

    def _change(self, endpoint: Endpoint, when: Callable[[Endpoint], bool], **changes: object) -> bool:
        """Apply the changes if the endpoint exists and `when` holds of it as it is now; whether they applied."""
        now = self._now(endpoint)
        if now is None or not when(now):
            return False
        self.endpoints._update(now, **{k: v(now) if callable(v) else v for k, v in changes.items()})
        return True

    def count_failure(self, tenant_id: str, endpoint_id: str, delivery_id: str) -> Endpoint | None:
        current = self.endpoints.get(tenant_id, endpoint_id)
        if current is None or current.state is not EndpointState.ENABLED or current.circuit is not CircuitState.CLOSED:
            return None
        failed = [*current.circuit_failed, delivery_id]
        self.endpoints._update(current, circuit_failures=current.circuit_failures + 1, circuit_failed=failed)
        return self.endpoints.get(tenant_id, endpoint_id)

    def reset_failures(self, tenant_id: str, endpoint_id: str) -> None:
        current = self.endpoints.get(tenant_id, endpoint_id)
        if current is not None:
            self.endpoints._update(current, circuit_failures=0, circuit_failed=[])

    def open(self, endpoint: Endpoint, at: datetime, due_at: datetime, threshold: int) -> bool:
        return self._change(
            endpoint,
            lambda now: (
                now.state is EndpointState.ENABLED
                and now.circuit is CircuitState.CLOSED
                and now.circuit_failures >= threshold
            ),
            circuit=CircuitState.OPEN,
            circuit_opened_at=at,
            next_probe_at=due_at,
            probes_made=0,
            circuit_step=lambda now: now.circuit_step + 1,
            circuit_failures=0,
            circuit_failed=[],
            drained_count=0,
            drain_paused_until=None,
        )

    def reopen(self, endpoint: Endpoint, due_at: datetime) -> bool:
        stored = self.endpoints.get(endpoint.tenant_id, endpoint.id)
        return self._change(
            endpoint,
            lambda now: now.circuit is CircuitState.DRAINING,
            circuit=CircuitState.OPEN,
            next_probe_at=due_at,
            probes_made=(stored.probes_made if stored else 0) + 1,
            drain_paused_until=None,
        )

    @staticmethod
    def _owned(state: CircuitState, step: int) -> Callable[[Endpoint], bool]:
        return lambda now: now.circuit is state and now.circuit_step == step

    def probed(self, endpoint: Endpoint, step: int, due_at: datetime) -> bool:
        return self._change(
            endpoint,
            self._owned(CircuitState.OPEN, step),
            next_probe_at=due_at,
            probes_made=lambda now: now.probes_made + 1,
        )

    def start_drain(self, endpoint: Endpoint, step: int) -> bool:
        return self._change(
            endpoint,
            self._owned(CircuitState.OPEN, step),
            circuit=CircuitState.DRAINING,
            drained_count=0,
            drain_paused_until=None,
        )

    def drained(self, endpoint: Endpoint, step: int, released: int, due_at: datetime) -> bool:
        return self._change(
            endpoint,
            self._owned(CircuitState.DRAINING, step),
            next_probe_at=due_at,
            drained_count=lambda now: now.drained_count + released,
        )

    def pause_drain(self, tenant_id: str, endpoint_id: str, until: datetime) -> bool:
        current = self.endpoints.get(tenant_id, endpoint_id)
        if current is None:
            return False
        return self._change(current, lambda now: now.circuit is CircuitState.DRAINING, drain_paused_until=until)

    def begin_close(self, endpoint: Endpoint, step: int) -> bool:
        return self._change(endpoint, self._owned(CircuitState.DRAINING, step), circuit_closing=True)

    def hold_open(self, endpoint: Endpoint) -> bool:
        return self._change(
            endpoint,
            lambda now: now.circuit is CircuitState.DRAINING and now.circuit_closing,
            circuit_closing=False,
        )

    def close(self, endpoint: Endpoint, step: int) -> bool:
        owned = self._owned(CircuitState.DRAINING, step)
        return self._change(endpoint, lambda now: owned(now) and now.circuit_closing, **_CLOSED_CIRCUIT)

    def take_over(self, endpoint: Endpoint, step: int, due_at: datetime) -> bool:
        return self._change(
            endpoint,
            lambda now: now.circuit_step == step and now.circuit is not CircuitState.CLOSED,
            circuit_step=step + 1,
            next_probe_at=due_at,
        )

    def reset(self, endpoint: Endpoint) -> bool:
        return self._change(endpoint, lambda now: now.state is not EndpointState.ENABLED, **_CLOSED_CIRCUIT)

    def open_circuits(self) -> Iterator[Endpoint]:
        yield from [e for e in self.endpoints.items.values() if e.circuit is not CircuitState.CLOSED]


class FakeParkingLot:
    """Parked marks on FakeDeliveries' records and the lot's entries (`parked_by`), written in the adapter's order
    (the record, then the lot). `crash_before` ("put" or "drop") makes the next such lot write raise instead,
    as a crash between the two writes would leave things."""

    def __init__(self, deliveries: FakeDeliveries) -> None:
        self.deliveries = deliveries
        self.parked_by: dict[str, str] = {}  # the lot: delivery id -> endpoint id
        self.marks: dict[str, str] = {}  # the records' marks: delivery id -> endpoint id
        self.crash_before: str | None = None

    def _lot_write(self, kind: str) -> None:
        if self.crash_before == kind:
            self.crash_before = None
            raise RuntimeError(f"crashed before the lot entry's {kind}")

    def park(
        self,
        delivery_id: str,
        tenant_id: str,
        endpoint_id: str,
        attempt_number: int | None,
        at: datetime,
        unstored: Delivery | None = None,
    ) -> ParkOutcome:
        current = self.deliveries.get(delivery_id) or unstored  # (the adapter's park stores one with no record)
        if current is not None and current.tenant_id == tenant_id and self.marks.get(delivery_id) == endpoint_id:
            self._lot_write("put")
            self.parked_by[delivery_id] = endpoint_id
            return ParkOutcome.ALREADY_PARKED
        if (
            current is None
            or delivery_id in self.marks
            or not parkable(current, tenant_id, endpoint_id, attempt_number)
        ):
            return ParkOutcome.NOT_PARKABLE
        self.deliveries.items[delivery_id] = parked(current, at)
        self.marks[delivery_id] = endpoint_id
        self._lot_write("put")
        self.parked_by[delivery_id] = endpoint_id
        return ParkOutcome.PARKED

    def enter(self, deliveries: Sequence[Delivery]) -> None:
        for delivery in deliveries:  # written parked: the record's mark came with it (the adapter's delivery_item)
            self.marks[delivery.id] = delivery.endpoint_id
            self._lot_write("put")
            self.parked_by[delivery.id] = delivery.endpoint_id

    def missing(self, deliveries: Sequence[Delivery]) -> set[str]:
        return {d.id for d in deliveries if self.parked_by.get(d.id) != d.endpoint_id}

    def unpark(self, delivery_id: str, endpoint_id: str) -> bool:
        current = self.deliveries.get(delivery_id)
        if current is None or self.marks.get(delivery_id) != endpoint_id:
            return False
        self._unpark(current)
        return True

    def parked(self, endpoint_id: str, limit: int) -> list[ParkedDelivery]:
        mine = [self.deliveries.items[i] for i, e in self.parked_by.items() if e == endpoint_id]
        mine.sort(key=lambda d: ((d.event_order or ""), d.id))
        return [
            ParkedDelivery(
                d.id,
                d.tenant_id,
                d.status,
                d.attempt_count,
                d.created_at,
                d.first_attempt_at,
                d.event_order or "",
                d.message_group_id,
            )
            for d in mine[:limit]
        ]

    def count(self, endpoint_id: str, up_to: int) -> BoundedCount:
        return BoundedCount.of(sum(1 for e in self.parked_by.values() if e == endpoint_id), up_to)

    def _unpark(self, delivery: Delivery, **changes: object) -> Delivery:
        self.marks.pop(delivery.id, None)
        updated = replace(delivery, parked_at=None, **changes)
        self.deliveries.items[delivery.id] = updated
        self._lot_write("drop")
        self.parked_by.pop(delivery.id, None)
        return updated

    def _drop_if_stale(self, delivery_id: str, endpoint_id: str) -> None:
        if self.marks.get(delivery_id) != endpoint_id and self.parked_by.get(delivery_id) == endpoint_id:
            del self.parked_by[delivery_id]

    def claim(
        self,
        delivery_id: str,
        tenant_id: str,
        endpoint_id: str,
        attempt_number: int,
        now: datetime,
        *,
        keep_entry: bool = False,
    ) -> Delivery | None:
        current = self.deliveries.get(delivery_id)
        if (
            current is None
            or self.marks.get(delivery_id) != endpoint_id
            or current.tenant_id != tenant_id
            or current.status not in CLAIMABLE_STATUSES
            or current.attempt_count != attempt_number - 1
        ):
            self._drop_if_stale(delivery_id, endpoint_id)
            return None
        entry = self.parked_by.get(delivery_id)
        claimed = self._unpark(current, **claim(current, attempt_number, now))
        if keep_entry and entry is not None:
            self.parked_by[delivery_id] = entry
        return claimed

    def forget(self, parked: ParkedDelivery, endpoint_id: str) -> None:
        if self.parked_by.get(parked.id) == endpoint_id:
            del self.parked_by[parked.id]

    def end(
        self,
        parked: ParkedDelivery,
        endpoint_id: str,
        status: DeliveryStatus,
        now: datetime,
        expires_at: int,
        dead_reason: DeadReason | None = None,
    ) -> Delivery | None:
        if dead_reason is not None and status is not DeliveryStatus.DEAD:
            raise ValueError(f"a {status.value} delivery has no dead reason")
        current = self.deliveries.get(parked.id)
        if (
            current is None
            or self.marks.get(parked.id) != endpoint_id
            or current.status is not parked.status
            or current.attempt_count != parked.attempt_count
        ):
            self._drop_if_stale(parked.id, endpoint_id)
            return None
        death = {"dead_lettered_at": now, "dead_reason": dead_reason} if dead_reason is not None else {}
        return self._unpark(
            current,
            status=status,
            completed_at=now,
            updated_at=now,
            expires_at=expires_at,
            next_attempt_at=None,
            claimed_at=None,
            **death,
        )

    def get_many(self, delivery_ids: Sequence[str]) -> list[Delivery]:
        return [self.deliveries.items[i] for i in dict.fromkeys(delivery_ids) if i in self.deliveries.items]


def nothing_parked(endpoints: FakeEndpoints) -> Parking:
    """The parking protocol over an empty lot, for the services that only ask how many are parked (health)."""
    return Parking(FakeParkingLot(FakeDeliveries()), FakeCircuits(endpoints), endpoints)


class NoDeliveries:
    """A delivery log with nothing in it, for the services that only search it (health, notices)."""

    def find(self, where: DeliveryFilter, limit: int, start: Position | None, now: datetime) -> DeliveryPage:
        return DeliveryPage([], None)


@dataclass
class FakeEventTypes:
    """The catalogue in memory, by name; counts reads (ingest's cache is judged by them)."""

    types: dict[str, EventType] = field(default_factory=dict)
    reads: int = 0

    def put(self, event_type: EventType) -> None:
        self.types[event_type.name] = event_type

    def get(self, name: str) -> EventType | None:
        self.reads += 1
        return self.types.get(name)

    def delete(self, name: str) -> bool:
        return self.types.pop(name, None) is not None

    def page(self, limit: int, after: str | None) -> tuple[list[EventType], str | None]:
        names = sorted(n for n in self.types if after is None or n > after)
        found = [self.types[n] for n in names[:limit]]
        return found, (found[-1].name if len(names) > limit else None)

    def names(self) -> list[str]:
        return sorted(self.types)


class KnownTenants:
    """A tenant store that knows these tenant ids (reads only: the services under test never create tenants)."""

    def __init__(self, *ids: str, created_at: datetime = datetime(2026, 1, 1, tzinfo=UTC)) -> None:
        self.ids = ids
        self.created_at = created_at

    def put(self, tenant: Tenant) -> None:
        raise NotImplementedError

    def get(self, tenant_id: str) -> Tenant | None:
        return Tenant(id=tenant_id, name="acme", created_at=self.created_at) if tenant_id in self.ids else None


@dataclass
class RecordingQueue:
    """The delivery queue: keeps what was enqueued, in order."""

    sent: list[DeliveryMessage] = field(default_factory=list)

    def enqueue(self, messages: Sequence[DeliveryMessage]) -> None:
        self.sent.extend(messages)


@dataclass
class FakePacer:
    """Each endpoint's next free send slot in memory, by the same rule as the DynamoDB adapter (domain/pacing.py)."""

    next_us: dict[str, int] = field(default_factory=dict)
    reservations: list[tuple[str, int]] = field(default_factory=list)  # (endpoint, slot) as given
    refusals: int = 0

    def reserve(self, endpoint_id: str, now_us: int, interval_us: int, latest_us: int | None) -> int | None:
        taken = reserve(self.next_us.get(endpoint_id), now_us, interval_us, latest_us)
        if taken is None:
            self.refusals += 1
            return None
        self.next_us[endpoint_id] = taken.next_us
        self.reservations.append((endpoint_id, taken.slot_us))
        return taken.slot_us

    def next_free(self, endpoint_id: str) -> int | None:
        return self.next_us.get(endpoint_id)
