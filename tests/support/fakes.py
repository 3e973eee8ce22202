"""In-memory fakes of the delivery service's ports, with the same conditional semantics as the adapters."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from hookrelay.domain.models import Delivery, Endpoint, EndpointState, Event, FailureNotice
from hookrelay.domain.status import CLAIMABLE_STATUSES, DeliveryStatus
from hookrelay.services.ports import AttemptRecord, RetryTicket, SendResult


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


class FakeDeliveries:
    def __init__(self) -> None:
        self.items: dict[str, Delivery] = {}

    def put_many(self, deliveries: Sequence[Delivery]) -> None:
        for delivery in deliveries:
            self.items[delivery.id] = delivery

    def get(self, delivery_id: str) -> Delivery | None:
        return self.items.get(delivery_id)

    def claim(
        self, delivery_id: str, tenant_id: str, attempt_number: int, now: datetime, stale_before: datetime
    ) -> Delivery | None:
        current = self.items.get(delivery_id)
        if current is None or current.tenant_id != tenant_id:
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
        claimed = current.model_copy(
            update={
                "status": DeliveryStatus.ATTEMPTING,
                "attempt_count": attempt_number,
                "claimed_at": now,
                "updated_at": now,
                "first_attempt_at": current.first_attempt_at or now,
            }
        )
        self.items[delivery_id] = claimed
        return claimed

    def record_attempt(self, delivery_id: str, tenant_id: str, attempt_number: int, record: AttemptRecord) -> bool:
        current = self.items[delivery_id]
        if current.status is not DeliveryStatus.ATTEMPTING or current.attempt_count != attempt_number:
            return False
        self.items[delivery_id] = current.model_copy(
            update={
                "status": record.status,
                "attempts": [*current.attempts, record.attempt],
                "next_attempt_at": record.next_attempt_at,
                "completed_at": record.completed_at,
                "expires_at": record.expires_at,
                "claimed_at": None,
            }
        )
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
        if expected is not None and self.items[delivery_id].status is not expected:
            return False
        update: dict[str, object] = {"status": status, "updated_at": now, "claimed_at": None, "next_attempt_at": None}
        if status.is_terminal:
            update["completed_at"] = now
        if expires_at is not None:
            update["expires_at"] = expires_at
        self.items[delivery_id] = self.items[delivery_id].model_copy(update=update)
        return True

    def mark_dead_lettered(self, delivery_id: str, at: datetime) -> bool:
        current = self.items[delivery_id]
        if current.status is not DeliveryStatus.DEAD or current.dead_lettered_at is not None:
            return False
        self.items[delivery_id] = current.model_copy(update={"dead_lettered_at": at})
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

    # The failing spell, with the adapter's conditions.

    @staticmethod
    def same_spell(current: Endpoint, read: Endpoint) -> bool:
        return (current.failing_since, current.failure_notice) == (read.failing_since, read.failure_notice)

    def _update(self, endpoint: Endpoint, **changes: object) -> None:
        self.items[(endpoint.tenant_id, endpoint.id)] = endpoint.model_copy(update=changes)

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
        if current is not None and self.same_spell(current, endpoint.model_copy(update={"failure_notice": notice})):
            self._update(current, failure_notice=endpoint.failure_notice)


class FakeEvents:
    def __init__(self, *events: Event) -> None:
        self.items = {e.id: e for e in events}
        self.extensions: list[tuple[str, int]] = []

    def put(self, event: Event) -> None:
        self.items[event.id] = event

    def get(self, event_id: str) -> Event | None:
        return self.items.get(event_id)

    def next_sequence(self, tenant_id: str, ordering_key: str) -> int:
        raise NotImplementedError

    def extend_expiry(self, event_id: str, expires_at: int) -> None:
        self.extensions.append((event_id, expires_at))
        event = self.items[event_id]
        self.items[event_id] = event.model_copy(update={"expires_at": max(event.expires_at, expires_at)})


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

    def send(self, url: str, headers: dict[str, str], body: bytes) -> SendResult:
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

    def report(self, task_token: str, status: DeliveryStatus, ticket: RetryTicket | None) -> bool:
        self.reports.append((task_token, status, ticket))
        return task_token not in self.dead_tokens

    def fail(self, task_token: str, error: str, cause: str) -> None:
        self.failures.append((task_token, error))


@dataclass
class RecordingTelemetry:
    errors: list[tuple[str, str, Exception]] = field(default_factory=list)  # (metric, delivery id, error)

    def bookkeeping_failed(self, metric: str, delivery_id: str, error: Exception) -> None:
        self.errors.append((metric, delivery_id, error))


@dataclass
class RecordingDeadLetters:
    published: list[Delivery] = field(default_factory=list)

    def publish(self, delivery: Delivery) -> None:
        self.published.append(delivery)
