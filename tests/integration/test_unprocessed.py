"""What a batch call leaves undone: DynamoDB's unprocessed items and keys (a partition over its throughput), SQS's
entries failed on its side. moto never leaves anything, so here every BatchWriteItem and BatchGetItem answer on the
chosen tables, and every SendMessageBatch answer on the chosen queues, leaves its last entries undone (unwritten,
unread, unsent) for as many answers as a test says. The adapters send them again after a backoff
(`adapters.aws.resend_left`), and past AWS_CALL_TRIES raise as a throttled call does: the producer is told to retry,
and its retry (once the failed writer's window has passed) delivers each event once."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from botocore.client import BaseClient

from hookrelay.adapters import aws, schema
from hookrelay.domain.clock import utcnow
from tests.integration.test_batch_ingest import LATER, time_passes
from tests.support.consumer import ScriptedConsumer
from tests.support.platform import Platform
from tests.support.records import stored_deliveries

BATCH = "/v1/events/batch"
FOREVER = 1_000


@dataclass
class Leaving:
    """Every batch answer on `tables` leaves its last `count` entries unprocessed, `answers` times (then none)."""

    tables: set[str]
    answers: int
    count: int = 3
    left: Counter[str] = field(default_factory=Counter)  # entries left, by operation

    def call(self, previous: Any, client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        if operation == "SendMessageBatch" and self.answers > 0 and params["QueueUrl"] in self.tables:
            return self.fail_sends(previous, client, params)
        if operation not in ("BatchWriteItem", "BatchGetItem") or self.answers <= 0:
            return previous(client, operation, params)
        requested = params["RequestItems"]
        kept, left = {}, {}
        for table, entries in requested.items():
            listed = entries["Keys"] if operation == "BatchGetItem" else entries
            # All but one at the most: each answer takes something, as DynamoDB's does.
            cut = max(1, len(listed) - self.count) if table in self.tables else len(listed)
            if operation == "BatchGetItem":
                kept[table] = {**entries, "Keys": listed[:cut]}
                if listed[cut:]:
                    left[table] = {**entries, "Keys": listed[cut:]}
            else:
                kept[table] = listed[:cut]
                if listed[cut:]:
                    left[table] = listed[cut:]
        if not left:
            return previous(client, operation, params)
        self.answers -= 1
        self.left[operation] += sum(len(v["Keys"] if operation == "BatchGetItem" else v) for v in left.values())
        answer = previous(client, operation, {**params, "RequestItems": kept})
        return {**answer, "UnprocessedKeys" if operation == "BatchGetItem" else "UnprocessedItems": left}

    def fail_sends(self, previous: Any, client: BaseClient, params: dict[str, Any]) -> Any:
        """SQS's side failing the last entries (not sent), as an internal error."""
        entries = params["Entries"]
        cut = max(1, len(entries) - self.count)
        self.answers -= 1
        self.left["SendMessageBatch"] += len(entries) - cut
        answer = previous(client, "SendMessageBatch", {**params, "Entries": entries[:cut]})
        failed = [{"Id": e["Id"], "SenderFault": False, "Code": "InternalError"} for e in entries[cut:]]
        return {**answer, "Failed": failed}


