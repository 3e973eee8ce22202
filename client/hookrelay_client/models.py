"""The API's response bodies as typed models; unknown fields are ignored, so a newer server cannot break this client."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class IssuedApiKey(Model):
    key_id: str
    role: str
    token: str = Field(repr=False)  # shown once, at creation; kept out of reprs and logs


class PortalSession(Model):
    """A consumer portal session: its link (`<api>/portal#token=…`) opens the tenant's portal page."""

    session_id: str
    tenant_id: str
    created_at: datetime
    expires_at: datetime
    capabilities: list[str]  # view, recover, manage
    token: str = Field(repr=False)  # shown once, at creation; kept out of reprs and logs
    portal_url: str = Field(repr=False)  # holds the token


class CreatedTenant(Model):
    tenant_id: str
    name: str
    created_at: datetime
    api_key: IssuedApiKey


class IngestWarning(Model):
    """Something about an accepted event worth fixing, e.g. `unknown_event_type` (a typo?), with a suggestion."""

    code: str
    detail: str


class PublishedEvent(Model):
    event_id: str
    delivery_ids: list[str]
    sequence: int | None = None
    warnings: list[IngestWarning] = Field(default_factory=list)


class BatchEventResult(Model):
    """One event's fate in a batch: `status` 202 with its ids, or the RFC 9457 problem that refused it alone."""

    status: int
    event_id: str | None = None
    delivery_ids: list[str] = Field(default_factory=list)
    sequence: int | None = None
    duplicate: bool = False  # its idempotency key had published it before: the same event, nothing new
    type: str | None = None  # the problem's, when refused
    title: str | None = None
    detail: str | None = None
    errors: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def accepted(self) -> bool:
        return self.status == 202


class BatchPublished(Model):
    """The answer to a batch: one result per event, in the order the events were given."""

    accepted: int
    refused: int
    results: list[BatchEventResult]


class SecretLifetime(Model):
    """When an active signing secret was made and when it stops signing (None: until the next rotation).

    `key_type` is `hmac` (a whsec_ secret, v1 signatures) or `ed25519` (v1a signatures, verified with
    `public_key`, a whpk_ key safe to share; the private key never leaves the platform).
    """

    created_at: datetime
    expires_at: datetime | None = None
    key_type: str = "hmac"
    public_key: str | None = None


class EndpointHeader(Model):
    """A custom header sent with every webhook; a secret one is shown by name alone (`value` None)."""

    name: str
    value: str | None = None
    secret: bool = False


class EndpointAuth(Model):
    """How the platform authenticates to the endpoint: its kind (basic, bearer, oauth2_client_credentials) and
    what is not secret; a password, token or client secret is never shown after it is set."""

    kind: str
    set_at: datetime | None = None
    username: str | None = None
    token_url: str | None = None
    client_id: str | None = None
    scope: str | None = None
    audience: str | None = None


class Endpoint(Model):
    id: str
    url: str | None = None  # a webhook's URL, or an AWS destination's ARN; None for a poll endpoint
    kind: str = "http"  # http | sqs | sns | eventbridge | poll
    messages_url: str | None = None  # a poll endpoint's messages (`read_messages`)
    role_arn: str | None = None  # an AWS destination's role, assumed with `external_id`
    external_id: str | None = None  # the external ID the role's trust policy must require
    event_types: list[str]
    filter: dict[str, Any] | None = None  # the content filter, applied after the event types match; None: none
    description: str | None = None
    state: str | None = None  # enabled | disabled | deleted
    max_in_flight: int | None = None
    rate_limit_per_second: int | None = None  # deliveries a second it accepts; None: no limit
    signing_secrets: list[SecretLifetime] = Field(default_factory=list)
    headers: list[EndpointHeader] = Field(default_factory=list)
    auth: EndpointAuth | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    failing_since: datetime | None = None  # the first failed attempt since the last success; None while healthy
    disabled_reason: str | None = None  # set when the platform disabled it ("auto: failing since …")


class IssuedSigningKey(Model):
    """The key a creation or rotation made: an HMAC `secret` (shown only in that response), or an Ed25519
    key's `public_key` (its private key is never shown)."""

    key_type: str = "hmac"
    secret: str | None = Field(default=None, repr=False)  # hmac: returned only in the response that made it
    public_key: str | None = None  # ed25519: the whpk_ key consumers verify v1a signatures with


class CreatedEndpoint(Endpoint, IssuedSigningKey):
    pass


class RotatedSecret(Endpoint, IssuedSigningKey):
    previous_secrets_expire_at: datetime


class HealthSample(Model):
    size: int  # deliveries the figures were computed from
    limit: int
    older_not_sampled: bool


class LastFailure(Model):
    at: datetime
    delivery_id: str
    status_code: int | None = None
    error: str | None = None


class OldestRetrying(Model):
    delivery_id: str
    created_at: datetime
    age_seconds: int
    next_attempt_at: datetime | None = None


class CircuitDrain(Model):
    released: int = 0
    paused_until: datetime | None = None


class Circuit(Model):
    """closed: attempted as they come; open: parked, one probe on the schedule; draining: oldest first."""

    state: str = "closed"
    opened_at: datetime | None = None
    next_probe_at: datetime | None = None
    probes_made: int = 0
    parked: int = 0
    parked_exact: bool = True  # False: at least `parked`; the platform counts up to a limit
    drain: CircuitDrain | None = None


class Backlog(Model):
    """What waits for the endpoint: parked behind its circuit, and (rate-limited) seconds of send slots taken."""

    parked: int = 0
    parked_exact: bool = True  # False: at least `parked`; the platform counts up to a limit
    paced_seconds: float | None = None


