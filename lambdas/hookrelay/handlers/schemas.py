"""Request and response bodies of the API (validated with pydantic)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, Field, model_validator

from hookrelay.domain import custom_headers, delivery_stats, endpoint_auth, mailbox, portal
from hookrelay.domain.circuit import CircuitState
from hookrelay.domain.clock import to_rfc3339, utcnow, within_range
from hookrelay.domain.destinations import POLL_URL, DestinationKind, external_id, kind_of
from hookrelay.domain.event_types import MAX_DESCRIPTION, EventType
from hookrelay.domain.health import HEALTH_SAMPLE_SIZE, EndpointHealth, RecordedAttempt, RetryingDelivery
from hookrelay.domain.lanes import MAX_IN_FLIGHT
from hookrelay.domain.limits import MAX_RATE_LIMIT_PER_SECOND, MIN_RATE_LIMIT_PER_SECOND
from hookrelay.domain.matching import MAX_FILTERS, filter_problem
from hookrelay.domain.models import Attempt, Delivery, Endpoint, Event, PortalSession
from hookrelay.domain.paging import BoundedCount
from hookrelay.domain.redrive import Redrive
from hookrelay.domain.signing import KeyType, key_type_of, public_key
from hookrelay.domain.status import DeliveryStatus
from hookrelay.handlers.publish_schemas import Strict  # the publish bodies live apart: ingest loads only them
from hookrelay.services.delivery_log import DEFAULT_LIMIT, MAX_LIMIT, InFlight
from hookrelay.services.endpoints import DEFAULT_PAGE_LIMIT as ENDPOINTS_DEFAULT_LIMIT
from hookrelay.services.endpoints import DEFAULT_SECRET_OVERLAP, MAX_SECRET_OVERLAP, RotatedSecret
from hookrelay.services.endpoints import MAX_PAGE_LIMIT as ENDPOINTS_MAX_LIMIT
from hookrelay.services.event_types import DEFAULT_LIMIT as EVENT_TYPES_DEFAULT_LIMIT
from hookrelay.services.event_types import MAX_LIMIT as EVENT_TYPES_MAX_LIMIT
from hookrelay.services.mailbox import MailboxPage
from hookrelay.services.ports import DeliveryFilter


class CreateTenant(Strict):
    name: str = Field(min_length=1, max_length=200)


class CreateApiKey(Strict):
    role: str = Field(min_length=1, max_length=64)
    description: str | None = Field(default=None, max_length=500)


def _event_type_filters(value: list[str]) -> list[str]:
    for pattern in value:
        problem = filter_problem(pattern)
        if problem:
            raise ValueError(problem)
    return value


# The fields an endpoint is created with and may later be changed to: one definition for both requests.
EndpointUrl = Annotated[str, Field(min_length=1, max_length=2048)]
EventTypeFilters = Annotated[
    list[str], Field(min_length=1, max_length=MAX_FILTERS), AfterValidator(_event_type_filters)
]
Description = Annotated[str | None, Field(max_length=500)]
ContentFilterBody = dict[str, Any] | None
MaxInFlight = Annotated[int, Field(ge=1, le=MAX_IN_FLIGHT)]
RoleArn = Annotated[str, Field(min_length=1, max_length=2048)]  # an AWS destination's (domain/destinations.py)


class HeaderSpec(Strict):
    """A custom header. Only its shape is checked here: domain/custom_headers.py holds the rules on names, values and
    their number and sizes, and refuses with the JSON pointer of each fault (the body's size bounds what is parsed).
    A secret one may leave `value` out on an update to keep the value stored under its name."""

    name: str
    value: str | None = None
    secret: bool = False

    def given(self) -> custom_headers.GivenHeader:
        return custom_headers.GivenHeader(self.name, self.value, self.secret)


class AuthSpec(Strict):
    """How the platform authenticates to the endpoint. Only its shape is checked here: which fields each kind takes,
    and their syntax and sizes, are domain/endpoint_auth.py's, refused with the JSON pointer of each fault. On an
    update, a secret field left out keeps the stored one when the kind stays the same."""

    kind: endpoint_auth.AuthKind
    username: str | None = None
    password: str | None = None
    token: str | None = None
    token_url: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    scope: str | None = None
    audience: str | None = None

    def fields(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


Headers = list[HeaderSpec]
# Deliveries a second (domain/pacing.py); the service checks it against max_in_flight too (422 at the same pointer).
RateLimit = Annotated[int, Field(ge=MIN_RATE_LIMIT_PER_SECOND, le=MAX_RATE_LIMIT_PER_SECOND)]


class CreateEndpoint(Strict):
    url: EndpointUrl | None = None  # required, unless kind is poll
    # `poll`: pull delivery, no url (domain/mailbox.py); left out: what the url is (a webhook or an AWS destination).
    kind: Literal["poll"] | None = None
    event_types: EventTypeFilters = Field(default_factory=lambda: ["*"])
    description: Description = None
    max_in_flight: MaxInFlight | None = None
    rate_limit_per_second: RateLimit | None = None  # None: no limit
    key_type: KeyType = KeyType.HMAC  # ed25519: v1a signatures, verified with the public key alone
    role_arn: RoleArn | None = None
    # The content filter (domain/content_filter.py): checked by the endpoint service, whose 422 names the pointer of
    # the fault inside it. Named `filter` in the API; the model's field may not shadow the builtin.
    content_filter: ContentFilterBody = Field(default=None, alias="filter")
    headers: Headers = Field(default_factory=list)
    auth: AuthSpec | None = None

    @model_validator(mode="after")
    def _url_unless_poll(self) -> CreateEndpoint:
        if self.kind == "poll" and self.url is not None:
            raise ValueError("a poll endpoint has no url: its consumer reads GET /v1/endpoints/{id}/messages")
        if self.kind is None and self.url is None:
            raise ValueError("url is required (or kind: poll, for pull delivery)")
        return self

    def settings(self) -> dict[str, Any]:
        """The keyword arguments for `EndpointService.create`: a poll endpoint's url is domain/destinations.py's
        POLL_URL."""
        return {
            "url": POLL_URL if self.url is None else self.url,
            "event_types": self.event_types,
            "description": self.description,
            "max_in_flight": self.max_in_flight,
            "key_type": self.key_type,
            "role_arn": self.role_arn,
            "content_filter": self.content_filter,
            "headers": [h.given() for h in self.headers],
            "auth": self.auth.fields() if self.auth else None,
            "rate_limit_per_second": self.rate_limit_per_second,
        }


class UpdateEndpoint(Strict):
    """A partial update: only the fields given change; `description: null` clears the description, `auth: null`
    removes the endpoint's auth and `rate_limit_per_second: null` the rate limit; `headers` replaces the list (`[]`
    removes them all)."""

    url: EndpointUrl | None = None
    event_types: EventTypeFilters | None = None
    description: Description = None
    max_in_flight: MaxInFlight | None = None
    role_arn: RoleArn | None = None  # null clears it (an endpoint moved back to a webhook URL)
    content_filter: ContentFilterBody = Field(default=None, alias="filter")  # null clears it
    headers: Headers | None = None
    auth: AuthSpec | None = None
    rate_limit_per_second: RateLimit | None = None  # null clears it

    @model_validator(mode="after")
    def _only_description_and_auth_are_nullable(self) -> UpdateEndpoint:
        for name in ("url", "event_types", "max_in_flight", "headers"):
            if name in self.model_fields_set and getattr(self, name) is None:
                raise ValueError(f"{name} cannot be null: leave it out to keep it")
        return self

    def changes(self) -> dict[str, Any]:
        """Exactly the fields the request gave, as keyword arguments for `EndpointService.update`."""
        changes = {name: getattr(self, name) for name in self.model_fields_set}
        if self.headers is not None:
            changes["headers"] = [h.given() for h in self.headers]
        if self.auth is not None:
            changes["auth"] = self.auth.fields()
        return changes


class CreatePortalSession(Strict):
    """A tenant key opens a session for its own tenant (tenant_id may be left out); an admin names the tenant."""

    tenant_id: str | None = Field(default=None, min_length=1, max_length=64)
    ttl_seconds: int = Field(
        default=int(portal.DEFAULT_LIFETIME.total_seconds()),
        ge=int(portal.MIN_LIFETIME.total_seconds()),
        le=int(portal.MAX_LIFETIME.total_seconds()),
    )
    # What the link may do (domain/portal.py); left out: view and recover. `view` is always included.
    capabilities: list[portal.Capability] | None = Field(default=None, min_length=1, max_length=len(portal.Capability))


def portal_session_view(session: PortalSession, token: str, api_url: str) -> dict[str, Any]:
    """The new session, with its token and link: shown once, in the response that created them."""
    return {
        "session_id": session.id,
        "tenant_id": session.tenant_id,
        "created_at": _time(session.created_at),
        "expires_at": _time(datetime.fromtimestamp(session.expires_at, UTC)),
        "capabilities": [c.value for c in session.capabilities],
        "token": token,
        "portal_url": portal.portal_link(api_url, token),
    }


class RotateSecret(Strict):
    expire_previous_after_seconds: int = Field(
        default=int(DEFAULT_SECRET_OVERLAP.total_seconds()), ge=0, le=int(MAX_SECRET_OVERLAP.total_seconds())
    )
    key_type: KeyType | None = None  # None: the type of the endpoint's newest key


def _time(moment: datetime | None) -> str | None:
    return to_rfc3339(moment) if moment else None


def endpoint_view(endpoint: Endpoint, *, with_secret: bool = False) -> dict[str, Any]:
    now = utcnow()
    view: dict[str, Any] = {
        "id": endpoint.id,
        "url": endpoint.url,
        "kind": kind_of(endpoint.url).value,
        "event_types": endpoint.event_types,
        "filter": json.loads(endpoint.content_filter) if endpoint.content_filter else None,
        "description": endpoint.description,
        "state": endpoint.state.value,
        "max_in_flight": endpoint.max_in_flight,
        "rate_limit_per_second": endpoint.rate_limit_per_second,
        # When each active secret was made, when it stops signing, its type and (Ed25519) its public key:
        # never the secrets or private keys themselves.
        "signing_secrets": [
            {
                "created_at": _time(s.created_at),
                "expires_at": _time(s.expires_at),
                "key_type": s.key_type.value,
                "public_key": s.public_key,
            }
            for s in endpoint.secrets
            if s.active(now)
        ],
        # Custom headers and auth: a secret header by name alone, the auth by its kind and what is not secret.
        "headers": [custom_headers.masked(h) for h in endpoint.headers],
        "auth": _auth_view(endpoint.auth),
        "created_at": _time(endpoint.created_at),
        "updated_at": _time(endpoint.updated_at),
        "failing_since": _time(endpoint.failing_since),
        "disabled_reason": endpoint.disabled_reason,
    }
    if view["kind"] == DestinationKind.POLL:  # nothing is sent: the consumer reads its messages here
        view |= {"url": None, "messages_url": f"/v1/endpoints/{endpoint.id}/messages"}
    if endpoint.role_arn is not None:  # an AWS destination: the role, and the external ID its trust must require
        view |= {"role_arn": endpoint.role_arn, "external_id": external_id(endpoint.tenant_id)}
    if with_secret:  # only in the response that created the secret
        view |= issued_key_view(endpoint.secrets[-1].secret)
    return view


def _auth_view(auth: endpoint_auth.EndpointAuth | None) -> dict[str, Any] | None:
    return None if auth is None else endpoint_auth.masked(auth) | {"set_at": _time(auth.set_at)}


def issued_key_view(secret: str) -> dict[str, Any]:
    """What the response that made a key shows of it: an HMAC secret (this once), or an Ed25519 key's public
    half (its private key is never shown: only the platform signs with it)."""
    key_type = key_type_of(secret)
    if key_type is KeyType.HMAC:
        return {"key_type": key_type.value, "secret": secret}
    return {"key_type": key_type.value, "public_key": public_key(secret)}


def rotated_secret_view(rotated: RotatedSecret) -> dict[str, Any]:
    return (
        endpoint_view(rotated.endpoint)
        | issued_key_view(rotated.secret)
        | {"previous_secrets_expire_at": _time(rotated.previous_expire_at)}
    )


def endpoint_health_view(
    endpoint: Endpoint, health: EndpointHealth, parked: BoundedCount, paced_seconds: float | None = None
) -> dict[str, Any]:
    return {
        "endpoint_id": endpoint.id,
        "state": endpoint.state.value,
        "computed_at": _time(health.computed_at),
        "sample": {"size": health.sampled, "limit": HEALTH_SAMPLE_SIZE, "older_not_sampled": health.older_not_sampled},
        "counts": {status.value: count for status, count in health.counts.items()},
        "success_rate": health.success_rate,
        "last_delivered_at": _time(health.last_delivered_at),
        "last_failure": _failure_view(health.last_failure),
        "consecutive_failures": health.consecutive_failures,
        "oldest_retrying": _retrying_view(health.oldest_retrying),
        "failing_since": _time(health.failing_since),
        "circuit": circuit_view(endpoint, parked),
        "lane": endpoint.lane.value,
        "rate_limit_per_second": endpoint.rate_limit_per_second,
        # What waits for the endpoint that the platform can count cheaply: deliveries parked behind its circuit, and
        # (with a rate limit) how many seconds of send slots are taken ahead. Messages in the delivery queues are
        # counted per queue, not per endpoint: not shown.
        "backlog": {
            **parked_view(parked),
            "paced_seconds": None if paced_seconds is None else round(paced_seconds, 3),
        },
    }


def parked_view(parked: BoundedCount) -> dict[str, Any]:
    """Counted up to PARKED_COUNT_LIMIT (domain/circuit.py): past it, `parked_exact` is false and `parked` a floor."""
    return {"parked": parked.counted, "parked_exact": parked.exact}


def circuit_view(endpoint: Endpoint, parked: BoundedCount) -> dict[str, Any]:
    """The endpoint's circuit (domain/circuit.py) from its record: what the probe and the drain are doing."""
    open_ = endpoint.circuit is CircuitState.OPEN
    return {
        "state": endpoint.circuit.value,
        "opened_at": _time(endpoint.circuit_opened_at) if endpoint.circuit is not CircuitState.CLOSED else None,
        "next_probe_at": _time(endpoint.next_probe_at) if open_ else None,
        "probes_made": endpoint.probes_made if open_ else 0,
        **parked_view(parked),
        "drain": {
            "released": endpoint.drained_count,
            "paused_until": _time(endpoint.drain_paused_until),
        }
        if endpoint.circuit is CircuitState.DRAINING
        else None,
    }


