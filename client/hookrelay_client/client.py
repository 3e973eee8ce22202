"""HookrelayClient: one method per API route, on a requests.Session. Knows HTTP and JSON, nothing of AWS."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import quote

import requests
from pydantic import BaseModel

from hookrelay_client.errors import HookrelayError, Problem
from hookrelay_client.models import (
    BatchPublished,
    CreatedEndpoint,
    CreatedTenant,
    Delivery,
    DeliveryPage,
    DeliverySummary,
    Endpoint,
    EndpointHealth,
    EndpointPage,
    EndpointStats,
    EndpointTestSent,
    Event,
    EventType,
    EventTypePage,
    IssuedApiKey,
    MessagePage,
    PortalSession,
    PublishedEvent,
    Redrive,
    RedriveAccepted,
    Replay,
    RotatedSecret,
)

__version__ = "0.1.0"
MAX_BATCH_EVENTS = 100  # the API's limit per POST /v1/events/batch
M = TypeVar("M", bound=BaseModel)
Moment = datetime | str


class _Unchanged:
    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED: Any = _Unchanged()  # "leave the description (or filter) as it is": None is a value there (it clears it)


def header(name: str, value: str | None = None, *, secret: bool = False) -> dict[str, Any]:
    """A custom header for `create_endpoint`/`update_endpoint`; a secret one's value is never shown again."""
    given: dict[str, Any] = {"name": name, "secret": secret}
    if value is not None:
        given["value"] = value
    return given


def basic_auth(username: str, password: str) -> dict[str, Any]:
    return {"kind": "basic", "username": username, "password": password}


def bearer_auth(token: str) -> dict[str, Any]:
    return {"kind": "bearer", "token": token}


def oauth2_client_credentials(
    token_url: str,
    client_id: str,
    client_secret: str | None = None,
    *,
    scope: str | None = None,
    audience: str | None = None,
) -> dict[str, Any]:
    """OAuth2 client credentials; on an update, `client_secret=None` keeps the stored secret."""
    given = {
        "kind": "oauth2_client_credentials",
        "token_url": token_url,
        "client_id": client_id,
        "client_secret": client_secret,
        "scope": scope,
        "audience": audience,
    }
    return {name: value for name, value in given.items() if value is not None}


def _segment(value: str) -> str:
    """An id as one path segment: never lets a value add path components or a query string."""
    return quote(value, safe="")


