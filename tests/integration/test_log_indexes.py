"""Each filter of the delivery log reads one index (or keys), never a scan; an event's fan-out writes no index entry.

The DynamoDB calls the API's log makes are recorded on moto: every filter must Query the index named for it (the
event filter: the sparse event_extras index, then its fan-out by key), and no read may Scan the deliveries.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import boto3
import botocore.client
import pytest
from boto3.dynamodb.conditions import Attr

from hookrelay.adapters import schema
from hookrelay.domain.clock import utcnow
from hookrelay.domain.lifecycle import fan_out_id, is_fan_out
from hookrelay.domain.models import Endpoint
from hookrelay.domain.status import DeliveryStatus
from scripts.create_admin_key import create_admin_key
from tests.support.aws import moto_stack
from tests.support.consumer import Reply, ScriptedConsumer
from tests.support.platform import Platform
from tests.support.records import make, seed, store

Call = tuple[str, dict[str, Any]]


@pytest.fixture(scope="module")
def platform() -> Iterator[Platform]:
    with moto_stack() as env:
        yield Platform(env=env, admin_token=create_admin_key(env["API_KEYS_TABLE"]).token)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[Call]:
    """Every DynamoDB call made from here on: (operation, parameters)."""
    made: list[Call] = []
    original = botocore.client.BaseClient._make_api_call

    def recorded(client: Any, operation: str, params: dict[str, Any]) -> Any:
        if client.meta.service_model.service_name == "dynamodb":
            made.append((operation, params))
        return original(client, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", recorded)
    return made


def deliveries_table() -> str:
    return os.environ[schema.DELIVERIES.env_var]


def reads_of_deliveries(calls: list[Call]) -> list[Call]:
    table = deliveries_table()
    return [
        (operation, params)
        for operation, params in calls
        if params.get("TableName") == table or table in params.get("RequestItems", {})
    ]


@pytest.fixture(scope="module")
def tenant(platform: Platform) -> tuple[str, str, list[str]]:
    tenant_id, token = platform.new_tenant()
    endpoints = [platform.new_endpoint(token, "http://127.0.0.1:9/a")["id"] for _ in range(2)]
    for status in (DeliveryStatus.DELIVERED, DeliveryStatus.DEAD, DeliveryStatus.RETRYING):
        seed(tenant_id, endpoints[0], utcnow() - timedelta(minutes=5), status)
    return tenant_id, token, endpoints


@pytest.mark.parametrize(
    ("query", "index"),
    [
        ("", "by_tenant"),
        ("status=delivered", "by_tenant"),
        ("status=queued", "by_tenant"),
        ("status=attempting", "by_tenant"),
        ("status=dead", "by_tenant_status"),
        ("status=retrying", "by_tenant_status"),
        ("status=cancelled", "by_tenant_status"),
        ("endpoint_id={endpoint}", "by_tenant"),  # its tenant's log, filtered on the entries' endpoint
        ("endpoint_id={endpoint}&status=delivered", "by_tenant"),
        ("endpoint_id={endpoint}&status=dead", "by_tenant_status"),
        ("since=2020-01-01T00:00:00Z&until=2100-01-01T00:00:00Z", "by_tenant"),
    ],
)
def test_each_filter_queries_its_index_and_never_scans(
    platform: Platform, tenant: tuple[str, str, list[str]], calls: list[Call], query: str, index: str
) -> None:
    _, token, endpoints = tenant
    response = platform.call("GET", "/v1/deliveries?" + query.format(endpoint=endpoints[0]), token)
    assert response.status == 200, response.body
    reads = reads_of_deliveries(calls)
    assert [op for op, _ in reads if op == "Scan"] == []
    queries = [params for op, params in reads if op == "Query"]
    assert queries and {params.get("IndexName") for params in queries} == {index}


def test_the_event_filter_reads_the_fan_out_by_key_and_the_replays_by_their_index(
    platform: Platform, calls: list[Call]
) -> None:
    consumer = ScriptedConsumer(default=Reply(200))
    try:
        tenant_id, token = platform.new_tenant()
        endpoints = [platform.new_endpoint(token, f"{consumer.url}/{n}")["id"] for n in range(2)]
        producer = platform.new_key("producer")
        body = {"tenant_id": tenant_id, "type": "a.b", "data": {"k": 1}}
        accepted = platform.call("POST", "/v1/events", producer, body).json()
        platform.pump()
        replay = platform.call("POST", f"/v1/deliveries/{accepted['delivery_ids'][0]}/replay", token).json()
        platform.pump()
    finally:
        consumer.close()
    calls.clear()

    found = platform.call("GET", f"/v1/deliveries?event_id={accepted['event_id']}&limit=2", token).json()
    later = platform.call("GET", f"/v1/deliveries?event_id={accepted['event_id']}&cursor={found['next_cursor']}", token)

    ids = [d["id"] for d in found["data"] + later.json()["data"]]
    assert sorted(ids) == sorted([*accepted["delivery_ids"], replay["delivery_id"]])
    reads = reads_of_deliveries(calls)
    assert [op for op, _ in reads if op == "Scan"] == []
    assert {params.get("IndexName") for op, params in reads if op == "Query"} == {schema.EVENT_EXTRAS_INDEX.name}
    keyed = {
        key["id"]
        for op, params in reads
        if op == "BatchGetItem"
        for key in params["RequestItems"][deliveries_table()]["Keys"]
    }
    assert set(accepted["delivery_ids"]) <= keyed  # the fan-out, by its derived ids
    assert len(endpoints) == len(accepted["delivery_ids"])


def test_a_fan_out_delivery_is_in_no_event_index_and_a_replay_is(platform: Platform) -> None:
    consumer = ScriptedConsumer(default=Reply(200))
    try:
        tenant_id, token = platform.new_tenant()
        endpoint = platform.new_endpoint(token, consumer.url)
        producer = platform.new_key("producer")
        accepted = platform.call("POST", "/v1/events", producer, {"tenant_id": tenant_id, "type": "a.b", "data": {}})
        [delivery_id] = accepted.json()["delivery_ids"]
        platform.pump()
        replay_id = platform.call("POST", f"/v1/deliveries/{delivery_id}/replay", token).json()["delivery_id"]
    finally:
        consumer.close()
    table = boto3.resource("dynamodb").Table(deliveries_table())
    fan_out = table.get_item(Key={"id": delivery_id})["Item"]
    replayed = table.get_item(Key={"id": replay_id})["Item"]

    extra = schema.EVENT_EXTRAS_INDEX.partition_key
    assert extra not in fan_out and replayed[extra] == fan_out["event_id"]
    event = platform.call("GET", f"/v1/events/{fan_out['event_id']}", token).json()
    assert endpoint["id"] == fan_out["endpoint_id"] and event["id"] == fan_out["event_id"]


def test_only_the_fan_out_id_of_its_event_and_endpoint_counts_as_fan_out() -> None:
    now = utcnow()
    made = make("ten_1", "ep_1", now)
    endpoint = Endpoint(id="ep_1", tenant_id="ten_1", url="https://a.example", event_types=["*"], secrets=[],
                        created_at=now, updated_at=now)  # fmt: skip
    derived = replace(made.delivery, id=fan_out_id(made.event, endpoint))

    assert is_fan_out(derived)
    assert not is_fan_out(made.delivery)  # a random id
    assert not is_fan_out(replace(derived, endpoint_id="ep_2"))
    assert not is_fan_out(replace(derived, event_id="evt_other"))


def test_a_hot_tenant_s_writes_spread_over_every_shard_of_each_log_index(platform: Platform) -> None:
    """One tenant, one endpoint, 400 deliveries in one second: no index partition takes more than its share."""
    tenant_id, token = platform.new_tenant()
    endpoint_id = platform.new_endpoint(token, "http://127.0.0.1:9/a")["id"]
    now = utcnow()
    store([make(tenant_id, endpoint_id, now + timedelta(milliseconds=n), DeliveryStatus.DEAD) for n in range(400)])
    table = boto3.resource("dynamodb").Table(deliveries_table())
    items = [item for page in query_pages_of_tenant(table, tenant_id) for item in page]
    assert len(items) == 400

    for index in schema.DELIVERIES.indexes:
        if index is schema.EVENT_EXTRAS_INDEX:
            continue  # keyed by event: a few entries per event
        keys = Counter(item[index.partition_key] for item in items)
        assert len(keys) == schema.DEFAULT_LOG_SHARDS, index.name  # the setting unset: its default
        assert max(keys.values()) < 2 * len(items) / schema.DEFAULT_LOG_SHARDS, (index.name, keys)


def query_pages_of_tenant(table: Any, tenant_id: str) -> Iterator[list[dict[str, Any]]]:
    """The tenant's items, read for the test by a scan (the log itself never scans)."""
    request: dict[str, Any] = {"FilterExpression": Attr("tenant_id").eq(tenant_id)}
    while True:
        page = table.scan(**request)
        yield page["Items"]
        if "LastEvaluatedKey" not in page:
            return
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def test_the_local_stack_s_indexes_project_what_the_spec_says(platform: Platform) -> None:
    described = boto3.client("dynamodb").describe_table(TableName=deliveries_table())["Table"]
    projections = {
        index["IndexName"]: (
            index["Projection"]["ProjectionType"],
            sorted(index["Projection"].get("NonKeyAttributes", [])),
        )
        for index in described["GlobalSecondaryIndexes"]
    }
    assert projections == {
        index.name: (index.projection, sorted(index.non_key_attributes)) for index in schema.DELIVERIES.indexes
    }
    assert {projection for projection, _ in projections.values()} == {"INCLUDE"}