def _failure_view(failure: RecordedAttempt | None) -> dict[str, Any] | None:
    if failure is None:
        return None
    return {
        "at": _time(failure.attempt.started_at),
        "delivery_id": failure.delivery_id,
        "status_code": failure.attempt.status_code,
        "error": _error(failure.attempt),
    }


def _retrying_view(retrying: RetryingDelivery | None) -> dict[str, Any] | None:
    if retrying is None:
        return None
    return {
        "delivery_id": retrying.delivery_id,
        "created_at": _time(retrying.created_at),
        "age_seconds": retrying.age_seconds,
        "next_attempt_at": _time(retrying.next_attempt_at),
    }


# --- The delivery log, replay and redrive ---

# A time bound of a query, in UTC and within the range anything is stored in (an extreme date is no 500).
QueryTime = Annotated[AwareDatetime, AfterValidator(within_range)]


class DeliveryListQuery(Strict):
    status: DeliveryStatus | None = None
    endpoint_id: str | None = Field(default=None, min_length=1, max_length=64)
    event_id: str | None = Field(default=None, min_length=1, max_length=64)
    since: QueryTime | None = None
    until: QueryTime | None = None
    # false: only deliveries not recovered (with `status=dead`, the dead still undelivered); true: only recovered
    recovered: bool | None = None
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT)
    cursor: str | None = Field(default=None, min_length=1, max_length=2048)

    def where(self, tenant_id: str) -> DeliveryFilter:
        return DeliveryFilter(
            tenant_id=tenant_id,
            status=self.status,
            endpoint_id=self.endpoint_id,
            event_id=self.event_id,
            since=self.since,
            until=self.until,
            recovered=self.recovered,
        )