@pytest.fixture
def leaving(platform: Platform, monkeypatch: pytest.MonkeyPatch) -> Iterator[Leaving]:
    rule = Leaving(tables=set(), answers=0)
    previous = BaseClient._make_api_call  # botocore's, or the IAM check's wrapper of it (kept: calls stay checked)

    def call(client: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        return rule.call(previous, client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", call)
    yield rule


@pytest.fixture
def backoffs(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(aws, "_sleep", slept.append)
    return slept


def publish(platform: Platform, producer: str, tenant_id: str, n: int) -> Any:
    items = [{"type": "order.updated", "data": {"n": i}, "idempotency_key": f"k{i}"} for i in range(n)]
    return platform.call("POST", BATCH, producer, {"tenant_id": tenant_id, "events": items})


def delivered(consumer: ScriptedConsumer) -> Counter[int]:
    return Counter(json.loads(r.body)["data"]["n"] for r in consumer.received)


@pytest.fixture
def tenant(platform: Platform, consumer: ScriptedConsumer) -> tuple[str, str, str]:
    tenant_id, token = platform.new_tenant()
    platform.new_endpoint(token, consumer.url)
    return tenant_id, token, platform.new_key("producer")


def dynamodb_writes(platform: Platform) -> set[str]:
    return {platform.env[spec.env_var] for spec in (schema.EVENTS, schema.EVENT_LOG, schema.DELIVERIES)}


def delivery_queues(platform: Platform) -> set[str]:
    return set(schema.DeliveryQueueUrls.parse(platform.env[schema.DELIVERY_QUEUE.env_var]).all())


@pytest.mark.parametrize(
    ("operation", "where", "answers", "at_least"),
    [
        ("BatchWriteItem", dynamodb_writes, 4, 6),  # both tables' batches leave some
        ("SendMessageBatch", delivery_queues, 3, 1),  # SQS failing entries on its side
    ],
    ids=["dynamodb-unprocessed-items", "sqs-failed-entries"],
)
def test_what_a_batch_call_leaves_undone_is_done_after_a_backoff_and_every_event_is_delivered_once(
    platform: Platform,
    consumer: ScriptedConsumer,
    leaving: Leaving,
    backoffs: list[float],
    tenant: Any,
    operation: str,
    where: Callable[[Platform], set[str]],
    answers: int,
    at_least: int,
) -> None:
    tenant_id, _, producer = tenant
    leaving.tables, leaving.answers = where(platform), answers

    answer = publish(platform, producer, tenant_id, 30)

    assert answer.status == 200, answer.body
    assert answer.json()["accepted"] == 30
    assert leaving.left[operation] >= at_least and leaving.answers == 0
    assert backoffs and all(0 <= b <= schema.aws_call_backoff_cap(schema.AWS_CALL_TRIES - 2) for b in backoffs)
    deliveries = stored_deliveries(boto3.resource("dynamodb").Table(platform.env[schema.DELIVERIES.env_var]))
    assert len(deliveries) == 30
    platform.pump()
    assert delivered(consumer) == Counter(range(30))


def test_entries_left_past_the_tries_fail_the_request_as_a_throttle_and_its_retry_delivers_each_event_once(
    platform: Platform, consumer: ScriptedConsumer, leaving: Leaving, backoffs: list[float], tenant: Any
) -> None:
    tenant_id, _, producer = tenant
    leaving.tables = {platform.env[schema.DELIVERIES.env_var]}
    leaving.answers, leaving.count = FOREVER, FOREVER  # each answer takes one entry: 25 take 25 rounds

    refused = publish(platform, producer, tenant_id, 30)

    assert refused.status == 503, refused.body
    assert refused.headers["content-type"] == "application/problem+json"
    assert int(refused.headers["retry-after"]) > 0
    assert len(backoffs) == schema.AWS_CALL_TRIES - 1  # one batch's rounds, then it raised
    leaving.answers = 0
    soon = publish(platform, producer, tenant_id, 30)  # the failed writer may still be running: wait for it
    assert {r["status"] for r in soon.json()["results"]} == {202, 409}, soon.body
    time_passes(utcnow() + LATER)
    again = publish(platform, producer, tenant_id, 30)
    assert again.status == 200, again.body
    assert {r["status"] for r in again.json()["results"]} == {202}
    platform.pump()
    assert delivered(consumer) == Counter(range(30))


def test_keys_a_batch_read_leaves_unprocessed_are_read_again_and_the_log_lists_every_delivery(
    platform: Platform, consumer: ScriptedConsumer, leaving: Leaving, backoffs: list[float], tenant: Any
) -> None:
    tenant_id, token, producer = tenant
    assert publish(platform, producer, tenant_id, 30).status == 200
    platform.pump()
    leaving.tables = {platform.env[schema.DELIVERIES.env_var]}
    leaving.answers = 2

    listed = platform.call("GET", "/v1/deliveries?limit=50", token)

    assert listed.status == 200, listed.body
    assert leaving.left["BatchGetItem"] > 0 and backoffs
    assert len(listed.json()["data"]) == 30
