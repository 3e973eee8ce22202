"""The event log (adapters/event_log.py) on moto, through the real ingest and API handlers: an event published without
an idempotency key is its fan-out's entry in the tenant's log, so its deliveries get none of their own, and those
queued as ingest made them get no record until their first write; the log reads them beside indexed deliveries in
order, once each, by cursor and by endpoint; a crash after the event leaves queued deliveries the log shows (rows
of an event logged before unstored deliveries, with no record, stand for nothing); a shard count raised since the
event was stored moves nothing out of reach."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, NamedTuple

import boto3
import pytest

from hookrelay import wiring
from hookrelay.adapters import event_log, schema
from hookrelay.adapters.dynamodb import (
    DeliveryTable,
    EndpointTable,
    EventTable,
    delivery_item,
    event_item,
    sharded,
    shards,
)
from hookrelay.adapters.records import from_data
from hookrelay.domain.clock import to_rfc3339, utcnow
from hookrelay.domain.lifecycle import new_delivery, new_event
from hookrelay.domain.models import Delivery, Endpoint
from hookrelay.domain.paging import BoundedCount
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ingest import Accepted
from hookrelay.services.ports import DeliveryFilter
from scripts.create_admin_key import create_admin_key
from tests.support.aws import moto_stack
from tests.support.platform import Platform
from tests.support.records import every_page, log_index_entries

LOG = schema.DELIVERY_LOG_INDEX


@pytest.fixture(scope="module")
def platform() -> Iterator[Platform]:
    with moto_stack() as env:
        yield Platform(env=env, admin_token=create_admin_key(env["API_KEYS_TABLE"]).token)


class Tenant(NamedTuple):
    id: str
    token: str  # the tenant's own key: its log
    producer: str  # a producer key: its events
    endpoints: list[str]  # two (nothing listens: these tests never deliver)


@pytest.fixture
def tenant(platform: Platform) -> Tenant:
    tenant_id, token = platform.new_tenant()
    endpoints = [platform.new_endpoint(token, f"http://127.0.0.1:9/{n}")["id"] for n in range(2)]
    return Tenant(tenant_id, token, platform.new_key("producer"), endpoints)


def table(spec: schema.TableSpec) -> Any:
    return boto3.resource("dynamodb").Table(os.environ[spec.env_var])


def deliveries() -> DeliveryTable:
    return DeliveryTable(table(schema.DELIVERIES), table(schema.EVENT_LOG))


def events() -> EventTable:
    return EventTable(table(schema.EVENTS), table(schema.EVENT_LOG))


def endpoints(tenant_id: str, endpoint_ids: list[str]) -> list[Endpoint]:
    found = [EndpointTable(table(schema.ENDPOINTS)).get(tenant_id, i) for i in endpoint_ids]
    return [e for e in found if e is not None]


def listed_order(delivery: Delivery) -> tuple[str, str]:
    return to_rfc3339(delivery.created_at), delivery.id


def publish(platform: Platform, token: str, tenant_id: str, key: str | None = None) -> dict[str, Any]:
    body = {"tenant_id": tenant_id, "type": "order.paid", "data": {"key": key}}
    answer = platform.call("POST", "/v1/events", token, body, {"idempotency-key": key} if key else None)
    assert answer.status == 202, answer.body
    return dict(answer.json())


def logged_events(tenant_id: str) -> list[dict[str, Any]]:
    found = []
    for partition in shards(tenant_id):
        found += table(schema.EVENT_LOG).query(
            KeyConditionExpression=f"{event_log.PARTITION} = :p", ExpressionAttributeValues={":p": partition}
        )["Items"]
    return found


def read(tenant_id: str, delivery_ids: list[str]) -> list[Delivery]:
    """The deliveries, stored or not (`get` with their tenant)."""
    found = [deliveries().get(i, tenant_id) for i in delivery_ids]
    assert all(d is not None for d in found)
    return [d for d in found if d is not None]


def newest_first(tenant_id: str, delivery_ids: list[str]) -> list[str]:
    """The log's order of these deliveries (created_at, id), newest first, from what they are."""
    return [d.id for d in sorted(read(tenant_id, delivery_ids), key=lambda d: (d.created_at, d.id), reverse=True)]