class EndpointHealth(Model):
    """Computed on read from the endpoint's newest deliveries (`sample`), not its whole history."""

    endpoint_id: str
    state: str
    computed_at: datetime
    sample: HealthSample
    counts: dict[str, int]
    success_rate: float | None = None  # delivered / (delivered + dead) in the sample
    last_delivered_at: datetime | None = None
    last_failure: LastFailure | None = None
    consecutive_failures: int = 0
    oldest_retrying: OldestRetrying | None = None
    failing_since: datetime | None = None  # from the endpoint record, not the sample
    circuit: Circuit = Field(default_factory=Circuit)
    rate_limit_per_second: int | None = None
    backlog: Backlog = Field(default_factory=lambda: Backlog())


class HourLatency(Model):
    p50: int | None = None
    p95: int | None = None
    p99: int | None = None


class HourStats(Model):
    start: datetime
    delivered: int = 0  # deliveries that ended delivered this hour
    failed_attempts: int = 0  # attempts started this hour that did not deliver
    dead: int = 0  # deliveries that ended dead this hour
    attempts: int = 0
    latency_ms: HourLatency = Field(default_factory=HourLatency)
    wait_ms: HourLatency = Field(default_factory=HourLatency)  # creation to first attempt, first attempts this hour


class EndpointStats(Model):
    """The endpoint's last hours from its deliveries created in them; `partial` when the read's cap was reached."""

    endpoint_id: str
    since: datetime
    until: datetime
    deliveries_read: int
    max_deliveries_read: int
    partial: bool = False
    hours: list[HourStats] = Field(default_factory=list)


class DeliverySummary(Model):
    id: str
    event_id: str
    event_type: str | None = None
    endpoint_id: str
    status: str
    attempt_count: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None
    next_attempt_at: datetime | None = None
    completed_at: datetime | None = None
    replay_of: str | None = None
    last_status_code: int | None = None
    last_error: str | None = None
    parked_at: datetime | None = None  # set while it waits on its endpoint's circuit
    dead_reason: str | None = None  # exhausted, horizon (its endpoint's doing), attempt_lost, poison (the platform's)
    # A dead (or cancelled) delivery whose replay was delivered: that replay (its status stays dead); redrives skip it.
    recovered_by: str | None = None
    recovered_at: datetime | None = None
    trace_id: str | None = None  # the W3C trace id every attempt's `traceparent` carries

    @property
    def shown_status(self) -> str:
        """The status as the log shows it: "dead, recovered by dlv_…" once a replay of it was delivered."""
        return f"{self.status}, recovered by {self.recovered_by}" if self.recovered_by else self.status


class Attempt(Model):
    number: int
    started_at: datetime | None = None
    status_code: int | None = None
    error: str | None = None
    latency_ms: float | None = None
    response_excerpt: str | None = None
    span_id: str | None = None  # the parent id this attempt's `traceparent` sent


class InFlight(Model):
    since: datetime
    back_by: datetime


class WaitingOn(Model):
    circuit: Circuit | None = None  # while parked
    in_flight: InFlight | None = None  # while attempting: the invocation holding its message, and when it is back


class Delivery(DeliverySummary):
    attempts: list[Attempt] = Field(default_factory=list)
    waiting_on: WaitingOn | None = None  # while parked (the circuit) or attempting (the message in flight)


class PolledMessage(Model):
    """A poll endpoint's message: the headers and exact body its webhook would carry (verify them the same way)."""

    seq: int
    delivery_id: str
    event_id: str
    type: str
    headers: dict[str, str]
    body: str


class MessagePage(Model):
    data: list[PolledMessage]
    next_after: int  # pass back as `after` once the page is handled: that acknowledges it


class EndpointPage(Model):
    data: list[Endpoint]
    next_cursor: str | None = None


class DeliveryPage(Model):
    data: list[DeliverySummary]
    next_cursor: str | None = None


class Replay(Model):
    delivery_id: str
    replay_of: str
    event_id: str


class Event(Model):
    id: str
    type: str
    timestamp: datetime | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    ordering_key: str | None = None
    sequence: int | None = None
    body: str | None = None  # the exact bytes that were signed and sent
    trace_id: str | None = None  # its W3C trace id (the producer's, or one the platform started)


class RedriveAccepted(Model):
    redrive_id: str
    count: int | None = None  # counted in the background: see Redrive.total
    status: str


class Redrive(Model):
    id: str
    endpoint_id: str
    since: datetime
    until: datetime
    status_filter: str | list[str] | None = None
    include_recovered: bool = False  # recovered deliveries replayed too, not skipped
    state: str  # running | completed | failed
    total: int | None = None  # None until the redrive's first page has counted
    total_exact: bool = True  # False: at least `total`; the platform counts up to a limit, exact once completed
    replayed: int = 0
    skipped: int = 0  # matched, not replayed: already recovered, or their event expired first
    created_at: datetime | None = None
    completed_at: datetime | None = None

    @property
    def finished(self) -> bool:
        return self.state != "running"


class EndpointTestSent(Model):
    """The test event sent by `POST /v1/endpoints/{id}/test` and its delivery."""

    event_id: str
    delivery_id: str


class EventType(Model):
    """A registered event type: what its events' `data` looks like (`schema`, JSON Schema draft 7) and an example."""

    name: str
    description: str | None = None
    data_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    example: dict[str, Any] | None = None
    deprecated: bool = False
    created_at: datetime | None = None
    updated_at: datetime | None = None


class EventTypePage(Model):
    data: list[EventType]
    next_cursor: str | None = None