def _moment(value: Moment | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if value.tzinfo is None:
        raise ValueError("give timezone-aware datetimes (UTC): a naive time is ambiguous")
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _without_none(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


class HookrelayClient:
    """A client for the hookrelay API. Errors raise `HookrelayError` carrying the RFC 9457 problem details."""

    def __init__(
        self, base_url: str, token: str, *, timeout: float = 10.0, session: requests.Session | None = None
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.session = session or requests.Session()
        self._headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, application/problem+json",
            "User-Agent": f"hookrelay-client/{__version__}",
        }

    def __repr__(self) -> str:  # the token stays out of reprs and tracebacks
        return f"HookrelayClient({self.base_url!r})"

    # -- transport -------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Any:
        """Send one request; the decoded JSON body, None for 204, or `HookrelayError`."""
        headers = dict(self._headers)
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        response = self.session.request(
            method,
            self.base_url + path,
            json=body,
            params=_without_none(params or {}),
            headers=headers,
            timeout=self.timeout,
            allow_redirects=False,
        )
        if response.status_code >= 300:
            raise HookrelayError(Problem.from_response(response))
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def _get(self, model: type[M], path: str, **params: Any) -> M:
        return model.model_validate(self.request("GET", path, params=params))

    def _post(self, model: type[M], path: str, body: Any = None, idempotency_key: str | None = None) -> M:
        return model.model_validate(self.request("POST", path, body=body, idempotency_key=idempotency_key))

    # -- producers -------------------------------------------------------------------------------

    def publish_event(
        self,
        tenant_id: str,
        event_type: str,
        data: dict[str, Any],
        *,
        ordering_key: str | None = None,
        idempotency_key: str | None = None,
    ) -> PublishedEvent:
        body = _without_none({"tenant_id": tenant_id, "type": event_type, "data": data, "ordering_key": ordering_key})
        return self._post(PublishedEvent, "/v1/events", body, idempotency_key)

    def publish_events(self, tenant_id: str, events: Sequence[Mapping[str, Any]]) -> BatchPublished:
        """Publish up to 100 events (1 MiB) of one tenant in one request, for high-volume producers.

        Each event is a mapping of `type`, `data` and, optionally, `ordering_key` and `idempotency_key` (which
        makes a retry of the event, alone or in a whole retried batch, answer the same ids and publish nothing
        twice). The answer holds one `BatchEventResult` per event, in order: a refused event (`accepted` False,
        with its problem) never hides the others' fate; `HookrelayError` only when the request is no batch.
        """
        body = {"tenant_id": tenant_id, "events": [_without_none(dict(event)) for event in events]}
        return self._post(BatchPublished, "/v1/events/batch", body)

    # -- admins ----------------------------------------------------------------------------------

    def create_tenant(self, name: str) -> CreatedTenant:
        return self._post(CreatedTenant, "/v1/tenants", {"name": name})

    def create_api_key(self, role: str, description: str | None = None) -> IssuedApiKey:
        return self._post(IssuedApiKey, "/v1/api-keys", _without_none({"role": role, "description": description}))

    def revoke_api_key(self, key_id: str) -> None:
        self.request("DELETE", f"/v1/api-keys/{_segment(key_id)}")

    # -- the event-type catalogue (admins write it, any key reads it) --------------------------------

    def put_event_type(
        self,
        name: str,
        *,
        description: str | None = None,
        schema: dict[str, Any] | None = None,
        example: dict[str, Any] | None = None,
        deprecated: bool = False,
    ) -> EventType:
        """Register or replace (the whole definition) an event type; admin keys."""
        body = {"description": description, "schema": schema, "example": example, "deprecated": deprecated}
        return EventType.model_validate(self.request("PUT", f"/v1/event-types/{_segment(name)}", body=body))

    def list_event_types(self, *, limit: int | None = None, cursor: str | None = None) -> EventTypePage:
        """One page of the catalogue, by name; pass `next_cursor` back as `cursor` for the next one."""
        return self._get(EventTypePage, "/v1/event-types", limit=limit, cursor=cursor)

    def iter_event_types(self, *, limit: int | None = None) -> Iterator[EventType]:
        """Every registered event type, by name, page by page."""
        return _every_page(self.list_event_types, None, limit=limit)

    def get_event_type(self, name: str) -> EventType:
        return self._get(EventType, f"/v1/event-types/{_segment(name)}")

    def delete_event_type(self, name: str) -> None:
        self.request("DELETE", f"/v1/event-types/{_segment(name)}")

    # -- the consumer portal ---------------------------------------------------------------------

    def open_portal_session(
        self,
        tenant_id: str | None = None,
        ttl_seconds: int | None = None,
        capabilities: Sequence[str] | None = None,
    ) -> PortalSession:
        """A short-lived link to the tenant's portal page: a tenant key opens it for its own tenant (tenant_id
        may be left out), an admin key for the tenant named. `capabilities`: any of "view", "recover", "manage"
        (the server's default, left out: view and recover)."""
        body = _without_none(
            {"tenant_id": tenant_id, "ttl_seconds": ttl_seconds, "capabilities": list(capabilities or []) or None}
        )
        return self._post(PortalSession, "/v1/portal-sessions", body)

    # -- tenants: endpoints ----------------------------------------------------------------------

    def create_endpoint(
        self,
        url: str | None,
        event_types: Sequence[str] = ("*",),
        *,
        description: str | None = None,
        max_in_flight: int | None = None,
        key_type: str | None = None,
        role_arn: str | None = None,
        kind: str | None = None,
        filter: Mapping[str, Any] | None = None,
        headers: Sequence[Mapping[str, Any]] | None = None,
        auth: Mapping[str, Any] | None = None,
        rate_limit_per_second: int | None = None,
    ) -> CreatedEndpoint:
        """A new endpoint. `key_type="ed25519"` signs its deliveries with `v1a` signatures that consumers verify
        with `.public_key` alone; by default (`hmac`) the shared secret is in `.secret`, returned only now.
        `filter`: a content filter (`{"data.amount": {"$gte": 100}}`), applied after the event types match.

        `headers`: custom headers sent with every webhook (`header(...)`); `auth`: how the platform authenticates
        to the endpoint (`basic_auth(...)`, `bearer_auth(...)`, `oauth2_client_credentials(...)`).

        `url` may be an AWS destination's ARN (an SQS queue, SNS topic or EventBridge bus) with `role_arn`, the role
        hookrelay assumes with the endpoint's `.external_id` (the consumer guide). `kind="poll"` with
        `url=None`: pull delivery, read with `read_messages`."""
        body = {
            "url": url,
            "event_types": list(event_types),
            "description": description,
            "max_in_flight": max_in_flight,
            "key_type": key_type,
            "role_arn": role_arn,
            "kind": kind,
            "filter": None if filter is None else dict(filter),
            "headers": None if headers is None else [dict(h) for h in headers],
            "auth": None if auth is None else dict(auth),
            "rate_limit_per_second": rate_limit_per_second,
        }
        return self._post(CreatedEndpoint, "/v1/endpoints", _without_none(body))

    def read_messages(self, endpoint_id: str, *, after: int = 0, limit: int | None = None) -> MessagePage:
        """A poll endpoint's messages posted after `after`, oldest first. Reading after `after` acknowledges every
        message up to it; until then they are returned again (at least once). Pass `.next_after` back next."""
        return self._get(MessagePage, f"/v1/endpoints/{_segment(endpoint_id)}/messages", after=after, limit=limit)

    def list_endpoints(self) -> list[Endpoint]:
        """Every live endpoint of the tenant, newest first: every page, followed transparently."""
        return list(self.iter_endpoints())

    def list_endpoints_page(self, *, limit: int | None = None, cursor: str | None = None) -> EndpointPage:
        """One page, newest first; pass `next_cursor` back as `cursor` for the next one."""
        return self._get(EndpointPage, "/v1/endpoints", limit=limit, cursor=cursor)

    def iter_endpoints(self, *, limit: int | None = None) -> Iterator[Endpoint]:
        """Every live endpoint, newest first, page by page (`limit` a page)."""
        return _every_page(self.list_endpoints_page, None, limit=limit)

    def get_endpoint(self, endpoint_id: str) -> Endpoint:
        return self._get(Endpoint, f"/v1/endpoints/{_segment(endpoint_id)}")

    def update_endpoint(
        self,
        endpoint_id: str,
        *,
        url: str | None = None,
        event_types: Sequence[str] | None = None,
        description: str | None = UNCHANGED,
        max_in_flight: int | None = None,
        role_arn: str | None = UNCHANGED,
        filter: Mapping[str, Any] | None = UNCHANGED,
        headers: Sequence[Mapping[str, Any]] | None = None,
        auth: Mapping[str, Any] | None = UNCHANGED,
        rate_limit_per_second: int | None = UNCHANGED,
    ) -> Endpoint:
        """Change what is given (None leaves a field as it is; `description=None` clears the description,
        `filter=None` the content filter, `rate_limit_per_second=None` the rate limit, and `role_arn=None` the role,
        for an endpoint moved back to a webhook URL).

        A new `max_in_flight` or `filter` applies to events accepted from now on, a new rate limit to the next
        sends. `headers` replaces the custom headers (`[]` removes them; a secret `header(name, secret=True)`
        without a value keeps the stored one); `auth` replaces the credentials from the next attempt on
        (`auth=None` removes them).
        """
        body = _without_none(
            {
                "url": url,
                "event_types": None if event_types is None else list(event_types),
                "max_in_flight": max_in_flight,
                "headers": None if headers is None else [dict(h) for h in headers],
            }
        )
        if description is not UNCHANGED:
            body["description"] = description
        if role_arn is not UNCHANGED:
            body["role_arn"] = role_arn
        if filter is not UNCHANGED:
            body["filter"] = None if filter is None else dict(filter)
        if auth is not UNCHANGED:
            body["auth"] = None if auth is None else dict(auth)
        if rate_limit_per_second is not UNCHANGED:
            body["rate_limit_per_second"] = rate_limit_per_second
        return Endpoint.model_validate(self.request("PATCH", f"/v1/endpoints/{_segment(endpoint_id)}", body=body))

    def disable_endpoint(self, endpoint_id: str) -> Endpoint:
        """Stop sending: new events' deliveries are recorded `cancelled` (redrive them after enabling)."""
        return self._post(Endpoint, f"/v1/endpoints/{_segment(endpoint_id)}/disable")

    def enable_endpoint(self, endpoint_id: str) -> Endpoint:
        return self._post(Endpoint, f"/v1/endpoints/{_segment(endpoint_id)}/enable")

    def delete_endpoint(self, endpoint_id: str) -> None:
        """Soft delete: never delivered to again; still shown (state `deleted`) with its deliveries in the log."""
        self.request("DELETE", f"/v1/endpoints/{_segment(endpoint_id)}")

    def rotate_endpoint_secret(
        self, endpoint_id: str, *, expire_previous_after_seconds: int | None = None, key_type: str | None = None
    ) -> RotatedSecret:
        """A new signing secret (in `.secret`, returned only now; for `key_type="ed25519"`, its `.public_key`);
        the previous ones keep signing until `previous_secrets_expire_at` (default a day from now; 0 retires
        them at once). `key_type` defaults to the type of the endpoint's newest key."""
        body = _without_none({"expire_previous_after_seconds": expire_previous_after_seconds, "key_type": key_type})
        return self._post(RotatedSecret, f"/v1/endpoints/{_segment(endpoint_id)}/rotate-secret", body)

    def get_endpoint_health(self, endpoint_id: str) -> EndpointHealth:
        return self._get(EndpointHealth, f"/v1/endpoints/{_segment(endpoint_id)}/health")

    def get_endpoint_stats(self, endpoint_id: str, *, hours: int | None = None) -> EndpointStats:
        """Per hour: deliveries delivered and dead, failed attempts, attempt latency p50/p95/p99."""
        return self._get(EndpointStats, f"/v1/endpoints/{_segment(endpoint_id)}/stats", hours=hours)

    def send_test_event(self, endpoint_id: str) -> EndpointTestSent:
        return self._post(EndpointTestSent, f"/v1/endpoints/{_segment(endpoint_id)}/test")

    # -- tenants: deliveries, events ---------------------------------------------------------------

    def list_deliveries(
        self,
        *,
        status: str | None = None,
        endpoint_id: str | None = None,
        event_id: str | None = None,
        since: Moment | None = None,
        until: Moment | None = None,
        recovered: bool | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> DeliveryPage:
        """One page, newest first; pass `next_cursor` back as `cursor` for the next one. `recovered=False`: only
        deliveries not recovered (with `status="dead"`, the dead still undelivered); True: only recovered ones."""
        return self._get(
            DeliveryPage,
            "/v1/deliveries",
            status=status,
            endpoint_id=endpoint_id,
            event_id=event_id,
            since=_moment(since),
            until=_moment(until),
            recovered=None if recovered is None else str(recovered).lower(),
            limit=limit,
            cursor=cursor,
        )

    def iter_deliveries(self, **filters: Any) -> Iterator[DeliverySummary]:
        """Every delivery matching the filters (those of `list_deliveries`), newest first, page by page."""
        return _every_page(self.list_deliveries, filters.pop("cursor", None), **filters)

    def get_delivery(self, delivery_id: str) -> Delivery:
        return self._get(Delivery, f"/v1/deliveries/{_segment(delivery_id)}")

    def replay_delivery(self, delivery_id: str) -> Replay:
        """A new delivery of the same event (same webhook-id), pointing back at this one."""
        return self._post(Replay, f"/v1/deliveries/{_segment(delivery_id)}/replay")

    def get_event(self, event_id: str) -> Event:
        return self._get(Event, f"/v1/events/{_segment(event_id)}")

    # -- tenants: redrive --------------------------------------------------------------------------

    def redrive(
        self,
        endpoint_id: str,
        since: Moment,
        until: Moment | None = None,
        *,
        status: str | None = None,
        include_recovered: bool = False,
        idempotency_key: str | None = None,
    ) -> RedriveAccepted:
        """Replay the endpoint's dead (or `status`) deliveries created in [since, until); until defaults to now.
        Those already recovered (a replay of them delivered) are skipped unless `include_recovered`."""
        body = _without_none({"since": _moment(since), "until": _moment(until), "status": status})
        if include_recovered:
            body["include_recovered"] = True
        return self._post(RedriveAccepted, f"/v1/endpoints/{_segment(endpoint_id)}/redrive", body, idempotency_key)

    def get_redrive(self, redrive_id: str) -> Redrive:
        return self._get(Redrive, f"/v1/redrives/{_segment(redrive_id)}")

    def follow_redrive(
        self,
        redrive_id: str,
        *,
        poll_interval: float = 1.0,
        on_progress: Callable[[Redrive], None] | None = None,
        timeout: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Redrive:
        """Poll the redrive until it is no longer running; `on_progress` sees every poll. Returns the last state."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            redrive = self.get_redrive(redrive_id)
            if on_progress is not None:
                on_progress(redrive)
            if redrive.finished:
                return redrive
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"redrive {redrive_id} still running after {timeout}s")
            sleep(poll_interval)


def _every_page(list_page: Callable[..., Any], cursor: str | None, **query: Any) -> Iterator[Any]:
    """Every item of a paged list, following `next_cursor` from `cursor` to the end."""
    while True:
        page = list_page(cursor=cursor, **query)
        yield from page.data
        if not page.next_cursor:
            return
        cursor = page.next_cursor
