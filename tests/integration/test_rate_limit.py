"""The per-endpoint rate limit on moto (domain/pacing.py): the real handlers, tables and queues, the probe workflow
stepped by hand in virtual time (tests/support/workflow_sim.py), so that every wait for a send slot is virtual and the
run is as long as moto's work, not as the limit's seconds.

The issue's case: 2,000 deliveries (400 by default, below) parked behind an open circuit, drained at a limit of 50
a second. From the attempts' recorded start times (what the endpoint saw, in the virtual clock the service read):
no second holds more than 50 starts (aligned seconds, and any window of one second), every delivery is delivered
once, in order per ordering key, and the drain takes about 2,000 / 50 s.
"""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import boto3
import pytest

from hookrelay.adapters import schema
from hookrelay.adapters.dynamodb import DeliveryTable, EndpointTable
from hookrelay.adapters.schema import RETRY_STATE_MACHINE_ARN
from hookrelay.domain import pacing
from hookrelay.domain.circuit import OPEN_AFTER_FAILURES, CircuitState
from hookrelay.domain.models import Delivery, Endpoint
from hookrelay.domain.queues import DeliveryLane
from hookrelay.domain.status import DeliveryStatus
from local.provision import delivery_queue_urls
from local.sqs_source import poll_once
from scripts.create_admin_key import create_admin_key
from tests.support.aws import ingest_reads_endpoints_again, moto_stack
from tests.support.consumer import Reply, ScriptedConsumer
from tests.support.platform import Platform
from tests.support.workflow_sim import WorkflowSim

SCHEDULE = json.dumps({"name": "rate-test", "gaps": [0, 3, 1, 1], "repeat_every": 120, "horizon": 3600})
LIMIT = 50
# The 2,000 take moto about 4.5 minutes here (some ten AWS calls per delivery at ~15 ms each), so the
# default run drains 400; `RATE_LIMIT_PARKED=2000` runs the full size (bench/README.md has its figures).
PARKED = int(os.environ.get("RATE_LIMIT_PARKED", "400"))
KEYS = 4  # ordering keys, over as many message groups (max_in_flight)


@pytest.fixture
def stack() -> Iterator[tuple[Platform, WorkflowSim]]:
    with moto_stack(execute_state_machine=False, retry_schedule=SCHEDULE) as env:
        platform = Platform(env=env, admin_token=create_admin_key(env["API_KEYS_TABLE"]).token)
        urls = delivery_queue_urls(env)
        sim = WorkflowSim(env[RETRY_STATE_MACHINE_ARN], urls.url(0), env[schema.DEAD_LETTER_QUEUE.env_var])
        sim.install()
        sim.restart_clock()
        yield platform, sim
        sim.uninstall()


def table(env_var: str) -> Any:
    return boto3.resource("dynamodb").Table(os.environ[env_var])


def endpoint_of(tenant_id: str, endpoint_id: str) -> Endpoint:
    endpoint = EndpointTable(table("ENDPOINTS_TABLE")).get(tenant_id, endpoint_id)
    assert endpoint is not None
    return endpoint


def pump(platform: Platform) -> int:
    """Each lane as deployed: a fast lane's batches of ten, a slow lane's of one (domain/queues.py)."""
    urls = delivery_queue_urls(platform.env)
    handled = 0
    for shard in range(urls.shards):
        handled += poll_once(platform.sqs, urls.url(shard, DeliveryLane.FAST))
        slow = urls.url(shard, DeliveryLane.SLOW)
        while poll_once(platform.sqs, slow, batch_size=1):
            handled += 1
    return handled


def run_until(platform: Platform, sim: WorkflowSim, done: Any, rounds: int = 20_000) -> None:
    """Answers in, tasks due out, queues pumped; when nothing moves, virtual time jumps to the next due task."""
    for _ in range(rounds):
        moved = sim.step()
        moved = pump(platform) > 0 or moved
        if done():
            return
        if not moved:
            due = sim.next_due()
            assert due is not None, "nothing left to run, and not done"
            sim.advance(due)
    raise AssertionError("not done within the rounds")


def publish(platform: Platform, producer: str, tenant_id: str, count: int, first: int) -> list[dict[str, Any]]:
    """`count` events in batches of 100, over KEYS ordering keys."""
    results: list[dict[str, Any]] = []
    for start in range(first, first + count, 100):
        items = [
            {"type": "a.b", "ordering_key": f"k{n % KEYS}", "data": {"n": n}}
            for n in range(start, min(start + 100, first + count))
        ]
        answer = platform.call("POST", "/v1/events/batch", producer, {"tenant_id": tenant_id, "events": items})
        assert answer.status == 200, answer.body
        results.extend(answer.json()["results"])
    return results


def starts_in_any_second(starts: list[datetime]) -> int:
    ordered, most, low = sorted(starts), 0, 0
    for high, start in enumerate(ordered):
        while (start - ordered[low]).total_seconds() >= 1:
            low += 1
        most = max(most, high - low + 1)
    return most


