"""The records of the system, shared by the services, the adapters and the API.

Plain dataclasses, not pydantic models: the functions that only move records (delivery, redrive, the sweeper, the
reconciler) then load no validation library. Pydantic and building the models' validators were about a quarter of
their import time (issue 12; bench/cold_start.py). What comes from outside is validated where it enters
(handlers/schemas.py, handlers/publish_schemas.py); what the adapters read back from our own tables and queues
they wrote themselves, converted by the records' types (adapters/records.py).
Records take keyword arguments only: their fields with defaults sit among those without, in an order that reads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from hookrelay.domain import trace_context
from hookrelay.domain.circuit import CircuitState
from hookrelay.domain.classification import FailureKind, Outcome
from hookrelay.domain.custom_headers import CustomHeader
from hookrelay.domain.endpoint_auth import EndpointAuth
from hookrelay.domain.portal import DEFAULT_CAPABILITIES, Capability
from hookrelay.domain.queues import DeliveryLane
from hookrelay.domain.signing import KeyType, key_type_of, public_key
from hookrelay.domain.status import DeadReason, DeliveryStatus
from hookrelay.domain.trace_context import TraceContext

RESPONSE_EXCERPT_BYTES = 1024


@dataclass(kw_only=True)
class Tenant:
    id: str
    name: str
    created_at: datetime


@dataclass(kw_only=True)
class ApiKey:
    key_id: str
    role: str
    secret_hash: str
    created_at: datetime
    description: str | None = None
    revoked_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


@dataclass(kw_only=True)
class PortalSession:
    """A tenant's consumer portal session (domain/portal.py): its token stored hashed, until `expires_at`."""

    id: str
    tenant_id: str
    secret_hash: str
    created_at: datetime
    expires_at: int  # epoch seconds: the table's TTL attribute, and the moment the token stops working
    opened_by: str  # the API key that opened it (audit)
    # What the link may do (domain/portal.py); a session stored before capabilities existed has the default.
    capabilities: list[Capability] = field(default_factory=lambda: list(DEFAULT_CAPABILITIES))


class EndpointState(StrEnum):
    ENABLED = "enabled"
    DISABLED = "disabled"  # new events' deliveries are recorded `cancelled`, not sent; redrivable once enabled
    DELETED = "deleted"  # soft-deleted: kept so its deliveries stay explainable, never delivered to again


class FailureNotice(StrEnum):
    """The notices sent about one failing spell of an endpoint, in the order they come."""

    FAILING_1D = "failing_1d"
    FAILING_3D = "failing_3d"
    DISABLED = "disabled"


@dataclass(kw_only=True)
class SigningSecret:
    secret: str  # a whsec_ HMAC secret or a whsk_ Ed25519 private key: the prefix says which (domain/signing.py)
    created_at: datetime
    expires_at: datetime | None = None  # set on the old secret when it is rotated out

    def active(self, now: datetime) -> bool:
        return self.expires_at is None or self.expires_at > now

    @property
    def key_type(self) -> KeyType:
        return key_type_of(self.secret)

    @property
    def public_key(self) -> str | None:
        """The whpk_ key that verifies this key's signatures (Ed25519 only): safe to show, unlike `secret`."""
        return public_key(self.secret)


@dataclass(kw_only=True)
class Endpoint:
    id: str
    tenant_id: str
    url: str  # an https:// URL, or an AWS destination's ARN (domain/destinations.py)
    event_types: list[str]
    # Its content filter (domain/content_filter.py), checked when written and stored as compact JSON text (not a
    # DynamoDB map: numbers stay JSON numbers, and fan-out compiles a text once per process); None: no filter.
    content_filter: str | None = None
    description: str | None = None
    # The role in the consumer's account assumed to send to an AWS destination (domain/destinations.py); None: a
    # webhook.
    role_arn: str | None = None
    state: EndpointState = EndpointState.ENABLED
    secrets: list[SigningSecret]
    max_in_flight: int = 1  # the endpoint's concurrency: the number of FIFO message groups it gets
    # Sent with every attempt (domain/custom_headers.py, domain/endpoint_auth.py): the values of secret headers and
    # the credentials are never shown after they are set, nor logged.
    headers: list[CustomHeader] = field(default_factory=list)
    auth: EndpointAuth | None = None
    # Deliveries a second the tenant allows (domain/pacing.py); None: no limit, and no pacing cost at all.
    rate_limit_per_second: int | None = None
    created_at: datetime
    updated_at: datetime
    # The first failed attempt since the last successful one; None while healthy. Written by the delivery
    # path on those two transitions only, and cleared when the endpoint is enabled.
    failing_since: datetime | None = None
    failure_notice: FailureNotice | None = None  # the latest notice sent about this failing spell
    disabled_reason: str | None = None  # set when the platform disabled it, not the tenant
    # The circuit (domain/circuit.py), written only by the delivery path and the sweeper, each change a
    # conditional update; the endpoint service's writes never touch these (DELIVERY_PATH_FIELDS).
    circuit: CircuitState = CircuitState.CLOSED
    circuit_failures: int = 0  # retriable failures in a row while closed
    # The deliveries those failures were of: when the circuit opens they are parked too (each waits in its own
    # retry workflow until then), so the oldest events are the first out again.
    circuit_failed: list[str] = field(default_factory=list)
    circuit_opened_at: datetime | None = None  # when the circuit last opened (or reopened)
    circuit_step: int = 0  # which probe workflow owns the circuit: bumped when one is started
    probes_made: int = 0  # probes since the circuit last opened
    next_probe_at: datetime | None = None  # when the probe workflow's next command is due
    # Set while the drain closes the circuit: a delivery parked meanwhile clears it, and the close fails
    # (services/parking.py says why this is enough for nothing to be left behind in the lot).
    circuit_closing: bool = False
    drain_paused_until: datetime | None = None  # a Retry-After answered during the drain
    drained_count: int = 0  # deliveries released by the current drain
    # Its delivery queues' shard (domain/queues.py), chosen once when it is created and never changed, so its
    # messages stay on one queue whatever the deployment's shards become; 0 for endpoints stored before shards.
    queue_shard: int = 0
    # Its delivery lane (domain/lanes.py), written by the delivery path only, on a lane's switch; and the marks
    # (`lanes.tail_mark`) of the message groups that may have a message waiting in the slow lane: a group's mark is
    # added by its first forward and taken off once its tail is found settled, so a busy slow endpoint's item is
    # written about twice per group and slow spell, not around every forward (the tails are items of their own).
    lane: DeliveryLane = DeliveryLane.FAST
    tail_marks: frozenset[str] = frozenset()
    # Per message group, the last message forwarded and not yet settled, as endpoints kept it before the tails had a
    # table of their own: read and cleared, never written any more.
    slow_tails: dict[str, str] = field(default_factory=dict)

    def active_secrets(self, now: datetime) -> list[str]:
        return [s.secret for s in self.secrets if s.active(now)]


