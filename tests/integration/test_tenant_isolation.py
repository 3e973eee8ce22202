"""Tenant A can neither read, replay, redrive nor test tenant B's objects: each answers 404, never 403."""

from __future__ import annotations

from datetime import timedelta

from hookrelay.domain.clock import to_rfc3339, utcnow
from hookrelay.domain.status import DeliveryStatus
from tests.support.platform import Platform
from tests.support.records import seed


def test_another_tenant_s_objects_are_not_found(platform: Platform) -> None:
    b_tenant, b_token = platform.new_tenant("b")
    b_endpoint = platform.new_endpoint(b_token, "http://127.0.0.1:9/b")["id"]
    b_dead = seed(b_tenant, b_endpoint, utcnow() - timedelta(hours=1), DeliveryStatus.DEAD)
    window = {"since": to_rfc3339(utcnow() - timedelta(days=1))}
    b_redrive = platform.call("POST", f"/v1/endpoints/{b_endpoint}/redrive", b_token, window).json()["redrive_id"]
    _, a_token = platform.new_tenant("a")

    for method, path, body in (
        ("GET", f"/v1/deliveries/{b_dead.delivery.id}", None),
        ("POST", f"/v1/deliveries/{b_dead.delivery.id}/replay", None),
        ("GET", f"/v1/events/{b_dead.event.id}", None),
        ("POST", f"/v1/endpoints/{b_endpoint}/redrive", window),
        ("POST", f"/v1/endpoints/{b_endpoint}/test", None),
        ("GET", f"/v1/redrives/{b_redrive}", None),
    ):
        response = platform.call(method, path, a_token, body)
        assert response.status == 404, (method, path, response.body)
        assert response.headers["content-type"] == "application/problem+json"
        assert platform.call(method, path, b_token, body).status in (200, 202), (method, path)


def test_the_log_never_lists_another_tenant_s_deliveries(platform: Platform) -> None:
    b_tenant, b_token = platform.new_tenant("b")
    b_endpoint = platform.new_endpoint(b_token, "http://127.0.0.1:9/b")["id"]
    b_dead = seed(b_tenant, b_endpoint, utcnow() - timedelta(hours=1), DeliveryStatus.DEAD)
    _, a_token = platform.new_tenant("a")

    for query in ("", "status=dead"):
        listed = platform.call("GET", f"/v1/deliveries?{query}", a_token)
        assert listed.status == 200 and listed.json() == {"data": [], "next_cursor": None}, query
    # Filtering by B's endpoint or event is reading them: 404, and no cursor positioned on B's records.
    for query in (f"endpoint_id={b_endpoint}", f"event_id={b_dead.event.id}", f"endpoint_id={b_endpoint}&limit=1"):
        refused = platform.call("GET", f"/v1/deliveries?{query}", a_token)
        assert refused.status == 404 and b_dead.delivery.id not in refused.body.decode(), query
    for query in ("", "status=dead", f"endpoint_id={b_endpoint}", f"event_id={b_dead.event.id}"):
        assert [d["id"] for d in platform.call("GET", f"/v1/deliveries?{query}", b_token).json()["data"]] == [
            b_dead.delivery.id
        ]


def test_a_cursor_cannot_cross_tenants(platform: Platform) -> None:
    b_tenant, b_token = platform.new_tenant("b")
    b_endpoint = platform.new_endpoint(b_token, "http://127.0.0.1:9/b")["id"]
    for minutes in range(3):
        seed(b_tenant, b_endpoint, utcnow() - timedelta(minutes=minutes), DeliveryStatus.DEAD)
    cursor = platform.call("GET", "/v1/deliveries?limit=1", b_token).json()["next_cursor"]
    _, a_token = platform.new_tenant("a")
    assert platform.call("GET", f"/v1/deliveries?limit=1&cursor={cursor}", a_token).status == 400
    assert platform.call("GET", f"/v1/deliveries?limit=1&cursor={cursor}", b_token).status == 200


def test_tenant_routes_refuse_admin_and_producer_keys(platform: Platform) -> None:
    producer = platform.new_key("producer")
    for token in (platform.admin_token, producer):
        assert platform.call("GET", "/v1/deliveries", token).status == 403


def test_the_event_type_catalogue_is_the_platform_s_and_no_tenant_changes_it(platform: Platform) -> None:
    """One catalogue for every tenant (it holds producers' data to schemas): tenants read it, only admins write."""
    assert platform.call("PUT", "/v1/event-types/order.created", platform.admin_token, {}).status == 201
    _, a_token = platform.new_tenant("a")
    _, b_token = platform.new_tenant("b")
    for token in (a_token, b_token):
        assert [t["name"] for t in platform.call("GET", "/v1/event-types", token).json()["data"]] == ["order.created"]
        assert platform.call("PUT", "/v1/event-types/order.created", token, {"deprecated": True}).status == 403
        assert platform.call("DELETE", "/v1/event-types/order.created", token).status == 403
    assert platform.call("GET", "/v1/event-types/order.created", a_token).json()["deprecated"] is False


def test_a_portal_session_sees_only_its_own_tenant(platform: Platform) -> None:
    _, a_token = platform.new_tenant("a")
    _, b_token = platform.new_tenant("b")
    b_endpoint = platform.new_endpoint(b_token, "https://example.com/b")
    opened = platform.call("POST", "/v1/portal-sessions", a_token, {"capabilities": ["manage"]})  # may disable
    assert opened.status == 201
    a_portal = opened.json()["token"]
    assert platform.call("GET", "/v1/endpoints", a_portal).json()["data"] == []
    assert platform.call("GET", f"/v1/endpoints/{b_endpoint['id']}", a_portal).status == 404
    assert platform.call("POST", f"/v1/endpoints/{b_endpoint['id']}/disable", a_portal).status == 404
