"""Deliveries left unstored (adapters/event_log.py), on moto through the real handlers.

A logged event's fan-out, queued as ingest made it, has no record until the first write that changes it creates
one: on the happy path the attempt's record, in one write; otherwise (a cancel, a park, a claim) a record as ingest
would have written it, then that write. Until then every read sees it queued: by id, in the log, among its event's
deliveries. A keyed event's deliveries are stored by ingest, as before."""

from __future__ import annotations

import os
from typing import Any

import boto3
from botocore.exceptions import ClientError

from hookrelay.adapters import schema
from hookrelay.adapters.dynamodb import DeliveryTable
from hookrelay.domain.circuit import OPEN_AFTER_FAILURES
from hookrelay.domain.classification import Outcome
from hookrelay.domain.clock import utcnow
from hookrelay.domain.models import Attempt
from hookrelay.domain.status import LATE_CLAIM_AFTER, DeliveryStatus
from hookrelay.services.ports import AttemptRecord, Unclaimed
from tests.support.consumer import Reply, ScriptedConsumer
from tests.support.crash import injector
from tests.support.platform import Platform

# What a first attempt's settle writes of a delivery.
CHANGED_BY_SETTLE = {
    "status",
    "attempts",
    "attempt_count",
    "first_attempt_at",
    "updated_at",
    "completed_at",
    "expires_at",
}


def deliveries() -> DeliveryTable:
    resource = boto3.resource("dynamodb")
    return DeliveryTable(
        resource.Table(os.environ[schema.DELIVERIES.env_var]), resource.Table(os.environ[schema.EVENT_LOG.env_var])
    )


def record_of(delivery_id: str) -> dict[str, Any] | None:
    item: dict[str, Any] | None = deliveries().table.get_item(Key={"id": delivery_id}).get("Item")
    return item


def publish(platform: Platform, tenant_id: str, key: str | None = None) -> dict[str, Any]:
    producer = platform.new_key("producer")
    body = {"tenant_id": tenant_id, "type": "order.paid", "data": {"n": 1}}
    answer = platform.call("POST", "/v1/events", producer, body, {"idempotency-key": key} if key else None)
    assert answer.status == 202, answer.body
    return dict(answer.json())


def writes_to_deliveries(calls: list[str]) -> list[str]:
    """The calls (`function: Service.Operation [table]`) that wrote to the deliveries table."""
    writes = ("PutItem", "UpdateItem", "BatchWriteItem", "DeleteItem", "TransactWriteItems")
    return [c for c in calls if "Deliveries" in c and any(f".{w} " in c for w in writes)]


def test_the_happy_path_stores_its_delivery_once_settled(platform: Platform, consumer: ScriptedConsumer) -> None:
    tenant_id, token = platform.new_tenant()
    endpoint = platform.new_endpoint(token, consumer.url)
    with injector() as calls:
        calls.functions = frozenset({"ingest", "delivery"})
        accepted = publish(platform, tenant_id)
        [delivery_id] = accepted["delivery_ids"]
        assert record_of(delivery_id) is None  # ingest wrote the event alone

        shown = platform.call("GET", f"/v1/deliveries/{delivery_id}", token)
        assert shown.status == 200 and shown.json()["status"] == "queued", shown.body
        listed = platform.call("GET", "/v1/deliveries?status=queued", token).json()["data"]
        assert [d["id"] for d in listed] == [delivery_id]
        of_event = platform.call("GET", f"/v1/deliveries?event_id={accepted['event_id']}", token).json()["data"]
        assert [(d["id"], d["status"]) for d in of_event] == [(delivery_id, "queued")]
        queued = deliveries().get(delivery_id, tenant_id)
        assert queued is not None and queued.endpoint_id == endpoint["id"]

        assert platform.pump() == 1
    assert len(consumer.received) == 1
    # One write to the deliveries table in all: the settle, which put the record settled.
    assert [c.split(" [")[0] for c in writes_to_deliveries(calls.calls)] == ["delivery: DynamoDB.PutItem"]
    delivered = deliveries().get(delivery_id)
    assert delivered is not None and delivered.status is DeliveryStatus.DELIVERED
    assert [a.number for a in delivered.attempts] == [1]
    # What it was read as before is what it was stored as (what changed: the attempt and its settle).
    assert {f: getattr(delivered, f) for f in vars(queued) if f not in CHANGED_BY_SETTLE} == {
        f: getattr(queued, f) for f in vars(queued) if f not in CHANGED_BY_SETTLE
    }
    assert platform.call("GET", f"/v1/deliveries/{delivery_id}", token).json()["status"] == "delivered"
    assert platform.call("GET", "/v1/deliveries?status=queued", token).json()["data"] == []


def test_a_keyed_events_deliveries_are_stored_by_ingest(platform: Platform, consumer: ScriptedConsumer) -> None:
    """Its event stays in the Events table (a retry must find it), and its deliveries are written as before."""
    tenant_id, token = platform.new_tenant()
    platform.new_endpoint(token, consumer.url)
    [delivery_id] = publish(platform, tenant_id, key="order-7")["delivery_ids"]
    stored = record_of(delivery_id)
    assert stored is not None and stored["status"] == "queued"
    # Its settle finds the record (the write that would create one leaves the record's own attributes).
    assert platform.pump() == 1
    settled = record_of(delivery_id)
    assert settled is not None and settled["status"] == "delivered"
    assert {k: v for k, v in settled.items() if k in stored and k not in CHANGED_BY_SETTLE} == {
        k: v for k, v in stored.items() if k not in CHANGED_BY_SETTLE
    }


