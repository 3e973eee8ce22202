"""GET /v1/deliveries, /v1/deliveries/{id} and /v1/events/{id}: filters, pagination, attempts, the event as sent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import pytest

from hookrelay import wiring
from hookrelay.adapters import schema
from hookrelay.domain import trace_context
from hookrelay.domain.clock import to_rfc3339
from hookrelay.domain.status import DeliveryStatus
from scripts.create_admin_key import create_admin_key
from tests.support.aws import moto_stack
from tests.support.consumer import Reply, ScriptedConsumer
from tests.support.platform import Platform
from tests.support.records import Seeded, make, seed, store

START = datetime(2030, 1, 1, tzinfo=UTC)
STATUSES = [DeliveryStatus.DEAD, DeliveryStatus.DELIVERED, DeliveryStatus.DELIVERED, DeliveryStatus.CANCELLED]


def page_through(platform: Platform, token: str, limit: int, **filters: str) -> list[dict[str, Any]]:
    """Every delivery the filters select, following next_cursor; asserts each page's size and order."""
    found: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        query = {**filters, "limit": str(limit)} | ({"cursor": cursor} if cursor else {})
        response = platform.call("GET", f"/v1/deliveries?{urlencode(query)}", token)
        assert response.status == 200, response.body
        document = response.json()
        assert len(document["data"]) <= limit
        found.extend(document["data"])
        cursor = document["next_cursor"]
        if cursor is None:
            return found
        assert len(document["data"]) == limit  # only the last page may be short


@pytest.fixture(scope="module")
def platform() -> Iterator[Platform]:
    """One stack for the module: the tests only read the history, or make tenants of their own."""
    with moto_stack() as env:
        yield Platform(env=env, admin_token=create_admin_key(env["API_KEYS_TABLE"]).token)


