"""The ports the services are written against; `hookrelay.adapters` implements them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from hookrelay.domain.classification import FailureKind
from hookrelay.domain.models import ApiKey, Attempt, Delivery, Endpoint, Event, Tenant
from hookrelay.domain.status import DeliveryStatus


class TenantRepository(Protocol):
    def put(self, tenant: Tenant) -> None: ...
    def get(self, tenant_id: str) -> Tenant | None: ...


class ApiKeyRepository(Protocol):
    def put(self, key: ApiKey) -> None: ...
    def get(self, key_id: str) -> ApiKey | None: ...
    def revoke(self, key_id: str, at: datetime) -> bool: ...


class EndpointRepository(Protocol):
    def put(self, endpoint: Endpoint) -> None: ...
    def get(self, tenant_id: str, endpoint_id: str) -> Endpoint | None: ...
    def list_for_tenant(self, tenant_id: str) -> list[Endpoint]: ...


class EventRepository(Protocol):
    def put(self, event: Event) -> None: ...
    def get(self, event_id: str) -> Event | None: ...
    def next_sequence(self, tenant_id: str, ordering_key: str) -> int: ...
    def extend_expiry(self, event_id: str, expires_at: int) -> None: ...


@dataclass(frozen=True)
class AttemptRecord:
    """What the delivery path writes after an attempt, conditional on still holding the claim."""

    attempt: Attempt
    status: DeliveryStatus
    next_attempt_at: datetime | None
    completed_at: datetime | None
    expires_at: int | None


class DeliveryRepository(Protocol):
    def put_many(self, deliveries: Sequence[Delivery]) -> None: ...
    def get(self, delivery_id: str) -> Delivery | None: ...

    def claim(
        self, delivery_id: str, tenant_id: str, attempt_number: int, now: datetime, stale_before: datetime
    ) -> Delivery | None:
        """Mark the delivery `attempting` for this attempt number; None if another holds or made it."""

    def record_attempt(self, delivery_id: str, tenant_id: str, attempt_number: int, record: AttemptRecord) -> bool:
        """Append the attempt and move the status on; False if the claim was lost."""

    def set_status(
        self, delivery_id: str, tenant_id: str, status: DeliveryStatus, now: datetime, expires_at: int | None
    ) -> None: ...


@dataclass(frozen=True)
class DeliveryMessage:
    delivery_id: str
    tenant_id: str
    attempt: int
    group_id: str
    deduplication_id: str
    task_token: str | None = None


class DeliveryQueue(Protocol):
    def enqueue(self, messages: Sequence[DeliveryMessage]) -> None: ...


class DeadLetters(Protocol):
    def publish(self, delivery: Delivery) -> None: ...


@dataclass(frozen=True)
class SendResult:
    status_code: int | None
    latency_ms: int
    error: FailureKind | None = None
    error_detail: str | None = None
    response_excerpt: str | None = None
    retry_after: str | None = None


class WebhookSender(Protocol):
    def send(self, url: str, headers: dict[str, str], body: bytes) -> SendResult: ...


@dataclass(frozen=True)
class RetryTicket:
    """What the retry workflow needs to schedule the next attempt."""

    delivery_id: str
    tenant_id: str
    group_id: str
    attempt: int  # the number of the next attempt
    next_attempt_at: datetime


class RetryWorkflow(Protocol):
    def start(self, ticket: RetryTicket) -> None:
        """Start the retry execution for a delivery (idempotent per delivery)."""

    def report(self, task_token: str, status: DeliveryStatus, ticket: RetryTicket | None) -> None:
        """Tell a waiting execution how the attempt it asked for ended."""

    def fail(self, task_token: str, error: str, cause: str) -> None:
        """Tell a waiting execution its attempt cannot be made at all (the delivery is gone)."""
