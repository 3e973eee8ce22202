"""The delivery queues on moto: each endpoint's messages on its own shard's queues, probes and drains on the slow lane,
retries on the fast lane of the delivery's shard, and a deployment's shards raised with nothing moved or lost."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from hookrelay.adapters import schema
from hookrelay.adapters.dynamodb import EndpointTable
from hookrelay.domain.circuit import OPEN_AFTER_FAILURES, CircuitState
from hookrelay.domain.models import Endpoint
from hookrelay.domain.queues import DeliveryLane
from local.provision import delivery_queue_urls
from local.sqs_source import invoke_batch, queue_arn_of, receive
from scripts.create_admin_key import create_admin_key
from tests.support.aws import grow_shards, ingest_reads_endpoints_again, moto_stack
from tests.support.consumer import Reply, ScriptedConsumer
from tests.support.platform import Platform
from tests.support.pump import wait_until

# Retries and probes seconds apart, so that a workflow's next send comes within a test.
SCHEDULE = json.dumps({"name": "queues-test", "gaps": [0, 1, 1, 1], "repeat_every": 3, "horizon": 120})
WAIT_SECONDS = 60.0


@pytest.fixture
def platform() -> Iterator[Platform]:
    with moto_stack(retry_schedule=SCHEDULE, shards=2) as env:
        yield Platform(env=env, admin_token=create_admin_key(env["API_KEYS_TABLE"]).token)


def stored_endpoint(platform: Platform, tenant_id: str, endpoint_id: str) -> Endpoint:
    table = boto3.resource("dynamodb").Table(platform.env[schema.ENDPOINTS.env_var])
    endpoint = EndpointTable(table).get(tenant_id, endpoint_id)
    assert endpoint is not None
    return endpoint


def endpoint_on_shard(platform: Platform, tenant_id: str, token: str, url: str, shard: int) -> tuple[Endpoint, str]:
    """A new endpoint that was given `shard` (endpoints are made until one is), and the one event type it takes:
    each endpoint made on the way takes a type of its own, so none of them receives the others' events."""
    for n in range(40):
        event_type = f"shard{shard}.try{n}"
        made = platform.new_endpoint(token, url, [event_type])
        endpoint = stored_endpoint(platform, tenant_id, made["id"])
        if endpoint.queue_shard == shard:
            ingest_reads_endpoints_again()  # the tenant's events go to it from ENDPOINT_LIST_SECONDS after its creation
            return endpoint, event_type
    raise AssertionError(f"no endpoint was given shard {shard} in 40 tries")


def publish(platform: Platform, producer: str, tenant_id: str, event_type: str, n: int, key: str | None = None) -> str:
    body: dict[str, Any] = {"tenant_id": tenant_id, "type": event_type, "data": {"n": n}}
    if key:
        body["ordering_key"] = key
    accepted = platform.call("POST", "/v1/events", producer, body)
    assert accepted.status == 202, accepted.body
    [delivery_id] = accepted.json()["delivery_ids"]
    return str(delivery_id)


def waiting(platform: Platform, url: str) -> int:
    attributes = platform.sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def waiting_by_queue(platform: Platform) -> dict[str, int]:
    return {url: waiting(platform, url) for url in delivery_queue_urls(platform.env).all()}


class RecordingPump:
    """The delivery queues' event sources, one poll of each at a time, noting which queue each message came from."""

    def __init__(self, platform: Platform) -> None:
        self.platform = platform
        self.seen: list[tuple[str, dict[str, Any]]] = []  # (queue URL, message body)

    def once(self) -> int:
        handled = 0
        sqs = self.platform.sqs
        for url in delivery_queue_urls(self.platform.env).all():
            messages = receive(sqs, url, batch_size=schema.SQS_MAX_BATCH, wait_seconds=0)
            if messages:
                self.seen += [(url, json.loads(m["Body"])) for m in messages]
                invoke_batch(sqs, url, queue_arn_of(sqs, url), messages, "delivery")
                handled += len(messages)
        return handled

    def until(self, condition: Any, what: str) -> None:
        deadline = time.monotonic() + WAIT_SECONDS
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"gave up waiting for {what}")
            if not self.once():
                time.sleep(0.05)


def test_an_endpoints_messages_land_on_its_own_shards_fast_lane(platform: Platform, consumer: ScriptedConsumer) -> None:
    tenant_id, token = platform.new_tenant()
    producer = platform.new_key("producer")
    queues = delivery_queue_urls(platform.env)
    for shard in range(queues.shards):
        _, event_type = endpoint_on_shard(platform, tenant_id, token, consumer.url, shard)
        for n in range(3):
            publish(platform, producer, tenant_id, event_type, n)

        expected = {url: 0 for url in queues.all()} | {queues.url(shard, DeliveryLane.FAST): 3}
        assert waiting_by_queue(platform) == expected, f"shard {shard}"
        assert platform.pump() == 3
    assert len(consumer.received) == 3 * queues.shards