class RedriveRequest(Strict):
    since: QueryTime
    until: QueryTime | None = None  # now, when omitted
    status: Literal[DeliveryStatus.DEAD, DeliveryStatus.CANCELLED] = DeliveryStatus.DEAD
    # Also replay deliveries already recovered (a replay of them delivered); by default they are skipped.
    include_recovered: bool = False


class StartRedrive(RedriveRequest):
    """A redrive request with whose endpoint it is: what an `Idempotency-Key` is checked against."""

    tenant_id: str
    endpoint_id: str


class RedriveStarted(BaseModel):
    """The answer to a redrive request (and, under the same `Idempotency-Key`, to its repeats)."""

    redrive_id: str
    count: int | None  # None: counted in the background (GET /v1/redrives/{id} shows `total` once known)
    status: str


def delivery_summary(delivery: Delivery) -> dict[str, Any]:
    last = delivery.attempts[-1] if delivery.attempts else None
    return {
        "id": delivery.id,
        "event_id": delivery.event_id,
        "event_type": delivery.event_type,
        "endpoint_id": delivery.endpoint_id,
        "status": delivery.status.value,
        "attempt_count": delivery.attempt_count,
        "created_at": _time(delivery.created_at),
        "updated_at": _time(delivery.updated_at),
        "next_attempt_at": _time(delivery.next_attempt_at),
        "completed_at": _time(delivery.completed_at),
        "replay_of": delivery.replay_of,
        "last_status_code": last.status_code if last else None,
        "last_error": _error(last) if last else None,
        "parked_at": _time(delivery.parked_at),
        "dead_reason": delivery.dead_reason.value if delivery.dead_reason else None,
        "recovered_by": delivery.recovered_by,
        "recovered_at": _time(delivery.recovered_at),
        "trace_id": delivery.event_trace_id,
    }


