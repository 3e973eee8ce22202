"""What a portal link may do: every route the API serves, tried with a link of each capability, on its own tenant's
objects and on another tenant's, through the real authorizer and handlers (domain/portal.py's one table).

A forwarded link used to be a tenant key in all but name: it could change an endpoint's URL, replay past events to
the new one, rotate the secret with no overlap, delete and create endpoints (issue 27, finding 1). Now each cell is
what the table says: a route the link's capabilities reach answers as it does for the tenant (and 404 for another
tenant's object, as a tenant key gets); every other route is 403 problem details.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from hookrelay.domain import portal
from hookrelay.domain.clock import to_rfc3339, utcnow
from hookrelay.domain.portal import ROUTE_CAPABILITIES, Capability
from hookrelay.domain.status import DeliveryStatus
from hookrelay.functions import ROUTES, Route, authorizer_cache_seconds
from hookrelay.handlers import http
from local import gateway
from local.as_deployed import TEST_API_URL
from tests.support.platform import Platform
from tests.support.records import seed

# Links by what they were minted with ("view" is always included).
LINKS: dict[str, list[str]] = {"view": ["view"], "recover": ["recover"], "manage": ["manage"]}
SUCCESS = {200, 201, 202, 204}
CELLS: list[str] = []  # one line per cell tried, counted at the end


@dataclass
class Tenant:
    tenant_id: str
    key: str
    endpoint_id: str
    delivery_id: str
    event_id: str
    redrive_id: str


def _tenant(platform: Platform, name: str) -> Tenant:
    tenant_id, key = platform.new_tenant(name)
    endpoint_id = platform.new_endpoint(key, "https://example.com/hooks")["id"]
    dead = seed(tenant_id, endpoint_id, utcnow() - timedelta(hours=1), DeliveryStatus.DEAD)
    window = {"since": to_rfc3339(utcnow() - timedelta(days=1))}
    redrive = platform.call("POST", f"/v1/endpoints/{endpoint_id}/redrive", key, window)
    assert redrive.status == 202, redrive.body
    return Tenant(tenant_id, key, endpoint_id, dead.delivery.id, dead.event.id, redrive.json()["redrive_id"])


def _request(route: Route, owner: Tenant, platform: Platform) -> tuple[str, Any]:
    """The route's path with `owner`'s objects in it, and a valid body; a fresh endpoint for the routes that change
    or remove one, so that no cell depends on another."""
    endpoint_id = owner.endpoint_id
    if route.method in ("PATCH", "DELETE") or route.path.endswith(("/disable", "/enable", "/rotate-secret")):
        endpoint_id = platform.new_endpoint(owner.key, "https://example.com/spare")["id"]
    path = (
        route.path.replace("{endpoint_id}", endpoint_id)
        .replace("{delivery_id}", owner.delivery_id)
        .replace("{event_id}", owner.event_id)
        .replace("{redrive_id}", owner.redrive_id)
        .replace("{name}", "order.created")
        .replace("{key_id}", "key_x")
    )
    bodies: dict[str, Any] = {
        "POST /v1/tenants": {"name": "x"},
        "POST /v1/api-keys": {"role": "admin"},
        "POST /v1/portal-sessions": {},
        "POST /v1/endpoints": {"url": "https://example.com/new", "event_types": ["*"]},
        "PATCH /v1/endpoints/{endpoint_id}": {"url": "https://attacker.example/hooks"},
        "POST /v1/endpoints/{endpoint_id}/rotate-secret": {},
        "POST /v1/endpoints/{endpoint_id}/redrive": {"since": to_rfc3339(utcnow() - timedelta(days=1))},
        "PUT /v1/event-types/{name}": {"deprecated": True},
        "POST /v1/events": {"tenant_id": owner.tenant_id, "type": "order.created", "data": {}},
        "POST /v1/events/batch": {"events": [{"tenant_id": owner.tenant_id, "type": "order.created", "data": {}}]},
    }
    return path, bodies.get(route.route_key)


def _owns_objects(route: Route) -> bool:
    """Whether the route names a tenant's object (another tenant's is then a cell of its own)."""
    return any(f"{{{name}}}" in route.path for name in ("endpoint_id", "delivery_id", "event_id", "redrive_id"))


@pytest.fixture
def world(platform: Platform) -> tuple[Tenant, Tenant, dict[str, str]]:
    assert platform.call("PUT", "/v1/event-types/order.created", platform.admin_token, {}).status == 201
    own, other = _tenant(platform, "own"), _tenant(platform, "other")
    links = {}
    for name, capabilities in LINKS.items():
        opened = platform.call("POST", "/v1/portal-sessions", own.key, {"capabilities": capabilities})
        assert opened.status == 201, opened.body
        links[name] = opened.json()["token"]
    return own, other, links


def test_every_route_with_every_capability_on_own_and_another_tenant_s_objects(
    platform: Platform, world: tuple[Tenant, Tenant, dict[str, str]]
) -> None:
    own, other, links = world
    granted = {name: set(portal.capabilities_of([Capability(c) for c in caps])) for name, caps in LINKS.items()}
    wrong: list[str] = []
    for route in ROUTES:
        needed = ROUTE_CAPABILITIES.get(route.route_key)
        for link, capabilities in granted.items():
            owners = [("own", own), ("other", other)] if _owns_objects(route) else [("own", own)]
            for whose, owner in owners:
                path, body = _request(route, owner, platform)
                answer = platform.call(route.method, path, links[link], body)
                allowed = needed is not None and needed in capabilities
                expected: Callable[[int], bool]
                if not allowed:
                    expected = lambda status: status == 403  # noqa: E731
                elif whose == "other":
                    expected = lambda status: status == 404  # noqa: E731
                else:
                    expected = lambda status: status in SUCCESS  # noqa: E731
                CELLS.append(f"{route.route_key} {link} {whose} {answer.status}")
                if not expected(answer.status):
                    wrong.append(
                        f"{route.route_key} with a {link} link on {whose}: {answer.status} {answer.body[:120]!r}"
                    )
                elif answer.status == 403:
                    assert answer.headers["content-type"] == "application/problem+json", route.route_key
    print(f"\nportal capabilities: {len(CELLS)} cells ({len(ROUTES)} routes x {len(LINKS)} links x own/other)")
    assert not wrong, "\n".join(wrong)


def test_the_table_names_only_routes_the_api_serves() -> None:
    served = {route.route_key for route in ROUTES}
    assert set(ROUTE_CAPABILITIES) <= served


def test_a_link_that_may_manage_still_cannot_expire_the_previous_secret_at_once(
    platform: Platform, world: tuple[Tenant, Tenant, dict[str, str]]
) -> None:
    own, _, links = world
    path = f"/v1/endpoints/{own.endpoint_id}/rotate-secret"
    refused = platform.call("POST", path, links["manage"], {"expire_previous_after_seconds": 0})
    assert refused.status == 403 and "previous secret" in refused.json()["detail"]
    least = int(portal.MIN_PORTAL_SECRET_OVERLAP.total_seconds())
    assert platform.call("POST", path, links["manage"], {"expire_previous_after_seconds": least}).status == 200
    assert platform.call("POST", path, own.key, {"expire_previous_after_seconds": 0}).status == 200  # the tenant can


def test_a_link_minted_without_capabilities_may_view_and_recover_but_not_manage(platform: Platform) -> None:
    _, key = platform.new_tenant()
    opened = platform.call("POST", "/v1/portal-sessions", key, {})
    assert opened.json()["capabilities"] == ["view", "recover"]
    link = opened.json()["token"]
    endpoint = platform.new_endpoint(key, "https://example.com/hooks")["id"]
    assert platform.call("POST", f"/v1/endpoints/{endpoint}/test", link).status == 202
    changed = platform.call("PATCH", f"/v1/endpoints/{endpoint}", link, {"url": "https://attacker.example/"})
    assert changed.status == 403
    assert platform.call("GET", f"/v1/endpoints/{endpoint}", key).json()["url"] == "https://example.com/hooks"


def test_unknown_capabilities_are_refused_when_the_link_is_minted(platform: Platform) -> None:
    _, key = platform.new_tenant()
    for capabilities in (["admin"], [], "manage"):
        refused = platform.call("POST", "/v1/portal-sessions", key, {"capabilities": capabilities})
        assert refused.status == 422, (capabilities, refused.body)


def test_a_link_past_its_expiry_is_refused_by_the_function_even_while_the_authorizer_s_answer_is_cached(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """API Gateway keeps the authorizer's answer for up to a minute (finding 2: an expired link worked that long);
    the functions check the expiry themselves, on every request."""
    _, key = platform.new_tenant()
    link = platform.call("POST", "/v1/portal-sessions", key, {"ttl_seconds": 60}).json()
    cache = gateway.AuthorizerCache(authorizer_cache_seconds(), lambda: 1000.0)  # its answers never age here
    headers = {"authorization": f"Bearer {link['token']}"}
    assert gateway.handle("GET", "/v1/endpoints", "", headers, b"", cache).status == 200  # answered, and cached

    later = utcnow() + timedelta(seconds=61)  # past the link's expiry, within the cached answer's minute
    monkeypatch.setattr(http, "utcnow", lambda: later)
    refused = gateway.handle("GET", "/v1/endpoints", "", headers, b"", cache)

    assert refused.status == 401 and refused.json()["detail"] == portal.EXPIRED
    assert refused.headers["content-type"] == "application/problem+json"


def test_the_link_points_at_the_api_as_deployed_whatever_the_request_s_host_and_scheme_say(platform: Platform) -> None:
    """Finding 3: `Host: evil.example` and `X-Forwarded-Proto: javascript` made `javascript://evil.example/…`."""
    _, key = platform.new_tenant()
    headers = {"host": "evil.example", "x-forwarded-proto": "javascript"}
    opened = platform.call("POST", "/v1/portal-sessions", key, {}, headers=headers).json()
    assert opened["portal_url"] == f"{TEST_API_URL}/portal#token={opened['token']}"
