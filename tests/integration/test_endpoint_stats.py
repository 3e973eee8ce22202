"""GET /v1/endpoints/{id}/stats: per-hour outcomes and latency from the delivery log, a bounded read, per tenant."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from hookrelay import wiring
from hookrelay.domain import delivery_stats
from hookrelay.domain.classification import Outcome
from hookrelay.domain.clock import from_rfc3339, utcnow
from hookrelay.domain.models import Attempt
from hookrelay.domain.status import DeliveryStatus
from tests.support.consumer import ScriptedConsumer
from tests.support.platform import Platform
from tests.support.records import Seeded, make, store


def seeded(tenant_id: str, endpoint_id: str, status: DeliveryStatus, latencies: list[int]) -> Seeded:
    """A delivery created a minute ago, with one attempt a latency each (the last delivers if `status` says so)."""
    at = utcnow() - timedelta(minutes=1)
    made = make(tenant_id, endpoint_id, at, status)
    last = len(latencies) - 1
    attempts = [
        Attempt(
            number=i + 1,
            started_at=at,
            latency_ms=ms,
            status_code=200 if i == last and status is DeliveryStatus.DELIVERED else 500,
            outcome=Outcome.DELIVERED if i == last and status is DeliveryStatus.DELIVERED else Outcome.RETRY,
        )
        for i, ms in enumerate(latencies)
    ]
    delivery = replace(made.delivery, attempts=attempts, attempt_count=len(attempts), completed_at=at, updated_at=at)
    return Seeded(made.event, delivery)


def test_the_current_hour_counts_outcomes_and_latency_percentiles(platform: Platform) -> None:
    tenant_id, token = platform.new_tenant()
    endpoint_id = platform.new_endpoint(token, "https://example.com/hooks")["id"]
    store(
        [
            seeded(tenant_id, endpoint_id, DeliveryStatus.DELIVERED, [100]),
            seeded(tenant_id, endpoint_id, DeliveryStatus.DELIVERED, [400, 200]),
            seeded(tenant_id, endpoint_id, DeliveryStatus.DEAD, [300, 900]),
        ]
    )
    answer = platform.call("GET", f"/v1/endpoints/{endpoint_id}/stats", token)
    assert answer.status == 200, answer.body
    stats: dict[str, Any] = answer.json()
    assert len(stats["hours"]) == delivery_stats.DEFAULT_HOURS
    assert stats["deliveries_read"] == 3 and stats["partial"] is False
    assert stats["max_deliveries_read"] == delivery_stats.MAX_DELIVERIES_READ
    now = stats["hours"][-1]
    assert (now["delivered"], now["failed_attempts"], now["dead"], now["attempts"]) == (2, 3, 1, 5)
    assert now["latency_ms"] == {"p50": 300, "p95": 900, "p99": 900}  # of 100, 200, 300, 400, 900
    assert all(hour["attempts"] == 0 for hour in stats["hours"][:-1])


def test_hours_out_of_range_is_a_problem_with_its_pointer(platform: Platform) -> None:
    _, token = platform.new_tenant()
    endpoint_id = platform.new_endpoint(token, "https://example.com/hooks")["id"]
    for hours in ("0", str(delivery_stats.MAX_HOURS + 1), "x"):
        answer = platform.call("GET", f"/v1/endpoints/{endpoint_id}/stats?hours={hours}", token)
        assert answer.status == 422, answer.body
        assert answer.headers["content-type"] == "application/problem+json"
        assert [e["field"] for e in answer.json()["errors"]] == ["hours"]
    assert platform.call("GET", f"/v1/endpoints/{endpoint_id}/stats?hours=1", token).json()["hours"][0]


def test_another_tenant_s_endpoint_is_not_found(platform: Platform) -> None:
    _, owner = platform.new_tenant("owner")
    _, other = platform.new_tenant("other")
    endpoint_id = platform.new_endpoint(owner, "https://example.com/hooks")["id"]
    assert platform.call("GET", f"/v1/endpoints/{endpoint_id}/stats", other).status == 404
    link = platform.call("POST", "/v1/portal-sessions", other, {"capabilities": ["view"]}).json()["token"]
    assert platform.call("GET", f"/v1/endpoints/{endpoint_id}/stats", link).status == 404


def test_the_read_stops_at_the_cap_and_says_partial(platform: Platform) -> None:
    """At most `cap` deliveries are read, in pages of `page_size`: cap / page_size + 1 log reads at the most."""
    tenant_id, token = platform.new_tenant()
    endpoint_id = platform.new_endpoint(token, "https://example.com/hooks")["id"]
    store([seeded(tenant_id, endpoint_id, DeliveryStatus.DELIVERED, [10]) for _ in range(7)])
    service = wiring.delivery_log_service()
    reads: list[int] = []
    find = service.deliveries.find

    def counted(*args: Any, **kwargs: Any) -> Any:
        page = find(*args, **kwargs)
        reads.append(len(page.deliveries))
        return page

    service.deliveries.find = counted  # type: ignore[method-assign]
    capped = service.stats(tenant_id, endpoint_id, cap=5, page_size=2)
    assert capped.deliveries_read == 5 and capped.partial is True
    assert sum(reads) == 5 and len(reads) <= 5 // 2 + 1
    assert sum(h.delivered for h in capped.hours) == 5
    whole = service.stats(tenant_id, endpoint_id, cap=7, page_size=2)
    assert whole.deliveries_read == 7 and whole.partial is False


def test_the_wait_is_each_delivery_s_creation_to_its_first_attempt_through_the_real_handlers(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    """Two events published and delivered: the hour of their first attempts gives the waits their records show."""
    tenant_id, token = platform.new_tenant()
    endpoint_id = platform.new_endpoint(token, consumer.url)["id"]
    producer = platform.new_key("producer")
    ids = [
        platform.call(
            "POST", "/v1/events", producer, {"tenant_id": tenant_id, "type": "order.paid", "data": {}}
        ).json()["delivery_ids"][0]
        for _ in range(2)
    ]
    platform.pump()
    records = [platform.call("GET", f"/v1/deliveries/{i}", token).json() for i in ids]
    waits = sorted(
        round(
            (from_rfc3339(r["attempts"][0]["started_at"]) - from_rfc3339(r["created_at"])) / timedelta(milliseconds=1)
        )
        for r in records
    )
    hours = platform.call("GET", f"/v1/endpoints/{endpoint_id}/stats?hours=2", token).json()["hours"]
    [waited] = [hour["wait_ms"] for hour in hours if hour["wait_ms"]["p50"] is not None]
    assert waited == {"p50": waits[0], "p95": waits[1], "p99": waits[1]}