def test_an_event_published_without_a_key_is_its_fan_outs_entry_in_the_log(platform: Platform, tenant: Tenant) -> None:
    tenant_id, token, producer, endpoint_ids = tenant
    accepted = publish(platform, producer, tenant_id)

    [stored] = logged_events(tenant_id)
    assert event_log.event_item_of(stored)["id"] == accepted["event_id"]
    assert sorted(token.partition("#")[0] for token in stored[event_log.FAN_OUT].split()) == sorted(endpoint_ids)
    assert not {"id", "tenant_id", "timestamp"} & set(stored)  # its key says them
    assert table(schema.EVENTS).get_item(Key={"id": accepted["event_id"]}).get("Item") is None  # stored once
    assert log_index_entries(tenant_id) == []  # no delivery of it has an index entry: the event is their entry
    for delivery in read(tenant_id, accepted["delivery_ids"]):
        assert table(schema.DELIVERIES).get_item(Key={"id": delivery.id}).get("Item") is None  # no record yet
        assert delivery.status == "queued" and to_rfc3339(delivery.created_at) == stored[event_log.SORT][:24]

    listed = platform.call("GET", "/v1/deliveries", token)
    assert listed.status == 200, listed.body
    assert sorted(d["id"] for d in listed.json()["data"]) == sorted(accepted["delivery_ids"])
    assert {d["status"] for d in listed.json()["data"]} == {"queued"}
    one = platform.call("GET", f"/v1/deliveries?endpoint_id={endpoint_ids[1]}", token)
    assert [d["endpoint_id"] for d in one.json()["data"]] == [endpoint_ids[1]]
    shown = platform.call("GET", f"/v1/events/{accepted['event_id']}", token)
    assert shown.status == 200 and shown.json()["id"] == accepted["event_id"], shown.body
    _, other_token = platform.new_tenant("other")
    assert platform.call("GET", f"/v1/events/{accepted['event_id']}", other_token).status == 404


def test_the_log_reads_logged_and_indexed_deliveries_in_order_once_each_by_cursor_and_endpoint(
    platform: Platform, tenant: Tenant
) -> None:
    """Events with and without an idempotency key, one after the other: the first kind's deliveries are the event
    log's rows, the second's have index entries; read 3 at a time, by endpoint, and counted."""
    tenant_id, _, producer, endpoint_ids = tenant
    made: list[str] = []
    for n in range(8):
        made += publish(platform, producer, tenant_id, key=f"k-{n}" if n % 3 == 0 else None)["delivery_ids"]
    assert len(logged_events(tenant_id)) == 5 and len(log_index_entries(tenant_id)) == 6

    pages = every_page(DeliveryFilter(tenant_id=tenant_id), limit=3)
    assert [i for page in pages for i in page] == newest_first(tenant_id, made)
    assert all(len(page) == 3 for page in pages[:-1])
    for endpoint_id in endpoint_ids:
        by_endpoint = every_page(DeliveryFilter(tenant_id=tenant_id, endpoint_id=endpoint_id), limit=2)
        mine = [d.id for d in read(tenant_id, made) if d.endpoint_id == endpoint_id]
        assert [i for page in by_endpoint for i in page] == newest_first(tenant_id, mine)
    everything = DeliveryFilter(tenant_id=tenant_id)
    assert deliveries().count(everything, utcnow(), up_to=len(made)) == BoundedCount(len(made), exact=True)


def test_a_batch_logs_its_events_without_a_key_each_at_its_own_time(platform: Platform, tenant: Tenant) -> None:
    tenant_id, _, producer, _ = tenant
    items: list[dict[str, Any]] = [{"type": "order.paid", "data": {"n": n}} for n in range(5)]
    items += [{"type": "order.paid", "data": {"n": n}, "idempotency_key": f"b-{n}"} for n in range(2)]
    answer = platform.call("POST", "/v1/events/batch", producer, {"tenant_id": tenant_id, "events": items})
    assert answer.status == 200, answer.body
    results = answer.json()["results"]

    logged = {event_log.event_item_of(item)["id"]: item for item in logged_events(tenant_id)}
    assert set(logged) == {r["event_id"] for r in results[:5]}
    for result in results[:5]:
        event = events().get(tenant_id, result["event_id"])
        assert event is not None
        for delivery in read(tenant_id, result["delivery_ids"]):
            assert delivery.created_at == event.timestamp  # its place in the log
    made = [i for r in results for i in r["delivery_ids"]]
    listed = [i for p in every_page(DeliveryFilter(tenant_id=tenant_id), limit=4) for i in p]
    assert listed == newest_first(tenant_id, made)