@pytest.fixture(scope="module")
def history(platform: Platform) -> tuple[str, str, list[str], list[Seeded]]:
    """300 deliveries over two endpoints and 10 hours, every 4th pair sharing a timestamp, plus 5 expired."""
    tenant_id, token = platform.new_tenant()
    endpoints = [platform.new_endpoint(token, "http://127.0.0.1:9/a")["id"] for _ in range(2)]
    seeded = [
        make(tenant_id, endpoints[i % 2], START + timedelta(minutes=2 * (i - i % 4 // 3)), STATUSES[i % 4])
        for i in range(300)
    ]
    expired = [
        make(tenant_id, endpoints[0], START + timedelta(minutes=2 * i + 1), DeliveryStatus.DEAD, expired=True)
        for i in range(5)
    ]
    store(seeded + expired)
    return tenant_id, token, endpoints, seeded


def expected(seeded: list[Seeded], **where: Any) -> list[Seeded]:
    def matches(item: Seeded) -> bool:
        d = item.delivery
        return (
            ("status" not in where or d.status == where["status"])
            and ("endpoint_id" not in where or d.endpoint_id == where["endpoint_id"])
            and ("since" not in where or d.created_at >= where["since"])
            and ("until" not in where or d.created_at < where["until"])
        )

    return [s for s in seeded if matches(s)]


def assert_exactly(found: list[dict[str, Any]], wanted: list[Seeded]) -> None:
    ids = [d["id"] for d in found]
    assert len(ids) == len(set(ids)), "a delivery appeared on two pages"
    assert set(ids) == {s.delivery.id for s in wanted}, "pages left a gap or let a stranger in"
    created = [d["created_at"] for d in found]
    assert created == sorted(created, reverse=True), "not newest first"


def test_unfiltered_pages_have_no_duplicates_no_gaps_and_no_expired(platform: Platform, history) -> None:
    _, token, _, seeded = history
    assert_exactly(page_through(platform, token, limit=37), seeded)


@pytest.mark.parametrize(
    "where",
    [
        {"status": DeliveryStatus.DEAD},
        {"status": DeliveryStatus.DELIVERED},
        {"endpoint": 1},
        {"endpoint": 0, "status": DeliveryStatus.DEAD},
        {"endpoint": 1, "status": DeliveryStatus.DELIVERED},
        {"since": START + timedelta(hours=2), "until": START + timedelta(hours=5, seconds=0.5)},
        {"since": START + timedelta(hours=3), "status": DeliveryStatus.CANCELLED},
        {"until": START + timedelta(hours=1), "endpoint": 0},
    ],
    ids=lambda where: "+".join(sorted(where)),
)
def test_filters_select_exactly_their_deliveries_across_pages(platform: Platform, history, where: dict) -> None:
    _, token, endpoints, seeded = history
    filters = dict(where)
    if "endpoint" in filters:
        filters["endpoint_id"] = endpoints[filters.pop("endpoint")]
    wanted = expected(seeded, **filters)
    assert wanted, "the case must select something"
    query = {k: to_rfc3339(v) if isinstance(v, datetime) else str(v) for k, v in filters.items()}
    assert_exactly(page_through(platform, token, limit=23, **query), wanted)


def test_default_limit(platform: Platform, history) -> None:
    _, token, _, seeded = history
    first = platform.call("GET", "/v1/deliveries", token).json()
    assert len(first["data"]) == 50 and first["next_cursor"]
    assert first["data"][0]["created_at"] == to_rfc3339(max(s.delivery.created_at for s in seeded))


def test_the_event_filter_finds_each_endpoint_s_delivery(platform: Platform) -> None:
    tenant_id, token = platform.new_tenant()
    endpoints = [platform.new_endpoint(token, "http://127.0.0.1:9/a")["id"] for _ in range(2)]
    fanned = seed(tenant_id, endpoints[0], START, DeliveryStatus.DELIVERED)
    other = seed(tenant_id, endpoints[1], START + timedelta(seconds=1), DeliveryStatus.DEAD, event=fanned.event)
    seed(tenant_id, endpoints[1], START + timedelta(seconds=2), DeliveryStatus.DEAD)  # another event
    found = page_through(platform, token, limit=1, event_id=fanned.event.id)
    assert [d["id"] for d in found] == [other.delivery.id, fanned.delivery.id]


def test_summary_fields(platform: Platform, history) -> None:
    _, token, _, seeded = history
    dead = seeded[0].delivery
    [summary] = [d for d in page_through(platform, token, limit=250, status="dead") if d["id"] == dead.id]
    assert summary == {
        "id": dead.id,
        "event_id": dead.event_id,
        "event_type": "order.updated",
        "endpoint_id": dead.endpoint_id,
        "status": "dead",
        "attempt_count": 3,
        "created_at": to_rfc3339(dead.created_at),
        "updated_at": to_rfc3339(dead.updated_at),
        "next_attempt_at": None,
        "completed_at": to_rfc3339(dead.completed_at),
        "replay_of": None,
        "last_status_code": None,
        "last_error": None,
        "parked_at": None,  # never parked: its endpoint's circuit stayed closed
        "dead_reason": None,  # not dead
        "recovered_by": None,  # not dead, so never recovered
        "recovered_at": None,
        # Seeded as a record stored before trace context was kept: its event's trace is derived from the event's id.
        "trace_id": trace_context.derived(dead.event_id).trace_id,
    }


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("limit=0", 422),
        ("limit=251", 422),
        ("limit=ten", 422),
        ("status=failed", 422),
        ("since=yesterday", 422),
        ("since=2030-01-01T00:00:00", 422),  # no offset: ambiguous
        ("since=2030-01-02T00:00:00Z&until=2030-01-01T00:00:00Z", 422),
        ("colour=red", 422),
        ("cursor=not-a-cursor", 400),
        ("cursor=eyJxIjoiMDAiLCJwIjp7fX0", 400),  # well-formed JSON, forged content
    ],
)
def test_bad_filters_and_cursors_are_problems(platform: Platform, history, query: str, status: int) -> None:
    _, token, _, _ = history
    response = platform.call("GET", f"/v1/deliveries?{query}", token)
    assert response.status == status, response.body
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["status"] == status


def test_a_cursor_only_resumes_the_query_that_issued_it(platform: Platform, history) -> None:
    _, token, endpoints, _ = history
    cursor = platform.call("GET", "/v1/deliveries?status=dead&limit=5", token).json()["next_cursor"]
    assert platform.call("GET", f"/v1/deliveries?status=dead&limit=5&cursor={cursor}", token).status == 200
    assert platform.call("GET", f"/v1/deliveries?status=dead&limit=9&cursor={cursor}", token).status == 200
    for other in ("status=cancelled", f"status=dead&endpoint_id={endpoints[0]}", ""):
        response = platform.call("GET", f"/v1/deliveries?{other}&cursor={cursor}", token)
        assert response.status == 400, other


def test_a_delivery_shows_every_attempt_and_its_event_as_sent(platform: Platform, consumer: ScriptedConsumer) -> None:
    tenant_id, token = platform.new_tenant()
    platform.new_endpoint(token, consumer.url)
    consumer.queue([Reply(503, b"<html>upstream down</html>")])
    producer = platform.new_key("producer")
    accepted = platform.call(
        "POST",
        "/v1/events",
        producer,
        {"tenant_id": tenant_id, "type": "order.updated", "data": {"id": 7}, "ordering_key": "order-7"},
    ).json()
    platform.pump()
    [request] = consumer.wait_for(1)

    response = platform.call("GET", f"/v1/deliveries/{accepted['delivery_ids'][0]}", token)
    assert response.status == 200, response.body
    delivery = response.json()
    assert delivery["status"] == "retrying" and delivery["next_attempt_at"] and delivery["completed_at"] is None
    assert delivery["last_status_code"] == 503
    [attempt] = delivery["attempts"]
    assert attempt["number"] == 1 and attempt["status_code"] == 503 and attempt["error"] is None
    assert attempt["response_excerpt"] == "<html>upstream down</html>"
    assert isinstance(attempt["latency_ms"], int) and attempt["started_at"]

    event = platform.call("GET", f"/v1/events/{accepted['event_id']}", token).json()
    assert event["body"].encode() == request.body
    assert json.loads(event["body"]) == {
        "id": event["id"],
        "type": event["type"],
        "timestamp": event["timestamp"],
        "data": event["data"],
        "ordering_key": "order-7",
        "sequence": event["sequence"],
    }
    assert event["data"] == {"id": 7} and event["sequence"] == accepted["sequence"]


def test_expired_records_and_counters_are_not_found(platform: Platform) -> None:
    tenant_id, token = platform.new_tenant()
    endpoint = platform.new_endpoint(token, "http://127.0.0.1:9/a")["id"]
    expired = seed(tenant_id, endpoint, START, DeliveryStatus.DEAD, expired=True)
    assert platform.call("GET", f"/v1/deliveries/{expired.delivery.id}", token).status == 404
    assert platform.call("GET", f"/v1/events/seq%23{tenant_id}%23k", token).status == 404
    assert platform.call("GET", "/v1/events/evt_nope", token).status == 404


def test_a_delivery_being_attempted_says_its_message_is_in_flight_and_when_it_is_back(platform: Platform) -> None:
    """A crashed attempt's delivery reads `attempting` until its message comes back: the API says since when it has
    been in flight and by when it is back on the queue (the claim plus the queue's visibility timeout)."""
    tenant_id, token = platform.new_tenant()
    endpoint = platform.new_endpoint(token, "http://127.0.0.1:9/a")["id"]
    waiting = seed(tenant_id, endpoint, datetime.now(UTC), DeliveryStatus.QUEUED)
    claimed = seed(tenant_id, endpoint, datetime.now(UTC), DeliveryStatus.QUEUED)
    claimed_at = datetime.now(UTC)
    assert wiring.delivery_log_service().deliveries.claim(claimed.delivery.id, tenant_id, 1, claimed_at, claimed_at)

    attempting = platform.call("GET", f"/v1/deliveries/{claimed.delivery.id}", token).json()
    queued = platform.call("GET", f"/v1/deliveries/{waiting.delivery.id}", token).json()

    assert (attempting["status"], attempting["attempt_count"]) == ("attempting", 1)
    back_by = claimed_at + timedelta(seconds=schema.DELIVERY_QUEUE.visibility_timeout_seconds)
    assert attempting["waiting_on"] == {"in_flight": {"since": to_rfc3339(claimed_at), "back_by": to_rfc3339(back_by)}}
    assert (queued["status"], queued["waiting_on"]) == ("queued", None)  # nothing on its record says it is held