def test_a_read_that_finds_too_few_in_its_budget_hands_back_a_cursor_that_finds_the_rest(platform: Platform) -> None:
    """status=queued reads the tenant's whole log and filters: 60 newer deliveries hide the one queued, further back
    than one read looks (MAX_PAGES_PER_READ pages of limit + 1 entries); the cursor walks on to it."""
    tenant_id, token = platform.new_tenant()
    endpoint_id = platform.new_endpoint(token, "http://127.0.0.1:9/a")["id"]
    now = utcnow() - timedelta(hours=1)
    queued = make(tenant_id, endpoint_id, now, DeliveryStatus.QUEUED)
    newer = [make(tenant_id, endpoint_id, now + timedelta(seconds=n + 1), DeliveryStatus.DELIVERED) for n in range(60)]
    store([queued, *newer])

    pages, cursor = [], ""
    for _ in range(10):
        document = platform.call("GET", f"/v1/deliveries?status=queued&limit=1{cursor}", token).json()
        pages.append([d["id"] for d in document["data"]])
        if document["next_cursor"] is None:
            break
        cursor = f"&cursor={document['next_cursor']}"

    assert [i for page in pages for i in page] == [queued.delivery.id]
    assert pages[0] == [] and len(pages) > 1


def test_an_endpoint_s_log_is_its_tenant_s_filtered_and_pages_in_order(platform: Platform, calls: list[Call]) -> None:
    """One log index: an endpoint's deliveries, interleaved with another endpoint's, page newest first with no gap
    and no repeat, and the other endpoint's items are never read (dropped on their entries' projected endpoint)."""
    tenant_id, token = platform.new_tenant()
    mine, other = (platform.new_endpoint(token, "http://127.0.0.1:9/a")["id"] for _ in range(2))
    start = utcnow() - timedelta(hours=1)
    made = [
        make(tenant_id, mine if n % 3 == 0 else other, start + timedelta(seconds=n), DeliveryStatus.DELIVERED)
        for n in range(15)
    ]
    store(made)
    calls.clear()

    pages, cursor = [], ""
    for _ in range(20):
        document = platform.call("GET", f"/v1/deliveries?endpoint_id={mine}&limit=2{cursor}", token).json()
        pages.append([d["id"] for d in document["data"]])
        if document["next_cursor"] is None:
            break
        cursor = f"&cursor={document['next_cursor']}"

    expected = [m.delivery.id for m in reversed(made) if m.delivery.endpoint_id == mine]
    assert [i for page in pages for i in page] == expected and len(expected) == 5
    others = {m.delivery.id for m in made if m.delivery.endpoint_id == other}
    read = {
        key["id"]
        for op, params in reads_of_deliveries(calls)
        if op == "BatchGetItem"
        for key in params["RequestItems"][deliveries_table()]["Keys"]
    }
    assert read & others == set() and read


