"""Who may call what: bearer keys checked by the real authorizer, roles by the handlers, tenants isolated."""

from __future__ import annotations

import pytest

from tests.support.consumer import ScriptedConsumer
from tests.support.platform import Platform


def test_no_key_is_401_and_a_wrong_key_403(platform: Platform) -> None:
    # API Gateway's own refusals, made before any function runs, in its own shape (not problem details).
    missing = platform.call("GET", "/v1/endpoints", None)
    assert (missing.status, missing.json()) == (401, {"message": "Unauthorized"})
    for token in ("hrk_key_00000000000000000000000000_" + "x" * 43, "not-even-a-key"):
        refused = platform.call("GET", "/v1/endpoints", token)
        assert (refused.status, refused.json()) == (403, {"message": "Forbidden"})


def test_a_revoked_key_is_refused_at_once(platform: Platform) -> None:
    created = platform.call("POST", "/v1/api-keys", platform.admin_token, {"role": "producer"}).json()
    assert platform.call("POST", "/v1/events", created["token"], {}).status == 422  # authenticated, bad body
    assert platform.call("DELETE", f"/v1/api-keys/{created['key_id']}", platform.admin_token).status == 204
    assert platform.call("POST", "/v1/events", created["token"], {}).status == 403
    assert platform.call("DELETE", "/v1/api-keys/key_nope", platform.admin_token).status == 404


@pytest.mark.parametrize(
    ("method", "path", "role"),
    [
        ("POST", "/v1/tenants", "producer"),
        ("POST", "/v1/api-keys", "producer"),
        ("POST", "/v1/events", "tenant"),
        ("POST", "/v1/events", "admin"),
        ("GET", "/v1/endpoints", "producer"),
        ("POST", "/v1/endpoints", "admin"),
        ("PUT", "/v1/event-types/order.created", "tenant"),
        ("PUT", "/v1/event-types/order.created", "producer"),
        ("DELETE", "/v1/event-types/order.created", "tenant"),
        ("DELETE", "/v1/event-types/order.created", "producer"),
        ("POST", "/v1/portal-sessions", "producer"),
    ],
)
def test_roles_are_enforced_per_route(platform: Platform, method: str, path: str, role: str) -> None:
    _, tenant_token = platform.new_tenant()
    token = {"producer": platform.new_key("producer"), "tenant": tenant_token, "admin": platform.admin_token}[role]
    response = platform.call(method, path, token, {"name": "x", "role": "admin", "url": "http://127.0.0.1/x"})
    assert response.status == 403
    assert response.headers["content-type"] == "application/problem+json"


def test_invalid_role_is_422(platform: Platform) -> None:
    response = platform.call("POST", "/v1/api-keys", platform.admin_token, {"role": "tenant:someone"})
    assert response.status == 422


def test_a_tenant_key_needs_an_existing_tenant(platform: Platform) -> None:
    unknown = platform.call(
        "POST", "/v1/api-keys", platform.admin_token, {"role": "tenant:ten_01JDZ3B8Q9XH7K2M4N6P8R0S1T"}
    )
    assert unknown.status == 422 and "no tenant" in unknown.json()["detail"]
    tenant_id, _ = platform.new_tenant()
    second = platform.call("POST", "/v1/api-keys", platform.admin_token, {"role": f"tenant:{tenant_id}"})
    assert second.status == 201
    assert platform.call("GET", "/v1/endpoints", second.json()["token"]).status == 200


def test_endpoint_secret_is_shown_only_at_creation(platform: Platform, consumer: ScriptedConsumer) -> None:
    _, token = platform.new_tenant()
    created = platform.new_endpoint(token, consumer.url, ["order.*"])
    assert created["secret"].startswith("whsec_")
    fetched = platform.call("GET", f"/v1/endpoints/{created['id']}", token)
    assert fetched.status == 200
    assert "secret" not in fetched.json() and created["secret"] not in fetched.body.decode()
    listed = platform.call("GET", "/v1/endpoints", token)
    assert [e["id"] for e in listed.json()["data"]] == [created["id"]]
    assert created["secret"] not in listed.body.decode()


def test_another_tenants_endpoint_is_404(platform: Platform, consumer: ScriptedConsumer) -> None:
    _, token_a = platform.new_tenant("a")
    _, token_b = platform.new_tenant("b")
    endpoint_a = platform.new_endpoint(token_a, consumer.url)
    assert platform.call("GET", f"/v1/endpoints/{endpoint_a['id']}", token_b).status == 404
    assert platform.call("GET", "/v1/endpoints", token_b).json()["data"] == []


def test_endpoint_urls_are_validated(platform: Platform) -> None:
    _, token = platform.new_tenant()
    bad = platform.call("POST", "/v1/endpoints", token, {"url": "ftp://x", "event_types": ["*"]})
    assert bad.status == 422
    bad_filter = platform.call("POST", "/v1/endpoints", token, {"url": "http://127.0.0.1/x", "event_types": ["a b"]})
    assert bad_filter.status == 422


def test_unknown_route_is_404(platform: Platform) -> None:
    response = platform.call("GET", "/v1/nothing-here", platform.admin_token)
    assert response.status == 404


@pytest.mark.parametrize("role", ["admin", "producer", "tenant"])
def test_every_role_reads_the_event_type_catalogue(platform: Platform, role: str) -> None:
    assert platform.call("PUT", "/v1/event-types/order.created", platform.admin_token, {}).status == 201
    _, tenant_token = platform.new_tenant()
    token = {"producer": platform.new_key("producer"), "tenant": tenant_token, "admin": platform.admin_token}[role]
    assert platform.call("GET", "/v1/event-types", token).status == 200
    assert platform.call("GET", "/v1/event-types/order.created", token).status == 200
    assert platform.call("GET", "/v1/event-types", None).status == 401