def test_a_crash_after_the_event_leaves_queued_deliveries_the_log_shows(platform: Platform, tenant: Tenant) -> None:
    """The event is written first, and accepts it: dying before any other write leaves its deliveries queued, read
    from its rows (the reconciler finds them there and sends them: tests/integration/test_crash_points.py)."""
    tenant_id, _, _, endpoint_ids = tenant
    event = new_event(tenant_id=tenant_id, event_type="order.paid", data={}, now=utcnow(), horizon_seconds=3600)
    made = [new_delivery(event, endpoint, event.timestamp) for endpoint in endpoints(tenant_id, endpoint_ids)]
    events().append([(event, made)])  # ... and the process dies

    listed = [i for p in every_page(DeliveryFilter(tenant_id=tenant_id), limit=3) for i in p]
    assert sorted(listed) == sorted(d.id for d in made)
    assert read(tenant_id, listed) == [
        from_data(Delivery, delivery_item(d)) for d in sorted(made, key=listed_order, reverse=True)
    ]
    counted = deliveries().count(DeliveryFilter(tenant_id=tenant_id, status=DeliveryStatus.QUEUED), utcnow(), up_to=10)
    assert counted == BoundedCount(2, exact=True)


def test_a_row_logged_before_unstored_deliveries_with_no_record_stands_for_nothing(
    platform: Platform, tenant: Tenant
) -> None:
    """An event logged before deliveries were left unstored names its endpoints alone: its deliveries were written
    after it, so dying between left rows that stand for nothing (the request failed, and nothing of it was
    accepted); the log shows none of them and stays readable."""
    tenant_id, _, _, endpoint_ids = tenant
    event = new_event(tenant_id=tenant_id, event_type="order.paid", data={}, now=utcnow(), horizon_seconds=3600)
    item = event_log.item(event_item(event), sharded(tenant_id, event.id), [])
    table(schema.EVENT_LOG).put_item(Item={**item, event_log.FAN_OUT: " ".join(endpoint_ids)})  # ... and it died

    assert every_page(DeliveryFilter(tenant_id=tenant_id), limit=3) == [[]]
    assert deliveries().count(DeliveryFilter(tenant_id=tenant_id), utcnow(), up_to=10) == BoundedCount(0, exact=True)


def test_an_event_logged_under_fewer_shards_is_read_listed_and_kept_after_the_count_is_raised(
    platform: Platform, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Published under 1 shard (ingest called here, in this process's environment), read under 8: an event the new
    count would put elsewhere is still read by its id, listed, and its expiry extended where it is."""
    tenant_id = tenant.id
    made: list[Accepted] = []
    while not any(sharded(tenant_id, m.event_id) != f"{tenant_id}#0" for m in made):  # 7 in 8 are elsewhere
        assert len(made) < 64, "64 events all on shard 0 of 8"  # (bounded: one in 8**64)
        monkeypatch.setenv(schema.DELIVERY_LOG_SHARDS, "1")
        made.append(wiring.ingest_service().publish(tenant_id=tenant_id, event_type="order.paid", data={}))
        monkeypatch.setenv(schema.DELIVERY_LOG_SHARDS, "8")
    moved = next(m for m in made if sharded(tenant_id, m.event_id) != f"{tenant_id}#0")

    event = events().get(tenant_id, moved.event_id)
    assert event is not None and event.id == moved.event_id
    events().extend_expiry(tenant_id, event.id, event.expires_at + 100)
    [stored] = [e for e in logged_events(tenant_id) if event_log.event_item_of(e)["id"] == event.id]
    assert stored[event_log.PARTITION] == f"{tenant_id}#0" and stored["expires_at"] == event.expires_at + 100
    listed = [i for p in every_page(DeliveryFilter(tenant_id=tenant_id), limit=5) for i in p]
    assert listed == newest_first(tenant_id, [i for m in made for i in m.delivery_ids])
    unstored = deliveries().get(moved.delivery_ids[0], tenant_id)  # no record: read from its event, moved or not
    assert unstored is not None and unstored.status == "queued" and unstored.event_id == moved.event_id


def test_an_event_is_logged_at_its_own_millisecond(platform: Platform, tenant: Tenant) -> None:
    """Its id is drawn at its timestamp's millisecond, so its key follows from its id (`event_log.sort_key`)."""
    accepted = publish(platform, tenant.producer, tenant.id)
    [stored] = logged_events(tenant.id)
    event = events().get(tenant.id, accepted["event_id"])
    assert event is not None
    assert stored[event_log.SORT] == f"{to_rfc3339(event.timestamp)}#{event.id}"
    assert stored[event_log.SORT] == event_log.sort_key(accepted["event_id"])
