"""The records of the system, shared by the services, the adapters and the API."""

from __future__ import annotations

import json
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer

from hookrelay.domain.circuit import CircuitState
from hookrelay.domain.classification import FailureKind, Outcome
from hookrelay.domain.clock import to_rfc3339
from hookrelay.domain.signing import KeyType, key_type_of, public_key
from hookrelay.domain.status import DeadReason, DeliveryStatus

RESPONSE_EXCERPT_BYTES = 1024


# Every stored time is RFC 3339 UTC at fixed millisecond width, so stored strings sort as the times do
# (the indexes sort on them) and compare with the values conditions are written with.
UtcDateTime = Annotated[datetime, PlainSerializer(to_rfc3339, return_type=str, when_used="json")]


class Record(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=False)


class Tenant(Record):
    id: str
    name: str
    created_at: UtcDateTime


class ApiKey(Record):
    key_id: str
    role: str
    secret_hash: str
    created_at: UtcDateTime
    description: str | None = None
    revoked_at: UtcDateTime | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


class PortalSession(Record):
    """A tenant's consumer portal session (domain/portal.py): its token stored hashed, until `expires_at`."""

    id: str
    tenant_id: str
    secret_hash: str
    created_at: UtcDateTime
    expires_at: int  # epoch seconds: the table's TTL attribute, and the moment the token stops working
    opened_by: str  # the API key that opened it (audit)


class EndpointState(StrEnum):
    ENABLED = "enabled"
    DISABLED = "disabled"  # new events' deliveries are recorded `cancelled`, not sent; redrivable once enabled
    DELETED = "deleted"  # soft-deleted: kept so its deliveries stay explainable, never delivered to again


class FailureNotice(StrEnum):
    """The notices sent about one failing spell of an endpoint, in the order they come."""

    FAILING_1D = "failing_1d"
    FAILING_3D = "failing_3d"
    DISABLED = "disabled"


class SigningSecret(Record):
    secret: str  # a whsec_ HMAC secret or a whsk_ Ed25519 private key: the prefix says which (domain/signing.py)
    created_at: UtcDateTime
    expires_at: UtcDateTime | None = None  # set on the old secret when it is rotated out

    def active(self, now: datetime) -> bool:
        return self.expires_at is None or self.expires_at > now

    @property
    def key_type(self) -> KeyType:
        return key_type_of(self.secret)

    @property
    def public_key(self) -> str | None:
        """The whpk_ key that verifies this key's signatures (Ed25519 only): safe to show, unlike `secret`."""
        return public_key(self.secret)


class Endpoint(Record):
    id: str
    tenant_id: str
    url: str
    event_types: list[str]
    description: str | None = None
    state: EndpointState = EndpointState.ENABLED
    secrets: list[SigningSecret]
    max_in_flight: int = 1  # the endpoint's concurrency: the number of FIFO message groups it gets
    created_at: UtcDateTime
    updated_at: UtcDateTime
    # The first failed attempt since the last successful one; None while healthy. Written by the delivery
    # path on those two transitions only, and cleared when the endpoint is enabled.
    failing_since: UtcDateTime | None = None
    failure_notice: FailureNotice | None = None  # the latest notice sent about this failing spell
    disabled_reason: str | None = None  # set when the platform disabled it, not the tenant
    # The circuit (domain/circuit.py), written only by the delivery path and the sweeper, each change a
    # conditional update; the endpoint service's writes never touch these (CIRCUIT_FIELDS).
    circuit: CircuitState = CircuitState.CLOSED
    circuit_failures: int = 0  # retriable failures in a row while closed
    # The deliveries those failures were of: when the circuit opens they are parked too (each waits in its own
    # retry workflow until then), so the oldest events are the first out again.
    circuit_failed: list[str] = Field(default_factory=list)
    circuit_opened_at: UtcDateTime | None = None  # when the circuit last opened (or reopened)
    circuit_step: int = 0  # which probe workflow owns the circuit: bumped when one is started
    probes_made: int = 0  # probes since the circuit last opened
    next_probe_at: UtcDateTime | None = None  # when the probe workflow's next command is due
    # Set while the drain closes the circuit: a delivery parked meanwhile clears it, and the close fails
    # (services/parking.py says why this is enough for nothing to be left behind in the lot).
    circuit_closing: bool = False
    drain_paused_until: UtcDateTime | None = None  # a Retry-After answered during the drain
    drained_count: int = 0  # deliveries released by the current drain

    def active_secrets(self, now: datetime) -> list[str]:
        return [s.secret for s in self.secrets if s.active(now)]


# The endpoint's attributes that the delivery path owns; the endpoint service's read-change-write leaves them be.
CIRCUIT_FIELDS = frozenset(
    {
        "circuit",
        "circuit_failures",
        "circuit_failed",
        "circuit_opened_at",
        "circuit_step",
        "probes_made",
        "next_probe_at",
        "circuit_closing",
        "drain_paused_until",
        "drained_count",
    }
)


class Event(Record):
    id: str
    tenant_id: str
    type: str
    timestamp: UtcDateTime
    ordering_key: str | None = None
    sequence: int | None = None
    body: str  # the envelope exactly as signed and sent, on every attempt, replay and redrive
    expires_at: int  # epoch seconds, DynamoDB TTL

    @property
    def data(self) -> dict[str, Any]:
        """The payload, read from the body: stored once, as the exact text signed (and never as a DynamoDB
        map, whose nesting, number range and doubled size would refuse what the API accepts)."""
        data: dict[str, Any] = json.loads(self.body)["data"]
        return data


class Attempt(Record):
    number: int
    started_at: UtcDateTime
    latency_ms: int
    status_code: int | None = None
    error: FailureKind | None = None
    error_detail: str | None = None
    response_excerpt: str | None = None
    outcome: Outcome
    retry_after: float | None = None


class Delivery(Record):
    id: str
    tenant_id: str
    endpoint_id: str
    event_id: str
    event_type: str
    status: DeliveryStatus = DeliveryStatus.QUEUED
    message_group_id: str
    attempts: list[Attempt] = Field(default_factory=list)
    attempt_count: int = 0
    created_at: UtcDateTime
    updated_at: UtcDateTime
    first_attempt_at: UtcDateTime | None = None
    next_attempt_at: UtcDateTime | None = None
    completed_at: UtcDateTime | None = None
    replay_of: str | None = None
    claimed_at: UtcDateTime | None = None
    expires_at: int | None = None  # set when the delivery ends: end + the redrive window
    dead_lettered_at: UtcDateTime | None = None  # when its death was recorded and counted (dead deliveries only)
    dead_reason: DeadReason | None = None  # why it died (dead deliveries only)
    # Where the delivery stands among its endpoint's deliveries when they are parked: domain.circuit.park_order.
    event_order: str | None = None
    parked_at: UtcDateTime | None = None  # set while the delivery waits on its endpoint's circuit