def test_probes_and_drains_go_to_the_slow_lane_of_the_endpoints_shard(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    tenant_id, token = platform.new_tenant()
    producer = platform.new_key("producer")
    endpoint, event_type = endpoint_on_shard(platform, tenant_id, token, consumer.url, 1)
    queues = delivery_queue_urls(platform.env)
    consumer.default = Reply(503)
    pump = RecordingPump(platform)
    for n in range(OPEN_AFTER_FAILURES):
        publish(platform, producer, tenant_id, event_type, n)
    pump.once()
    assert stored_endpoint(platform, tenant_id, endpoint.id).circuit is CircuitState.OPEN
    for n in range(OPEN_AFTER_FAILURES, OPEN_AFTER_FAILURES + 4):  # parked on arrival: released by the drain
        publish(platform, producer, tenant_id, event_type, n)

    consumer.default = Reply(200)
    pump.until(lambda: stored_endpoint(platform, tenant_id, endpoint.id).circuit is CircuitState.CLOSED, "the close")

    commands = [url for url, body in pump.seen if "circuit" in body]
    drained = [url for url, body in pump.seen if body.get("via") == "drain"]
    first_attempts = [url for url, body in pump.seen if "circuit" not in body and "via" not in body]
    assert {body["circuit"]["kind"] for _, body in pump.seen if "circuit" in body} >= {"probe", "drain"}
    assert len(drained) >= 3  # one of the parked deliveries may be the probe itself
    assert set(commands) == set(drained) == {queues.url(1, DeliveryLane.SLOW)}
    assert set(first_attempts) == {queues.url(1, DeliveryLane.FAST)}


def test_a_retry_workflows_attempt_goes_to_the_fast_lane_its_ticket_names(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    tenant_id, token = platform.new_tenant()
    producer = platform.new_key("producer")
    endpoint, event_type = endpoint_on_shard(platform, tenant_id, token, consumer.url, 1)
    queues = delivery_queue_urls(platform.env)
    consumer.queue([Reply(500)])
    publish(platform, producer, tenant_id, event_type, 0)
    assert (
        platform.pump(max_batches=1) == 1
    )  # attempt 1 fails: the workflow starts with its shard (one round: its retry is due soon)

    retry_lane = queues.url(1, DeliveryLane.FAST)
    wait_until(lambda: waiting(platform, retry_lane) == 1, "the workflow's attempt on shard 1's fast lane")
    [message] = receive(platform.sqs, retry_lane, batch_size=1, wait_seconds=0)
    body = json.loads(message["Body"])
    assert body["attempt"] == 2 and "task_token" in body and body["endpoint_id"] == endpoint.id
    assert sum(waiting_by_queue(platform).values()) == 1  # no other queue got it
    invoke_batch(platform.sqs, retry_lane, queue_arn_of(platform.sqs, retry_lane), [message], "delivery")
    assert [r.path for r in consumer.received] == ["/hook", "/hook"]


@pytest.fixture
def one_shard() -> Iterator[Platform]:
    with moto_stack(shards=1) as env:
        yield Platform(env=env, admin_token=create_admin_key(env["API_KEYS_TABLE"]).token)


def numbers(consumer: ScriptedConsumer, path: str) -> list[int]:
    return [json.loads(r.body)["data"]["n"] for r in consumer.received if r.path == path]


def test_raising_the_shards_keeps_an_endpoints_messages_on_its_shard_in_order_and_loses_none(
    one_shard: Platform, consumer: ScriptedConsumer
) -> None:
    platform = one_shard
    tenant_id, token = platform.new_tenant()
    producer = platform.new_key("producer")
    old = platform.new_endpoint(token, f"{consumer.url}/old", ["old.event"])
    before, after = 5, 5
    for n in range(before):  # queued before the change, not yet delivered
        publish(platform, producer, tenant_id, "old.event", n, key="k")

    platform.env = grow_shards(platform.env, 3)
    queues = delivery_queue_urls(platform.env)
    assert queues.shards == 3
    for n in range(before, before + after):  # after it
        publish(platform, producer, tenant_id, "old.event", n, key="k")
    _, new_type = endpoint_on_shard(platform, tenant_id, token, f"{consumer.url}/new", 2)  # only new ones spread
    for n in range(3):
        publish(platform, producer, tenant_id, new_type, n)

    assert stored_endpoint(platform, tenant_id, old["id"]).queue_shard == 0
    old_lane, new_lane = queues.url(0, DeliveryLane.FAST), queues.url(2, DeliveryLane.FAST)
    assert waiting_by_queue(platform) == {url: 0 for url in queues.all()} | {old_lane: before + after, new_lane: 3}
    while platform.pump():
        pass
    assert numbers(consumer, "/hook/old") == list(range(before + after))  # all of them, once each, in order
    assert sorted(numbers(consumer, "/hook/new")) == [0, 1, 2]  # no ordering key: each once, its groups at once