def test_a_drain_of_parked_deliveries_holds_the_rate_limit_in_order(
    stack: tuple[Platform, WorkflowSim], consumer: ScriptedConsumer
) -> None:
    platform, sim = stack
    tenant_id, token = platform.new_tenant()
    created = platform.call(
        "POST",
        "/v1/endpoints",
        token,
        {"url": consumer.url, "event_types": ["*"], "max_in_flight": KEYS, "rate_limit_per_second": LIMIT},
    )
    assert created.status == 201, created.body
    assert created.json()["rate_limit_per_second"] == LIMIT
    endpoint_id = created.json()["id"]
    producer = platform.new_key("producer")

    # The outage: first attempts fail until the circuit opens; the rest are parked on arrival.
    consumer.default = Reply(503)
    results = publish(platform, producer, tenant_id, OPEN_AFTER_FAILURES, 0)
    run_until(platform, sim, lambda: endpoint_of(tenant_id, endpoint_id).circuit is CircuitState.OPEN)
    ingest_reads_endpoints_again()  # the rest arrive during the outage, after ingest's kept list has expired
    results += publish(platform, producer, tenant_id, PARKED - OPEN_AFTER_FAILURES, OPEN_AFTER_FAILURES)
    health = platform.call("GET", f"/v1/endpoints/{endpoint_id}/health", token).json()
    assert health["rate_limit_per_second"] == LIMIT and health["backlog"]["parked"] == PARKED

    # Recovery: the probe gets through, the drain releases the lot at the limit.
    consumer.default = Reply(200)
    recovered_at = sim.now
    run_until(platform, sim, lambda: endpoint_of(tenant_id, endpoint_id).circuit is CircuitState.CLOSED)
    drained_in = (sim.now - recovered_at).total_seconds()

    deliveries = DeliveryTable(table("DELIVERIES_TABLE"), table("EVENT_LOG_TABLE"))
    ids = [r["delivery_ids"][0] for r in results]
    ended: list[Delivery] = [d for d in (deliveries.get(i) for i in ids) if d is not None]
    assert len(ended) == PARKED and {d.status for d in ended} == {DeliveryStatus.DELIVERED}
    delivered_starts = [d.attempts[-1].started_at for d in ended]
    all_starts = [a.started_at for d in ended for a in d.attempts if a.started_at >= recovered_at]
    per_second = Counter(int(s.timestamp()) for s in all_starts)
    assert max(per_second.values()) <= LIMIT, per_second.most_common(3)
    assert starts_in_any_second(all_starts) <= LIMIT
    # In order: per ordering key, the sends start in the order the events were numbered.
    by_key: dict[str, list[tuple[datetime, int]]] = defaultdict(list)
    for n, start in enumerate(delivered_starts):
        by_key[f"k{n % KEYS}"].append((start, n))
    for sends in by_key.values():
        assert [n for _, n in sorted(sends)] == [n for _, n in sends]
    # Each delivered once: one 200 per event, none twice.
    webhook_ids = [
        r.headers["webhook-id"] for r, status in zip(consumer.received, consumer.answers, strict=True) if status == 200
    ]
    assert len(webhook_ids) == len(set(webhook_ids)) == PARKED
    # At the limit (less its headroom), not far below it: PARKED / 50 s, plus the probe's and the polls' seconds.
    assert PARKED / LIMIT <= drained_in <= PARKED / LIMIT * (1 + pacing.HEADROOM) + 10, drained_in
    print(
        f"\n{PARKED:,} parked drained at {LIMIT}/s in {drained_in:.1f} virtual s; most starts in an aligned second"
        f" {max(per_second.values())}, in any second {starts_in_any_second(all_starts)}"
    )


def test_a_fast_lane_message_with_no_slot_in_its_budget_waits_in_the_slow_lane_in_order(
    stack: tuple[Platform, WorkflowSim], consumer: ScriptedConsumer
) -> None:
    """The endpoint's slots are taken 3 s ahead (more than a send's budget): the fast lane forwards its messages to the
    slow lane, unattempted and in order, where each takes its slot and is sent once, never handed back to SQS."""
    platform, sim = stack
    tenant_id, token = platform.new_tenant()
    body = {"url": consumer.url, "event_types": ["*"], "max_in_flight": 1, "rate_limit_per_second": 1}
    endpoint_id = platform.call("POST", "/v1/endpoints", token, body).json()["id"]
    producer = platform.new_key("producer")
    taken_until = sim.now.timestamp() + pacing.WAIT_SECONDS + 1
    table("RATE_LIMITS_TABLE").put_item(Item={"id": f"pace#{endpoint_id}", "next_us": round(taken_until * 1e6)})
    results = publish(platform, producer, tenant_id, 3, 0)

    urls = delivery_queue_urls(platform.env)
    shard = endpoint_of(tenant_id, endpoint_id).queue_shard
    assert poll_once(platform.sqs, urls.url(shard, DeliveryLane.FAST)) == 3
    assert consumer.received == []  # all forwarded, none attempted in the fast lane
    while poll_once(platform.sqs, urls.url(shard, DeliveryLane.SLOW), batch_size=1):
        pass

    deliveries = DeliveryTable(table("DELIVERIES_TABLE"), table("EVENT_LOG_TABLE"))
    ended = [deliveries.get(r["delivery_ids"][0]) for r in results]
    assert all(d is not None and d.status is DeliveryStatus.DELIVERED and d.attempt_count == 1 for d in ended)
    starts = [d.attempts[0].started_at.timestamp() for d in ended if d is not None]
    assert starts == sorted(starts) and starts[0] >= taken_until - 0.001  # in order, at the slots taken for them
    assert all(b - a >= 1 for a, b in itertools.pairwise(starts))  # one a second
    assert [r.headers["webhook-id"] for r in consumer.received] == [r["event_id"] for r in results]