# The endpoint's attributes that the delivery path owns (its circuit and its lane); the endpoint service's
# read-change-write leaves them be.
DELIVERY_PATH_FIELDS = frozenset(
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
        "lane",
        "tail_marks",
        "slow_tails",
    }
)


@dataclass(kw_only=True)
class Event:
    id: str
    tenant_id: str
    type: str
    timestamp: datetime
    ordering_key: str | None = None
    sequence: int | None = None
    body: str  # the envelope exactly as signed and sent, on every attempt, replay and redrive
    expires_at: int  # epoch seconds, DynamoDB TTL
    # Its W3C trace context (domain/trace_context.py): the producer's, or one the platform started sampled; as the
    # headers give it (55 characters, and the tracestate only when there is one). None: a trace the platform started
    # unsampled, derived from the event's id (or an event stored before traces were kept, which gets one so too).
    traceparent: str | None = None
    tracestate: str | None = None

    @property
    def trace(self) -> TraceContext:
        return trace_context.parse(self.traceparent, self.tracestate) or trace_context.derived(self.id)

    @property
    def data(self) -> dict[str, Any]:
        """The payload, read from the body: stored once, as the exact text signed (and never as a DynamoDB
        map, whose nesting, number range and doubled size would refuse what the API accepts)."""
        data: dict[str, Any] = json.loads(self.body)["data"]
        return data


@dataclass(kw_only=True)
class Attempt:
    number: int
    started_at: datetime
    latency_ms: int
    status_code: int | None = None
    error: FailureKind | None = None
    error_detail: str | None = None
    response_excerpt: str | None = None
    outcome: Outcome
    retry_after: float | None = None
    # The parent id its `traceparent` header sent, as recorded before span ids were derived (`Delivery.span_of`).
    span_id: str | None = None


@dataclass(kw_only=True)
class Delivery:
    id: str
    tenant_id: str
    endpoint_id: str
    event_id: str
    event_type: str
    status: DeliveryStatus = DeliveryStatus.QUEUED
    message_group_id: str
    attempts: list[Attempt] = field(default_factory=list)
    attempt_count: int = 0
    created_at: datetime
    updated_at: datetime
    first_attempt_at: datetime | None = None
    next_attempt_at: datetime | None = None
    completed_at: datetime | None = None
    replay_of: str | None = None
    claimed_at: datetime | None = None
    expires_at: int | None = None  # set when the delivery ends: end + the redrive window
    dead_lettered_at: datetime | None = None  # when its death was recorded and counted (dead deliveries only)
    dead_reason: DeadReason | None = None  # why it died (dead deliveries only)
    # Where the delivery stands among its endpoint's deliveries when they are parked: domain.circuit.park_order.
    event_order: str | None = None
    parked_at: datetime | None = None  # set while the delivery waits on its endpoint's circuit
    # A dead (or cancelled) delivery whose replay was delivered: that replay, and when it was found delivered. The
    # status stays `dead` (the record of what happened to this delivery); redrives skip it unless asked not to
    # (domain.redrive.recovers, services/redrive.py).
    recovered_by: str | None = None
    recovered_at: datetime | None = None
    # Its endpoint's queue shard, copied when the delivery is made (an endpoint's never changes): what its messages
    # are routed by wherever only the delivery is at hand (the reconciler, retry tickets). 0 before shards.
    queue_shard: int = 0
    # A poll endpoint's delivery: when it was posted to the endpoint's mailbox, and where (domain/mailbox.py).
    posted_at: datetime | None = None
    mailbox_seq: int | None = None
    # Its event's W3C trace id, which every attempt's `traceparent` carries, stored when the event's trace is
    # (`event_trace_id` has it either way).
    trace_id: str | None = None

    @property
    def event_trace_id(self) -> str:
        return self.trace_id or trace_context.derived(self.event_id).trace_id

    def span_of(self, attempt: Attempt) -> str:
        """The span id an attempt of this delivery sent: recorded by older records, derived since."""
        return attempt.span_id or trace_context.attempt_span_id(self.id, attempt.number)
