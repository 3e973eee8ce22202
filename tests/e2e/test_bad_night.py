"""The bad night, end to end over HTTP on the local stack (fast schedule): one consumer goes down while events for
it arrive in order, another stays healthy. After the recovery every event arrives exactly once, in sequence
order, and the healthy endpoint never noticed (its latency beside the outage is printed, not asserted: timing
targets live in bench/bad_night.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from bench.common import median
from tests.e2e.harness import Consumer, LocalStack, eventually

pytestmark = pytest.mark.e2e

EVENTS = 30
BASELINE_EVENTS = 20
KEY = "account-7"  # one ordering key: the platform numbers its events 1, 2, 3, ...
DRAIN_WAIT = 60.0


def publish_in_order(stack: LocalStack, tenant_id: str, count: int) -> list[tuple[str, float]]:
    published = []
    for n in range(count):
        started = time.time()
        accepted = stack.created(
            "/v1/events",
            stack.producer_key,
            {"tenant_id": tenant_id, "type": "ledger.adjusted", "data": {"n": n}, "ordering_key": KEY},
        )
        published.append((accepted["event_id"], started))
    return published


def latencies(consumer: Consumer, published: list[tuple[str, float]]) -> list[float]:
    accepted = {event["webhook_id"]: event["at"] for event in consumer.received()["events"]}
    return [accepted[event_id] - at for event_id, at in published if event_id in accepted]


def test_an_endpoint_down_all_night_gets_every_event_once_in_order_and_its_neighbour_notices_nothing(
    stack: LocalStack, consumers: Callable[..., Consumer]
) -> None:
    tenant_id, tenant_key = stack.new_tenant("bad night")
    healthy = consumers("healthy")
    down = consumers("down")
    for consumer in (healthy, down):
        endpoint = stack.created("/v1/endpoints", tenant_key, {"url": consumer.url, "event_types": ["ledger.*"]})
        consumer.control(secret=endpoint["secret"])
        if consumer is down:
            down_id = endpoint["id"]

    # The control: both endpoints up, every event to both (the same fan-out as during the night).
    baseline = publish_in_order(stack, tenant_id, BASELINE_EVENTS)
    eventually(lambda: len(latencies(healthy, baseline)) == BASELINE_EVENTS, "the baseline is delivered")
    eventually(lambda: len(latencies(down, baseline)) == BASELINE_EVENTS, "the baseline reaches both")

    down.control(mode="fail")  # 02:00: one consumer goes down while events keep coming, in order
    night = publish_in_order(stack, tenant_id, EVENTS)
    eventually(lambda: len(latencies(healthy, night)) == EVENTS, "the healthy endpoint gets every event meanwhile")
    health = stack.call("GET", f"/v1/endpoints/{down_id}/health", tenant_key).json()
    assert health["circuit"]["state"] == "open" and health["circuit"]["parked"] > 0
    attempts_while_down = len(down.received()["requests"]) - BASELINE_EVENTS

    down.control(mode="ok")  # 08:00: the consumer is back
    every = [event_id for event_id, _ in baseline + night]
    eventually(
        lambda: {e["webhook_id"] for e in down.received()["events"]} >= set(every),
        "every event reaches the recovered consumer",
        timeout=DRAIN_WAIT,
    )

    seen = down.received()
    accepted = [event["webhook_id"] for event in seen["events"]]
    assert accepted == every  # each exactly once (the consumer dedups on webhook-id), in the order they happened
    sequences = [event["payload"]["sequence"] for event in seen["events"]]
    assert sequences == sorted(sequences)
    # A handful of attempts for the whole outage, not one schedule per event.
    assert attempts_while_down < EVENTS
    ratio = median(latencies(healthy, night)) / median(latencies(healthy, baseline))
    print(
        f"\nhealthy p50 beside the outage / beside a healthy endpoint: {ratio:.2f}; attempts while down: "
        f"{attempts_while_down} for {EVENTS} events"
    )