def _error(attempt: Attempt) -> str | None:
    if attempt.error is None:
        return None
    return f"{attempt.error.value}: {attempt.error_detail}" if attempt.error_detail else attempt.error.value


def delivery_detail(
    delivery: Delivery, *, waiting_on: tuple[Endpoint, BoundedCount] | None = None, in_flight: InFlight | None = None
) -> dict[str, Any]:
    attempts = [
        {
            "number": attempt.number,
            "started_at": _time(attempt.started_at),
            "status_code": attempt.status_code,
            "error": _error(attempt),
            "latency_ms": attempt.latency_ms,
            "response_excerpt": attempt.response_excerpt,
            "span_id": delivery.span_of(attempt),
        }
        for attempt in delivery.attempts
    ]
    # A parked delivery waits on its endpoint's circuit: say which state it is in and when the next probe is due. One
    # being attempted waits on the invocation holding its message: since when, and when it is back at the latest.
    waiting: dict[str, Any] | None = None
    if waiting_on is not None:
        waiting = {"circuit": circuit_view(*waiting_on)}
    elif in_flight is not None:
        waiting = {"in_flight": {"since": _time(in_flight.since), "back_by": _time(in_flight.back_by)}}
    return delivery_summary(delivery) | {"attempts": attempts, "waiting_on": waiting}


