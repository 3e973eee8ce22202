"""Ingest keeps a tenant's endpoint list ENDPOINT_LIST_SECONDS per container (services/endpoint_lists.py), through
the real handlers on moto: the reads it saves, and when a change to the tenant's endpoints applies."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from hookrelay.functions import INGEST
from hookrelay.services.endpoint_lists import ENDPOINT_LIST_SECONDS
from tests.support.aws import ingest_endpoint_lists
from tests.support.consumer import ScriptedConsumer
from tests.support.crash import CrashInjector, injector
from tests.support.platform import Platform

LIST_READ = "ingest: DynamoDB.Query [Endpoints]"


class HeldClock:
    """Ingest's endpoint-list clock, held still by the test and moved on by it (the machine may be slow)."""

    def __init__(self) -> None:
        self.now = 1_000.0
        ingest_endpoint_lists().clock = lambda: self.now


@pytest.fixture
def hook() -> Iterator[CrashInjector]:
    with injector() as installed:
        yield installed


def publish(platform: Platform, producer: str, tenant_id: str, n: int) -> list[str]:
    body: dict[str, Any] = {"tenant_id": tenant_id, "type": "order.updated", "data": {"n": n}}
    accepted = platform.call("POST", "/v1/events", producer, body)
    assert accepted.status == 202, accepted.body
    return list(accepted.json()["delivery_ids"])


def endpoints_of(platform: Platform, token: str, delivery_ids: list[str]) -> set[str]:
    return {platform.call("GET", f"/v1/deliveries/{d}", token).json()["endpoint_id"] for d in delivery_ids}


def test_a_tenants_events_within_the_lifetime_read_its_endpoints_once(
    platform: Platform, consumer: ScriptedConsumer, hook: CrashInjector
) -> None:
    tenant_id, token = platform.new_tenant()
    producer = platform.new_key("producer")
    platform.new_endpoint(token, consumer.url)
    clock = HeldClock()
    hook.arm(frozenset({INGEST.name}), None)
    for n in range(5):
        publish(platform, producer, tenant_id, n)
        clock.now += ENDPOINT_LIST_SECONDS / 10
    clock.now += ENDPOINT_LIST_SECONDS / 2  # past the lifetime of the first read
    publish(platform, producer, tenant_id, 5)
    hook.disarm()
    assert hook.calls.count(LIST_READ) == 2


def test_a_new_endpoint_gets_the_events_accepted_from_the_lifetime_on(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    tenant_id, token = platform.new_tenant()
    producer = platform.new_key("producer")
    first = platform.new_endpoint(token, consumer.url)["id"]
    clock = HeldClock()
    assert endpoints_of(platform, token, publish(platform, producer, tenant_id, 0)) == {first}

    second = platform.new_endpoint(token, f"{consumer.url}/second")["id"]
    clock.now += ENDPOINT_LIST_SECONDS - 0.001
    assert endpoints_of(platform, token, publish(platform, producer, tenant_id, 1)) == {first}  # within: kept list
    clock.now += 0.001
    assert endpoints_of(platform, token, publish(platform, producer, tenant_id, 2)) == {first, second}


def test_an_endpoint_disabled_within_the_lifetime_has_its_deliveries_cancelled_not_sent(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    """The kept list still says enabled: the delivery is queued, and the delivery function, reading the endpoint
    itself, records it cancelled without sending it (as for an event accepted just before the disable)."""
    tenant_id, token = platform.new_tenant()
    producer = platform.new_key("producer")
    endpoint_id = platform.new_endpoint(token, consumer.url)["id"]
    HeldClock()
    publish(platform, producer, tenant_id, 0)
    platform.pump()
    consumer.wait_for(1)

    assert platform.call("POST", f"/v1/endpoints/{endpoint_id}/disable", token).status == 200
    [late] = publish(platform, producer, tenant_id, 1)
    platform.pump()
    assert platform.call("GET", f"/v1/deliveries/{late}", token).json()["status"] == "cancelled"
    assert len(consumer.received) == 1