def test_an_endpoint_with_a_small_share_of_its_tenant_s_log_gets_a_bounded_read_and_a_cursor(
    platform: Platform,
) -> None:
    """60 newer deliveries of another endpoint hide this endpoint's one, further back than one read looks
    (MAX_PAGES_PER_READ pages of limit + 1 entries): the first read answers empty with a cursor, which walks on."""
    tenant_id, token = platform.new_tenant()
    mine, other = (platform.new_endpoint(token, "http://127.0.0.1:9/a")["id"] for _ in range(2))
    now = utcnow() - timedelta(hours=1)
    hidden = make(tenant_id, mine, now, DeliveryStatus.DELIVERED)
    store(
        [hidden, *(make(tenant_id, other, now + timedelta(seconds=n + 1), DeliveryStatus.DELIVERED) for n in range(60))]
    )

    pages, cursor = [], ""
    for _ in range(10):
        document = platform.call("GET", f"/v1/deliveries?endpoint_id={mine}&limit=1{cursor}", token).json()
        pages.append([d["id"] for d in document["data"]])
        if document["next_cursor"] is None:
            break
        cursor = f"&cursor={document['next_cursor']}"

    assert [i for page in pages for i in page] == [hidden.delivery.id]
    assert pages[0] == [] and len(pages) > 1