def event_view(event: Event) -> dict[str, Any]:
    return {
        "id": event.id,
        "type": event.type,
        "timestamp": _time(event.timestamp),
        "data": event.data,
        "ordering_key": event.ordering_key,
        "sequence": event.sequence,
        "body": event.body,
        "trace_id": event.trace.trace_id,
    }


def redrive_view(redrive: Redrive) -> dict[str, Any]:
    return {
        "id": redrive.id,
        "endpoint_id": redrive.endpoint_id,
        "since": _time(redrive.since),
        "until": _time(redrive.until),
        "status_filter": redrive.status_filter.value,
        "include_recovered": redrive.include_recovered,
        "state": redrive.state.value,
        "total": redrive.total,
        "total_exact": redrive.total_exact,
        "replayed": redrive.replayed,
        "skipped": redrive.skipped,
        "error": redrive.error,
        "created_at": _time(redrive.created_at),
        "completed_at": _time(redrive.completed_at),
    }


# --- The event-type catalogue ---


class RegisterEventType(Strict):
    """PUT /v1/event-types/{name}: the type's whole definition (a PUT replaces it)."""

    description: str | None = Field(default=None, max_length=MAX_DESCRIPTION)
    # `schema` on the wire; pydantic's BaseModel has a `schema` attribute of its own.
    data_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    example: dict[str, Any] | None = None
    deprecated: bool = False


