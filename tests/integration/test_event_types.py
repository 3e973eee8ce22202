"""The event-type catalogue through the real authorizer and handlers on moto: admins register, everyone reads,
ingest holds data to the schema (422 with the failing pointer), and the filter rule where it is enforced."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from scripts.create_admin_key import create_admin_key
from tests.support.aws import moto_stack
from tests.support.platform import Platform

ORDER_SCHEMA = {
    "type": "object",
    "required": ["id", "amount"],
    "properties": {"id": {"type": "string"}, "amount": {"type": "integer", "minimum": 0}},
}
ORDER = {"description": "An order was created", "schema": ORDER_SCHEMA, "example": {"id": "o-1", "amount": 250}}


def register(platform: Platform, name: str, body: dict[str, Any] | None = None) -> Any:
    return platform.call("PUT", f"/v1/event-types/{name}", platform.admin_token, body if body is not None else ORDER)


def publish(platform: Platform, token: str, tenant_id: str, event_type: str, data: dict[str, Any]) -> Any:
    return platform.call("POST", "/v1/events", token, {"tenant_id": tenant_id, "type": event_type, "data": data})


def test_an_admin_registers_and_every_key_reads_the_catalogue(platform: Platform) -> None:
    created = register(platform, "order.created")
    assert created.status == 201, created.body
    assert created.json()["schema"] == ORDER_SCHEMA and created.json()["example"] == ORDER["example"]
    replaced = register(platform, "order.created", {**ORDER, "deprecated": True})
    assert replaced.status == 200 and replaced.json()["deprecated"] is True
    assert replaced.json()["created_at"] == created.json()["created_at"]

    _, tenant = platform.new_tenant()
    for token in (tenant, platform.new_key("producer"), platform.admin_token):
        listed = platform.call("GET", "/v1/event-types", token)
        assert listed.status == 200 and [t["name"] for t in listed.json()["data"]] == ["order.created"]
        shown = platform.call("GET", "/v1/event-types/order.created", token)
        assert shown.status == 200 and shown.json()["example"] == ORDER["example"]


def test_the_catalogue_is_listed_by_name_page_by_page(platform: Platform) -> None:
    for name in ("c.type", "a.type", "b.type"):
        assert register(platform, name, {}).status == 201
    _, tenant = platform.new_tenant()
    first = platform.call("GET", "/v1/event-types?limit=2", tenant).json()
    assert [t["name"] for t in first["data"]] == ["a.type", "b.type"] and first["next_cursor"]
    second = platform.call("GET", f"/v1/event-types?limit=2&cursor={first['next_cursor']}", tenant).json()
    assert [t["name"] for t in second["data"]] == ["c.type"] and second["next_cursor"] is None
    assert platform.call("GET", "/v1/event-types?cursor=forged", tenant).status == 400


def test_delete_removes_a_type(platform: Platform) -> None:
    register(platform, "order.created")
    assert platform.call("DELETE", "/v1/event-types/order.created", platform.admin_token).status == 204
    assert platform.call("GET", "/v1/event-types/order.created", platform.admin_token).status == 404
    assert platform.call("DELETE", "/v1/event-types/order.created", platform.admin_token).status == 404


def test_ingest_refuses_data_that_breaks_the_schema_naming_the_pointer(platform: Platform) -> None:
    register(platform, "order.created")
    tenant_id, tenant = platform.new_tenant()
    platform.new_endpoint(tenant, "http://127.0.0.1:9/orders", ["order.*"])
    producer = platform.new_key("producer")

    refused = publish(platform, producer, tenant_id, "order.created", {"id": "o-1", "amount": -5})
    assert refused.status == 422 and refused.headers["content-type"] == "application/problem+json"
    assert refused.json()["errors"] == [{"pointer": "/data/amount", "detail": "must be bigger than or equal to 0"}]
    missing = publish(platform, producer, tenant_id, "order.created", {"id": "o-1"})
    assert missing.status == 422 and missing.json()["errors"][0]["pointer"] == "/data"

    accepted = publish(platform, producer, tenant_id, "order.created", {"id": "o-1", "amount": 5})
    assert accepted.status == 202 and len(accepted.json()["delivery_ids"]) == 1
    unchecked = publish(platform, producer, tenant_id, "order.shipped", {"anything": ["goes"]})
    assert unchecked.status == 202  # not registered: not checked


def test_a_refused_event_stores_nothing(platform: Platform) -> None:
    register(platform, "order.created")
    tenant_id, tenant = platform.new_tenant()
    platform.new_endpoint(tenant, "http://127.0.0.1:9/orders", ["order.*"])
    producer = platform.new_key("producer")
    assert publish(platform, producer, tenant_id, "order.created", {"amount": "x"}).status == 422
    assert platform.call("GET", "/v1/deliveries", tenant).json()["data"] == []


@pytest.mark.parametrize(
    ("body", "pointer"),
    [
        (
            {"schema": {"properties": {"code": {"type": "string", "pattern": "^(a+)+$"}}}},
            "/schema/properties/code/pattern",
        ),
        ({"schema": {"$ref": "https://example.com/s.json"}}, "/schema/$ref"),
        ({"schema": {"allOf": [{"$ref": "#"}]}}, "/schema"),
        ({"schema": {"type": "money"}}, "/schema/type"),
        ({"schema": ORDER_SCHEMA, "example": {"id": 7, "amount": 1}}, "/example/id"),
    ],
)
def test_unsafe_or_invalid_definitions_are_refused_with_pointers(
    platform: Platform, body: dict[str, Any], pointer: str
) -> None:
    refused = register(platform, "order.created", body)
    assert refused.status == 422, refused.body
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.json()["errors"][0]["pointer"].startswith(pointer)
    assert platform.call("GET", "/v1/event-types/order.created", platform.admin_token).status == 404


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"\xff\xfe not utf-8", 400),
        (b'{"schema": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400),  # nested past the parser: malformed
        ({"schema": {"enum": ["x" * 1000] * 40}}, 422),  # over the schema's size cap
        ({"schema": {"type": "object"}, "extra": 1}, 422),
        ({"description": "x" * 1001}, 422),
        ({"example": {"big": "x" * 20_000}}, 422),
        (b"x" * 300_000, 413),
    ],
)
def test_hostile_bodies_are_problem_details(platform: Platform, body: Any, status: int) -> None:
    refused = register(platform, "order.created", body)
    assert refused.status == status, refused.body
    assert refused.headers["content-type"] == "application/problem+json"


def test_a_type_name_with_a_wildcard_is_refused(platform: Platform) -> None:
    assert register(platform, "order.*", {}).status == 422


# --- The filter rule, where the deployment enforces it ---


@pytest.fixture
def enforced() -> Iterator[Platform]:
    with moto_stack(enforce_event_catalogue=True) as env:
        yield Platform(env=env, admin_token=create_admin_key(env["API_KEYS_TABLE"]).token)


def endpoint(platform: Platform, token: str, filters: list[str]) -> Any:
    return platform.call("POST", "/v1/endpoints", token, {"url": "http://127.0.0.1:9/x", "event_types": filters})


def test_enforced_a_filter_matching_no_registered_type_is_refused(enforced: Platform) -> None:
    _, tenant = enforced.new_tenant()
    assert endpoint(enforced, tenant, ["invoice.*"]).status == 201  # the catalogue is empty: nothing to hold to
    register(enforced, "order.created")
    refused = endpoint(enforced, tenant, ["order.*", "invoice.*"])
    assert refused.status == 422 and "'invoice.*'" in refused.json()["detail"]
    assert refused.json()["errors"] == [{"pointer": "/event_types/1", "detail": "matches no registered event type"}]
    created = endpoint(enforced, tenant, ["order.*", "*.created"])
    assert created.status == 201
    changed = enforced.call("PATCH", f"/v1/endpoints/{created.json()['id']}", tenant, {"event_types": ["invoice.paid"]})
    assert changed.status == 422
    assert enforced.call("GET", f"/v1/endpoints/{created.json()['id']}", tenant).json()["event_types"] == [
        "order.*",
        "*.created",
    ]


def test_not_enforced_any_filter_is_accepted(platform: Platform) -> None:
    register(platform, "order.created")
    _, tenant = platform.new_tenant()
    assert endpoint(platform, tenant, ["invoice.*"]).status == 201


def test_a_batch_refuses_only_the_events_that_break_their_schema_naming_each_pointer(platform: Platform) -> None:
    register(platform, "order.created")
    tenant_id, tenant = platform.new_tenant()
    platform.new_endpoint(tenant, "http://127.0.0.1:9/orders", ["order.*"])
    producer = platform.new_key("producer")
    events = [
        {"type": "order.created", "data": {"id": "o-1", "amount": 5}},
        {"type": "order.created", "data": {"id": "o-2", "amount": -5}},
        {"type": "order.shipped", "data": {"anything": ["goes"]}},
    ]
    answer = platform.call("POST", "/v1/events/batch", producer, {"tenant_id": tenant_id, "events": events})
    assert answer.status == 200
    results = answer.json()["results"]
    assert [r["status"] for r in results] == [202, 422, 202]
    assert results[1]["errors"] == [{"pointer": "/events/1/data/amount", "detail": "must be bigger than or equal to 0"}]
    stored = platform.call("GET", "/v1/deliveries", tenant).json()["data"]
    assert sorted(d["event_id"] for d in stored) == sorted([results[0]["event_id"], results[2]["event_id"]])


def test_an_event_matching_nothing_with_a_type_unknown_to_the_catalogue_is_accepted_with_a_warning(
    platform: Platform,
) -> None:
    register(platform, "order.created")
    tenant_id, tenant = platform.new_tenant()
    platform.new_endpoint(tenant, "http://127.0.0.1:9/orders", ["order.*"])
    producer = platform.new_key("producer")

    typo = publish(platform, producer, tenant_id, "oder.created", {"id": "o-1", "amount": 5})
    assert typo.status == 202 and typo.json()["delivery_ids"] == []
    [warning] = typo.json()["warnings"]
    assert warning["code"] == "unknown_event_type" and warning["detail"].endswith("did you mean order.created?")

    matched = publish(platform, producer, tenant_id, "order.shipped", {})  # unregistered, but an endpoint takes it
    assert matched.status == 202 and "warnings" not in matched.json()
    registered = publish(platform, producer, tenant_id, "order.created", {"id": "o-1", "amount": 5})
    assert "warnings" not in registered.json()

    events = [{"type": "oder.created", "data": {}}, {"type": "order.created", "data": {"id": "o-2", "amount": 1}}]
    batch = platform.call("POST", "/v1/events/batch", producer, {"tenant_id": tenant_id, "events": events})
    first, second = batch.json()["results"]
    assert [w["code"] for w in first["warnings"]] == ["unknown_event_type"] and "warnings" not in second
