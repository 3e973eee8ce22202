"""A duplicate SQS message neither sends nor records twice (as SQS FIFO hands them out); every attempt is recorded in
full."""

from __future__ import annotations

import os
import threading
import time

import boto3
import pytest
from moto.dynamodb.models import DynamoDBBackend

from hookrelay.adapters import schema
from hookrelay.adapters.dynamodb import DeliveryTable
from hookrelay.domain.status import LATE_CLAIM_AFTER
from local.lambda_runtime import invoke
from local.sqs_source import to_record
from tests.support.aws import ATTEMPT_TIMEOUT_IN_TESTS
from tests.support.consumer import Reply, ScriptedConsumer
from tests.support.platform import Platform


def deliveries() -> DeliveryTable:
    return DeliveryTable(
        boto3.resource("dynamodb").Table(os.environ["DELIVERIES_TABLE"]),
        boto3.resource("dynamodb").Table(os.environ["EVENT_LOG_TABLE"]),
    )


def publish_one(platform: Platform, consumer: ScriptedConsumer) -> tuple[str, str]:
    tenant_id, token = platform.new_tenant()
    platform.new_endpoint(token, consumer.url)
    producer = platform.new_key("producer")
    accepted = platform.call("POST", "/v1/events", producer, {"tenant_id": tenant_id, "type": "a.b", "data": {"k": 1}})
    [delivery_id] = accepted.json()["delivery_ids"]
    return tenant_id, delivery_id


def receive_all(platform: Platform) -> list[dict]:
    received = platform.receive_delivery(schema.SQS_MAX_BATCH)
    return received[1] if received else []


def test_the_same_message_twice_posts_once(platform: Platform, consumer: ScriptedConsumer) -> None:
    tenant_id, delivery_id = publish_one(platform, consumer)
    [message] = receive_all(platform)
    record = to_record(message, "arn:aws:sqs:us-east-1:123456789012:q")

    assert invoke("delivery", {"Records": [record]}) == {"batchItemFailures": []}
    assert invoke("delivery", {"Records": [record]}) == {"batchItemFailures": []}

    assert len(consumer.received) == 1
    delivery = deliveries().get(delivery_id, tenant_id)
    assert delivery.status == "delivered"
    assert [a.number for a in delivery.attempts] == [1]


@pytest.fixture
def atomic_conditional_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """DynamoDB evaluates a condition and writes atomically; moto's in-process backend does not lock
    between threads, so restore that guarantee (and only that) for the concurrency test."""
    lock = threading.Lock()
    for name in ("update_item", "put_item"):
        original = getattr(DynamoDBBackend, name)

        def locked(self, *args, _original=original, **kwargs):
            with lock:
                return _original(self, *args, **kwargs)

        monkeypatch.setattr(DynamoDBBackend, name, locked)


@pytest.mark.usefixtures("atomic_conditional_writes")
def test_duplicates_arriving_while_a_long_first_attempt_is_in_flight_post_once(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    """A first attempt is made unclaimed (SQS FIFO never hands one message to two workers at once: a duplicate comes
    back only after the invocation holding it ended, and then reads the attempt recorded, as above); one that runs
    past LATE_CLAIM_AFTER is claimed while it waits, and that claim keeps any duplicate from sending it again."""
    # In flight past the late claim, answered within the tests' attempt timeout.
    consumer.default = Reply(200, delay=(LATE_CLAIM_AFTER.total_seconds() + ATTEMPT_TIMEOUT_IN_TESTS) / 2)
    tenant_id, delivery_id = publish_one(platform, consumer)
    [message] = receive_all(platform)
    record = to_record(message, "arn:aws:sqs:us-east-1:123456789012:q")

    first = threading.Thread(target=invoke, args=("delivery", {"Records": [record]}))
    first.start()
    for _ in range(200):  # until the late claim shows (a wait, not a timing assertion)
        if deliveries().get(delivery_id, tenant_id).status == "attempting":
            break
        time.sleep(0.05)
    assert deliveries().get(delivery_id, tenant_id).status == "attempting"
    duplicates = [threading.Thread(target=invoke, args=("delivery", {"Records": [record]})) for _ in range(2)]
    for worker in duplicates:
        worker.start()
    for worker in [first, *duplicates]:
        worker.join(timeout=30)

    assert len(consumer.received) == 1
    delivery = deliveries().get(delivery_id, tenant_id)
    assert delivery.status == "delivered" and [a.number for a in delivery.attempts] == [1]


def test_the_attempt_is_recorded_with_status_latency_and_excerpt(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    consumer.default = Reply(200, body=b"thanks " + b"x" * 5000)
    tenant_id, delivery_id = publish_one(platform, consumer)
    platform.pump()
    delivery = deliveries().get(delivery_id, tenant_id)
    [attempt] = delivery.attempts
    assert attempt.number == 1 and attempt.status_code == 200 and attempt.error is None
    assert attempt.latency_ms >= 0
    assert attempt.response_excerpt.startswith("thanks ") and len(attempt.response_excerpt.encode()) <= 1024
    assert delivery.completed_at is not None and delivery.first_attempt_at is not None
    assert delivery.expires_at is not None  # delivered records expire after the redrive window


def test_a_failed_first_attempt_is_recorded_and_left_retrying(platform: Platform, consumer: ScriptedConsumer) -> None:
    consumer.default = Reply(503, body=b"down for maintenance")
    tenant_id, delivery_id = publish_one(platform, consumer)
    platform.pump(max_batches=1)
    delivery = deliveries().get(delivery_id, tenant_id)
    assert delivery.status == "retrying"
    assert delivery.next_attempt_at is not None and delivery.next_attempt_at > delivery.attempts[0].started_at
    assert delivery.attempts[0].status_code == 503
    assert delivery.attempts[0].response_excerpt == "down for maintenance"