class EndpointListQuery(Strict):
    limit: int = Field(default=ENDPOINTS_DEFAULT_LIMIT, ge=1, le=ENDPOINTS_MAX_LIMIT)
    cursor: str | None = Field(default=None, min_length=1, max_length=1024)


class StatsQuery(Strict):
    hours: int = Field(default=delivery_stats.DEFAULT_HOURS, ge=1, le=delivery_stats.MAX_HOURS)


def endpoint_stats_view(endpoint_id: str, stats: delivery_stats.EndpointStats) -> dict[str, Any]:
    return {
        "endpoint_id": endpoint_id,
        "since": _time(stats.since),
        "until": _time(stats.until),
        "deliveries_read": stats.deliveries_read,
        "max_deliveries_read": delivery_stats.MAX_DELIVERIES_READ,
        "partial": stats.partial,
        "hours": [
            {
                "start": _time(hour.start),
                "delivered": hour.delivered,
                "failed_attempts": hour.failed_attempts,
                "dead": hour.dead,
                "attempts": hour.attempts,
                "latency_ms": {f"p{p}": value for p, value in hour.latency_ms.items()},
                "wait_ms": {f"p{p}": value for p, value in hour.wait_ms.items()},
            }
            for hour in stats.hours
        ],
    }


class MailboxQuery(Strict):
    """A poll endpoint's read: the messages after `after` (0: from the oldest unacknowledged), acknowledging it."""

    after: int = Field(default=0, ge=0)
    limit: int = Field(default=mailbox.DEFAULT_READ_LIMIT, ge=1, le=mailbox.MAX_READ_LIMIT)


def mailbox_page_view(page: MailboxPage) -> dict[str, Any]:
    """Each message as its webhook would arrive: the signature headers and the exact body they sign."""
    return {
        "data": [
            {
                "seq": m.seq,
                "delivery_id": m.delivery_id,
                "event_id": m.event.id,
                "type": m.event.type,
                "headers": m.headers,
                "body": m.event.body,
            }
            for m in page.messages
        ],
        "next_after": page.next_after,
    }


class EventTypeListQuery(Strict):
    limit: int = Field(default=EVENT_TYPES_DEFAULT_LIMIT, ge=1, le=EVENT_TYPES_MAX_LIMIT)
    cursor: str | None = Field(default=None, min_length=1, max_length=512)


def event_type_view(event_type: EventType) -> dict[str, Any]:
    return {
        "name": event_type.name,
        "description": event_type.description,
        "schema": event_type.data_schema,
        "example": event_type.example,
        "deprecated": event_type.deprecated,
        "created_at": _time(event_type.created_at),
        "updated_at": _time(event_type.updated_at),
    }