def test_a_delivery_cancelled_before_its_first_attempt_is_stored_cancelled(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    """Its endpoint disabled after the event came: the first write is the cancel's, which stores the record as ingest
    would have, then cancels it; it is then in the status index, and read cancelled everywhere."""
    tenant_id, token = platform.new_tenant()
    endpoint = platform.new_endpoint(token, consumer.url)
    [delivery_id] = publish(platform, tenant_id)["delivery_ids"]
    assert platform.call("POST", f"/v1/endpoints/{endpoint['id']}/disable", token).status == 200

    assert platform.pump() == 1
    assert consumer.received == []
    stored = record_of(delivery_id)
    assert stored is not None and stored["status"] == "cancelled" and stored["event_order"]
    cancelled = platform.call("GET", "/v1/deliveries?status=cancelled", token).json()["data"]
    assert [d["id"] for d in cancelled] == [delivery_id]


def test_another_tenant_never_reads_an_unstored_delivery(platform: Platform, consumer: ScriptedConsumer) -> None:
    tenant_id, token = platform.new_tenant()
    platform.new_endpoint(token, consumer.url)
    [delivery_id] = publish(platform, tenant_id)["delivery_ids"]
    other_id, other_token = platform.new_tenant("other")
    assert platform.call("GET", f"/v1/deliveries/{delivery_id}", other_token).status == 404
    assert deliveries().get(delivery_id, other_id) is None
    assert deliveries().get(delivery_id, tenant_id) is not None
    assert deliveries().get(delivery_id) is None  # without its tenant, only a record is read


def test_a_long_first_attempt_is_claimed_by_a_write_that_creates_its_record(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    """An attempt not answered within LATE_CLAIM_AFTER is claimed while it waits (so it reads `attempting`): that
    claim creates the record, claimed, in its one write (no read of the event log), and the settle then finds it."""
    tenant_id, token = platform.new_tenant()
    platform.new_endpoint(token, consumer.url)
    consumer.queue([Reply(200, delay=LATE_CLAIM_AFTER.total_seconds() + 0.5)])
    with injector() as calls:
        calls.functions = frozenset({"delivery"})
        [delivery_id] = publish(platform, tenant_id)["delivery_ids"]
        assert platform.pump() == 1
    assert [c.split(" [")[0] for c in writes_to_deliveries(calls.calls)] == ["delivery: DynamoDB.UpdateItem"] * 2
    assert not [c for c in calls.calls if "EventLog" in c and ".Query" in c]
    delivered = deliveries().get(delivery_id)
    assert delivered is not None and delivered.status is DeliveryStatus.DELIVERED
    assert delivered.first_attempt_at is not None and [a.number for a in delivered.attempts] == [1]


class PutFinds:
    """The deliveries table as a settle racing another first write sees it: its put finds a record (refused)."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def put_item(self, **_: Any) -> dict[str, Any]:
        error = {"Error": {"Code": "ConditionalCheckFailedException", "Message": "The conditional request failed"}}
        raise ClientError(error, "PutItem")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.table, name)


def test_the_settles_put_and_the_update_it_falls_back_to_store_the_same_record(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    """The happy path puts the settled record whole; a put refused falls back to the update that creates it when
    there is none. Whichever writes it, the record is the same, item for item (index keys included)."""
    tenant_id, token = platform.new_tenant()
    platform.new_endpoint(token, consumer.url)
    [delivery_id] = publish(platform, tenant_id)["delivery_ids"]
    table = deliveries()
    unstored = table.get(delivery_id, tenant_id)
    assert unstored is not None
    attempt = Attempt(number=1, started_at=utcnow(), latency_ms=12, status_code=500, outcome=Outcome.RETRY)
    record = AttemptRecord(attempt, DeliveryStatus.RETRYING, utcnow(), None, None)  # in the status index

    assert table.record_attempt(delivery_id, tenant_id, 1, record, Unclaimed(unstored=unstored))
    put = record_of(delivery_id)
    table.table.delete_item(Key={"id": delivery_id})
    updating = DeliveryTable(PutFinds(table.table), table.event_log)
    assert updating.record_attempt(delivery_id, tenant_id, 1, record, Unclaimed(unstored=unstored))
    assert record_of(delivery_id) == put
    assert put is not None and put["status"] == "retrying" and put["tenant_status"].startswith(tenant_id)


def test_a_first_message_behind_an_open_circuit_stores_its_delivery_parked_without_reading_the_log(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    """The circuit opens on the first attempts of a run of events published before it did: each of the rest is
    read from the event its message carries, and stored parked by the park itself (its record put parked, then its
    lot entry), not stored as queued first (a query of the event log and another write)."""
    tenant_id, token = platform.new_tenant()
    platform.new_endpoint(token, consumer.url)
    consumer.default = Reply(503)
    ids = [publish(platform, tenant_id)["delivery_ids"][0] for _ in range(OPEN_AFTER_FAILURES + 3)]
    assert all(record_of(d) is None for d in ids)
    with injector() as calls:
        calls.functions = frozenset({"delivery"})
        platform.pump(max_batches=1)
    records = [record_of(d) for d in ids]
    assert all(r is not None for r in records)  # every one stored, by its attempt or its park
    unattempted = {r["id"] for r in records if r is not None and r["status"] == "queued"}
    assert unattempted and all(r[schema.PARKED_MARK] for r in records if r is not None and r["id"] in unattempted)
    lot = boto3.resource("dynamodb").Table(os.environ[schema.PARKING_LOT.env_var]).scan()["Items"]
    assert {item["id"] for item in lot} >= unattempted
    assert not [c for c in calls.calls if "EventLog" in c and ".Query" in c]
