"""Endpoints: registration, changes, secret rotation, enable and disable, and the health summary."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from hookrelay.domain import custom_headers, endpoint_auth, ids
from hookrelay.domain.addresses import DEFAULT_ENDPOINT_PORTS, EndpointPorts, validate_endpoint_url
from hookrelay.domain.clock import truncate_to_milliseconds, utcnow
from hookrelay.domain.content_filter import compile_filter
from hookrelay.domain.custom_headers import CustomHeader, GivenHeader
from hookrelay.domain.destinations import POLL_URL, DestinationKind, aws_destination, check_role, is_aws_target, kind_of
from hookrelay.domain.endpoint_auth import EndpointAuth
from hookrelay.domain.errors import Conflict, InvalidCursor, InvalidDocument, InvalidRequest, LimitExceeded, NotFound
from hookrelay.domain.health import HEALTH_SAMPLE_SIZE, EndpointHealth, summarize
from hookrelay.domain.limits import DEFAULT_LIMITS, TenantLimits
from hookrelay.domain.matching import validate_filters
from hookrelay.domain.models import Endpoint, EndpointState, SigningSecret
from hookrelay.domain.pacing import check_rate_limit
from hookrelay.domain.paging import FOREIGN_CURSOR, BoundedCount, decode_cursor, encode_cursor
from hookrelay.domain.queues import shard_for
from hookrelay.domain.signing import KeyType, generate_key
from hookrelay.services.event_types import EventTypeCatalogue
from hookrelay.services.pacing import Pacing
from hookrelay.services.parking import Parking
from hookrelay.services.ports import (
    DeliveryFilter,
    DeliverySearch,
    EndpointCount,
    EndpointRepository,
    UnknownPosition,
)

DEFAULT_SECRET_OVERLAP = timedelta(days=1)
MAX_SECRET_OVERLAP = timedelta(days=7)
# Every active secret adds a signature to every delivery: a loop of rotations must not grow that unbounded.
MAX_ACTIVE_SECRETS = 5
# Enabling an endpoint clears its failing spell and why it was disabled.
NOT_FAILING: dict[str, Any] = {"failing_since": None, "failure_notice": None, "disabled_reason": None}
# Read-change-write attempts before a change that keeps meeting concurrent writes gives up with 409.
WRITE_ATTEMPTS = 3
# GET /v1/endpoints pages: as many endpoints a page by default, and at most.
DEFAULT_PAGE_LIMIT = 50
MAX_PAGE_LIMIT = 250


class _Keep(Enum):
    KEEP = "keep"


KEEP = _Keep.KEEP  # "leave this field as it is" in a partial update (None is a value: it clears a description)


@dataclass(frozen=True)
class RotatedSecret:
    endpoint: Endpoint
    secret: str  # the new key: a whsec_ secret is returned once, in the rotation's response; a whsk_ key never
    previous_expire_at: datetime  # when the secrets active before stop signing, at the latest


def _over_endpoint_limit(limit: int) -> LimitExceeded:
    return LimitExceeded(
        f"this tenant has {limit} endpoints, its limit (max_endpoints_per_tenant is {limit}): delete one first"
    )


def _not_deleted(endpoint: Endpoint) -> None:
    if endpoint.state is EndpointState.DELETED:
        raise Conflict(f"endpoint {endpoint.id!r} is deleted")


def _expiring_by(secret: SigningSecret, deadline: datetime) -> SigningSecret:
    """The secret, set to expire at `deadline` at the latest: rotating again never extends an older secret."""
    if secret.expires_at is not None and secret.expires_at <= deadline:
        return secret
    return replace(secret, expires_at=deadline)


def _next_version(previous: datetime, now: datetime) -> datetime:
    """A new `updated_at` strictly after the one read, at the stored (millisecond) precision.

    `updated_at` is what a write is conditional on; two writes within one millisecond must still differ.
    """
    candidate = truncate_to_milliseconds(now)
    return candidate if candidate > previous else previous + timedelta(milliseconds=1)


def _not_for_poll(url: str, rate_limit_per_second: int | None) -> None:
    """A poll endpoint's consumer reads at its own pace: there is nothing to hold back."""
    if url == POLL_URL and rate_limit_per_second is not None:
        raise InvalidRequest("a poll endpoint is sent nothing: its consumer reads at its own pace (no rate limit)")


def _webhooks_only(url: str, headers: list[CustomHeader], auth: EndpointAuth | None) -> None:
    """Custom headers and auth are a webhook's: an AWS destination is sent to as its role, a poll endpoint never."""
    if (headers or auth is not None) and kind_of(url) is not DestinationKind.HTTP:
        raise InvalidRequest("custom headers and auth are for webhooks (an https:// url), not for this endpoint's kind")


def _filter_text(content_filter: dict[str, Any] | None) -> str | None:
    """The filter checked and written out compactly, as stored; None: no filter."""
    return None if content_filter is None else compile_filter(content_filter).text


@dataclass(frozen=True)
class EndpointPage:
    endpoints: list[Endpoint]
    next_cursor: str | None


def _cursor_scope(tenant_id: str) -> dict[str, str]:
    return {"endpoints_of": tenant_id}


@dataclass
class EndpointService:
    endpoints: EndpointRepository
    deliveries: DeliverySearch  # read for health
    parking: Parking  # read for health: what waits behind an open circuit
    allow_private_destinations: bool = False
    endpoint_ports: EndpointPorts = DEFAULT_ENDPOINT_PORTS
    default_max_in_flight: int = 4
    catalogue: EventTypeCatalogue | None = None  # filters held to the registered types, when the deployment says so
    limits: TenantLimits = DEFAULT_LIMITS  # the deployment's per-tenant limits (domain/limits.py)
    # Where each tenant's live endpoints are counted, written with them (adapters/dynamodb.py `CountedEndpoints`).
    # None (in-memory fakes): counted by listing them, which is not safe against concurrent creations.
    counter: EndpointCount | None = None
    # The deployment's delivery queue shards when an endpoint is created: its shard is chosen among them, once.
    queue_shards: int = 1
    # Rate-limited endpoints' send slots, read for health (how far ahead they are taken); None: not shown.
    pacing: Pacing | None = None

    def create(
        self,
        tenant_id: str,
        *,
        url: str,
        event_types: list[str],
        description: str | None = None,
        max_in_flight: int | None = None,
        key_type: KeyType = KeyType.HMAC,
        role_arn: str | None = None,
        content_filter: dict[str, Any] | None = None,
        headers: builtins.list[GivenHeader] | None = None,
        auth: dict[str, Any] | None = None,
        rate_limit_per_second: int | None = None,
    ) -> Endpoint:
        """`content_filter`: the filter as given (domain/content_filter.py), checked here (a 422 naming its pointer
        under `/filter`) and stored as compact JSON text. `role_arn`: an AWS destination's (domain/destinations.py)."""
        if url == POLL_URL and max_in_flight not in (None, 1):
            raise InvalidRequest("a poll endpoint's messages are posted in order, one at a time: max_in_flight is 1")
        now = utcnow()
        endpoint_id = ids.endpoint_id()
        custom, credentials = self._outbound(headers or [], auth, stored_headers=[], stored_auth=None, now=now)
        _webhooks_only(url, custom, credentials)
        # A poll endpoint's deliveries are posted to its mailbox in one message group, so in the order they came.
        max_in_flight = 1 if url == POLL_URL else max_in_flight or self.default_max_in_flight
        _not_for_poll(url, rate_limit_per_second)
        endpoint = Endpoint(
            id=endpoint_id,
            tenant_id=tenant_id,
            url=self._checked_url(url),
            role_arn=check_role(url, role_arn),
            event_types=self._registered(validate_filters(event_types, self.limits.max_filters_per_endpoint)),
            content_filter=_filter_text(content_filter),
            description=description,
            secrets=[SigningSecret(secret=generate_key(key_type), created_at=now)],
            max_in_flight=max_in_flight,
            rate_limit_per_second=_checked_rate_limit(rate_limit_per_second, max_in_flight),
            headers=custom,
            auth=credentials,
            created_at=now,
            updated_at=now,
            # Chosen here, once, and stored: routing reads the stored shard, so a later change to the deployment's
            # shards never moves this endpoint's messages to another queue (domain/queues.py).
            queue_shard=shard_for(endpoint_id, self.queue_shards),
        )
        self._add(endpoint)
        return endpoint

    def _checked_url(self, url: str) -> str:
        """A webhook's URL under the destination rule (domain/addresses.py); an AWS destination's ARN as one."""
        if url == POLL_URL:  # pull delivery: nothing is sent anywhere
            return url
        if is_aws_target(url):
            aws_destination(url)
            return url
        return validate_endpoint_url(url, allow_private=self.allow_private_destinations, ports=self.endpoint_ports)

    def _outbound(
        self,
        headers: builtins.list[GivenHeader] | _Keep,
        auth: dict[str, Any] | _Keep | None,
        *,
        stored_headers: builtins.list[CustomHeader],
        stored_auth: EndpointAuth | None,
        now: datetime,
    ) -> tuple[builtins.list[CustomHeader], EndpointAuth | None]:
        """The custom headers and auth to store: those given (a secret left out kept from what is stored), else
        the stored ones; held to the rules together (Authorization is the auth's once there is one). Every problem
        is a 422 naming its field by JSON pointer (domain/custom_headers.py, domain/endpoint_auth.py)."""
        found: builtins.list[dict[str, str]] = []
        final_auth = stored_auth
        if isinstance(auth, dict):
            fields = endpoint_auth.with_kept_secrets(auth, stored_auth)
            found += endpoint_auth.problems(fields)
            if fields.get("token_url") and not found:
                found += self._url_problems(fields["token_url"], "/auth/token_url")
            final_auth = endpoint_auth.build(fields, now) if not found else None
        elif auth is None:
            final_auth = None
        if isinstance(headers, builtins.list):
            final_headers, unresolved = custom_headers.resolve(headers, stored_headers)
            has_auth = final_auth is not None or isinstance(auth, dict)
            found += unresolved or custom_headers.problems(final_headers, has_auth=has_auth)
        else:
            final_headers = stored_headers
            if final_auth is not None and any(h.name.lower() == custom_headers.AUTHORIZATION for h in final_headers):
                found.append({"pointer": "/auth", "detail": "the endpoint's headers set Authorization: remove it"})
        if found:
            raise InvalidDocument("the endpoint's headers or auth are refused", found)
        return final_headers, final_auth

    def _url_problems(self, url: str, pointer: str) -> builtins.list[dict[str, str]]:
        try:
            self._checked_url(url)
        except InvalidRequest as refused:
            return [{"pointer": pointer, "detail": refused.detail}]
        return []

    def _add(self, endpoint: Endpoint) -> None:
        """Write the new endpoint only while its tenant is below `max_endpoints_per_tenant` (else 409)."""
        limit = self.limits.max_endpoints_per_tenant
        if self.counter is None:
            if len(self.list(endpoint.tenant_id)) >= limit:
                raise _over_endpoint_limit(limit)
            self.endpoints.put(endpoint)
            return
        for _ in range(WRITE_ATTEMPTS):
            if self._counted(endpoint.tenant_id) >= limit:
                raise _over_endpoint_limit(limit)
            if self.counter.create(endpoint, limit):  # the count and the endpoint, in one transaction
                return
        raise Conflict("the tenant's endpoints kept changing while this request tried to add one: try again")

    def _counted(self, tenant_id: str) -> int:
        """The tenant's count of live endpoints; a tenant never counted is counted now (by listing), once."""
        assert self.counter is not None
        counted = self.counter.counted(tenant_id)
        if counted is None:
            self.counter.start_count(tenant_id, len(self.list(tenant_id)))  # only if still unset: the first one wins
            counted = self.counter.counted(tenant_id)
        if counted is None:
            raise LookupError(f"tenant {tenant_id} has no record to count its endpoints on")
        return counted

    def _registered(self, filters: builtins.list[str]) -> builtins.list[str]:
        if self.catalogue is not None:
            self.catalogue.check_filters(filters)
        return filters

    def get(self, tenant_id: str, endpoint_id: str) -> Endpoint:
        """The endpoint, deleted ones included (shown as `deleted`); another tenant's is not found."""
        endpoint = self.endpoints.get(tenant_id, endpoint_id)
        if endpoint is None:
            raise NotFound(f"no endpoint {endpoint_id!r}")
        return endpoint

    def list(self, tenant_id: str) -> list[Endpoint]:
        live = [e for e in self.endpoints.list_for_tenant(tenant_id) if e.state is not EndpointState.DELETED]
        return sorted(live, key=lambda e: e.created_at, reverse=True)

    def page(self, tenant_id: str, *, limit: int = DEFAULT_PAGE_LIMIT, cursor: str | None = None) -> EndpointPage:
        """The tenant's live endpoints, newest first, `limit` at a time; `next_cursor` resumes after the last one.
        A cursor is bound to the tenant: another tenant's (or a forged one) is refused with 400, as the delivery
        log refuses one."""
        if not 1 <= limit <= MAX_PAGE_LIMIT:
            raise InvalidRequest(f"limit must be between 1 and {MAX_PAGE_LIMIT}")
        scope = _cursor_scope(tenant_id)
        start = decode_cursor(scope, cursor) if cursor else None
        try:
            found, resume = self.endpoints.page_for_tenant(tenant_id, limit, start)
        except UnknownPosition:
            raise InvalidCursor(FOREIGN_CURSOR) from None
        return EndpointPage(found, encode_cursor(scope, resume) if resume else None)

    def update(
        self,
        tenant_id: str,
        endpoint_id: str,
        *,
        url: str | _Keep = KEEP,
        event_types: builtins.list[str] | _Keep = KEEP,  # builtins: `list` here is the method above
        description: str | _Keep | None = KEEP,
        max_in_flight: int | _Keep = KEEP,
        role_arn: str | _Keep | None = KEEP,
        content_filter: dict[str, Any] | _Keep | None = KEEP,
        headers: builtins.list[GivenHeader] | _Keep = KEEP,
        auth: dict[str, Any] | _Keep | None = KEEP,
        rate_limit_per_second: int | _Keep | None = KEEP,
    ) -> Endpoint:
        """Change what is given. A new `max_in_flight` sets the message groups of deliveries created from now on; a
        new `content_filter` (None clears it) applies to events accepted from now on; a new `rate_limit_per_second`
        holds the next sends (None clears it). A url and its role are checked together, as they will stand: moving
        a webhook to an AWS destination gives its role_arn, and back clears it (null).

        New `headers` replace the list; new `auth` replaces the credentials (`null` removes them). Either takes
        effect whole on the next attempt: the change is one conditional write of the endpoint, which every attempt
        reads, and an OAuth2 token of the old credentials is never used again (domain/endpoint_auth.py). Nothing is
        written in two steps, so a crash leaves the endpoint as it was or as it was asked to be."""
        given = {
            "url": url,
            "event_types": event_types,
            "description": description,
            "max_in_flight": max_in_flight,
            "role_arn": role_arn,
            "rate_limit_per_second": rate_limit_per_second,
        }
        changes: dict[str, Any] = {name: value for name, value in given.items() if value is not KEEP}
        if content_filter is not KEEP:
            changes["content_filter"] = _filter_text(content_filter)
        if not changes and headers is KEEP and auth is KEEP:
            raise InvalidRequest(
                "nothing to change: give url, event_types, filter, description, max_in_flight, role_arn, headers,"
                " auth or rate_limit_per_second"
            )
        if isinstance(url, str):
            self._checked_url(url)
        if isinstance(event_types, builtins.list):
            self._registered(validate_filters(event_types, self.limits.max_filters_per_endpoint))

        def apply(endpoint: Endpoint, now: datetime) -> Endpoint:
            _not_deleted(endpoint)
            url = changes.get("url", endpoint.url)
            if (url == POLL_URL) != (endpoint.url == POLL_URL):
                raise InvalidRequest("a poll endpoint stays one, and no other becomes one: create a new endpoint")
            if url == POLL_URL and changes.get("max_in_flight", 1) != 1:
                raise InvalidRequest(
                    "a poll endpoint's messages are posted in order, one at a time: max_in_flight is 1"
                )
            _not_for_poll(url, changes.get("rate_limit_per_second"))
            check_role(url, changes.get("role_arn", endpoint.role_arn))
            outbound: dict[str, Any] = {}
            if headers is not KEEP or auth is not KEEP:
                outbound["headers"], outbound["auth"] = self._outbound(
                    headers, auth, stored_headers=endpoint.headers, stored_auth=endpoint.auth, now=now
                )
            _webhooks_only(url, outbound.get("headers", endpoint.headers), outbound.get("auth", endpoint.auth))
            changed = replace(endpoint, **changes, **outbound)
            _checked_rate_limit(changed.rate_limit_per_second, changed.max_in_flight)  # the two together
            return changed

        return self._change(tenant_id, endpoint_id, apply)

    def set_enabled(self, tenant_id: str, endpoint_id: str, enabled: bool) -> Endpoint:
        """Enable or disable; asking for the state it is already in changes nothing."""
        target = EndpointState.ENABLED if enabled else EndpointState.DISABLED

        def switch(endpoint: Endpoint, _: datetime) -> Endpoint | None:
            _not_deleted(endpoint)
            if endpoint.state is target:
                return None
            if enabled:  # a fresh start: an old failing spell must not count against the fixed endpoint
                return replace(endpoint, state=target, **NOT_FAILING)
            return replace(endpoint, state=target)

        return self._change(tenant_id, endpoint_id, switch)

    def disable_failing(self, tenant_id: str, endpoint_id: str, failing_since: datetime, reason: str) -> bool:
        """Disable the endpoint for failing, only if it is still enabled and in the failing spell that began then.

        A success in between ends the spell, and a tenant's own disable or delete comes first: then nothing changes.
        """
        disabled = False

        def switch(endpoint: Endpoint, _: datetime) -> Endpoint | None:
            nonlocal disabled
            disabled = endpoint.state is EndpointState.ENABLED and endpoint.failing_since == failing_since
            if not disabled:
                return None
            return replace(endpoint, state=EndpointState.DISABLED, disabled_reason=reason)

        self._change(tenant_id, endpoint_id, switch)
        return disabled

    def delete(self, tenant_id: str, endpoint_id: str) -> None:
        """Soft delete: the record stays (its deliveries keep pointing at it) but never delivers again.

        Its secrets are dropped at once (signing secrets, custom headers, auth credentials): nothing will be sent to
        it again. Deleting twice is harmless.
        """

        def remove(endpoint: Endpoint, _: datetime) -> Endpoint | None:
            if endpoint.state is EndpointState.DELETED:
                return None
            return replace(endpoint, state=EndpointState.DELETED, secrets=[], headers=[], auth=None)

        if self.counter is None:
            self._change(tenant_id, endpoint_id, remove)
            return
        self._counted(tenant_id)  # counted before any counted write: the count is taken off in the same transaction
        self._change(tenant_id, endpoint_id, remove, write=self.counter.delete)

    def rotate_secret(
        self,
        tenant_id: str,
        endpoint_id: str,
        *,
        expire_previous_after: timedelta = DEFAULT_SECRET_OVERLAP,
        key_type: KeyType | None = None,
    ) -> RotatedSecret:
        """Add a new secret; the ones active now keep signing (beside it) until `expire_previous_after` from now.

        The new key is of `key_type`, by default the type of the newest key: rotating between types is
        allowed, and during the overlap each delivery carries a signature of each type (`v1,` and `v1a,`).
        """
        if not timedelta(0) <= expire_previous_after <= MAX_SECRET_OVERLAP:
            raise InvalidRequest(f"the overlap must be between 0 and {MAX_SECRET_OVERLAP.total_seconds():.0f} seconds")
        secrets_by_type: dict[KeyType, str] = {}  # generated once per type: the same key on every write attempt
        secret: str | None = None
        deadline: datetime | None = None

        def rotate(endpoint: Endpoint, now: datetime) -> Endpoint:
            nonlocal deadline, secret
            _not_deleted(endpoint)
            new_type = key_type or (endpoint.secrets[-1].key_type if endpoint.secrets else KeyType.HMAC)
            secret = secrets_by_type.setdefault(new_type, generate_key(new_type))
            deadline = now + expire_previous_after
            previous = [_expiring_by(s, deadline) for s in endpoint.secrets if s.active(now)]
            if sum(s.active(now) for s in previous) + 1 > MAX_ACTIVE_SECRETS:
                raise Conflict(
                    f"at most {MAX_ACTIVE_SECRETS} secrets may be active at once: rotate with "
                    "expire_previous_after_seconds 0, or wait until a previous secret expires"
                )
            return replace(endpoint, secrets=[*previous, SigningSecret(secret=secret, created_at=now)])

        endpoint = self._change(tenant_id, endpoint_id, rotate)
        assert deadline is not None and secret is not None  # set by the write that succeeded
        return RotatedSecret(endpoint=endpoint, secret=secret, previous_expire_at=deadline)

    def health(self, tenant_id: str, endpoint_id: str) -> tuple[Endpoint, EndpointHealth, BoundedCount, float | None]:
        """Summarised on read from the endpoint's newest deliveries (one bounded index read, no scan), with how
        many deliveries are parked behind its circuit (its lot is read only while the circuit is not closed) and,
        for a rate-limited endpoint, how many seconds of send slots are already taken ahead (one item read)."""
        endpoint = self.get(tenant_id, endpoint_id)
        now = utcnow()
        where = DeliveryFilter(tenant_id=tenant_id, endpoint_id=endpoint_id)
        page = self.deliveries.find(where, HEALTH_SAMPLE_SIZE, None, now)
        health = summarize(
            page.deliveries, now, older_not_sampled=page.resume_after is not None, failing_since=endpoint.failing_since
        )
        paced = None if self.pacing is None else self.pacing.backlog_seconds(endpoint, now)
        return endpoint, health, self.parking.parked_behind(endpoint), paced

    def _change(
        self,
        tenant_id: str,
        endpoint_id: str,
        change: Callable[[Endpoint, datetime], Endpoint | None],
        write: Callable[..., bool] | None = None,
    ) -> Endpoint:
        """Read, change, and write back only if nobody wrote in between (else again, on the fresh record).

        `change` returns None when there is nothing to do. Every write also drops expired secrets.
        """
        for _ in range(WRITE_ATTEMPTS):
            current = self.get(tenant_id, endpoint_id)
            now = utcnow()
            changed = change(current, now)
            if changed is None:
                return current
            changed = replace(
                changed,
                secrets=[s for s in changed.secrets if s.active(now)],
                updated_at=_next_version(current.updated_at, now),
            )
            if (write or self.endpoints.replace)(changed, expected_updated_at=current.updated_at, read=current):
                return changed
        raise Conflict(f"endpoint {endpoint_id!r} kept changing while this request tried to write it: try again")


def _checked_rate_limit(limit: int | None, max_in_flight: int) -> int | None:
    try:
        return check_rate_limit(limit, max_in_flight)
    except ValueError as error:
        raise InvalidDocument(str(error), [{"pointer": "/rate_limit_per_second", "detail": str(error)}]) from error
