"""Log pages (adapters/log_pages.py) on moto: deliveries written together share one entry of the tenant's log, and
the log reads them as if each had its own: in order, once each, paged by cursors, filtered by endpoint, found by the
reconciler; a crash between a page and its deliveries, and a fan-out written again, leave nothing wrong behind."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest

from hookrelay.adapters import log_pages, schema
from hookrelay.adapters.dynamodb import DeliveryTable, sharded
from hookrelay.domain.clock import utcnow
from hookrelay.domain.paging import BoundedCount
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ports import DeliveryFilter
from scripts.create_admin_key import create_admin_key
from tests.support.aws import moto_stack
from tests.support.platform import Platform
from tests.support.records import Seeded, every_page, log_index_entries, make, store

LOG = schema.DELIVERY_LOG_INDEX


@pytest.fixture(scope="module")
def platform() -> Iterator[Platform]:
    with moto_stack() as env:
        yield Platform(env=env, admin_token=create_admin_key(env["API_KEYS_TABLE"]).token)


def table() -> Any:
    return boto3.resource("dynamodb").Table(os.environ[schema.DELIVERIES.env_var])


def deliveries() -> DeliveryTable:
    return DeliveryTable(table(), boto3.resource("dynamodb").Table(os.environ[schema.EVENT_LOG.env_var]))


def new_tenant(platform: Platform, endpoints: int = 2) -> tuple[str, list[str]]:
    tenant_id, token = platform.new_tenant()
    return tenant_id, [platform.new_endpoint(token, f"http://127.0.0.1:9/{n}")["id"] for n in range(endpoints)]


def together(tenant_id: str, endpoint_ids: list[str], at: datetime, count: int) -> list[Seeded]:
    """`count` deliveries created in one millisecond (as ingest writes an event's fan-out or a batch), spread over
    the endpoints."""
    return [make(tenant_id, endpoint_ids[n % len(endpoint_ids)], at, DeliveryStatus.DELIVERED) for n in range(count)]


def newest_first(made: list[Seeded]) -> list[str]:
    return [m.delivery.id for m in sorted(made, key=lambda m: (m.delivery.created_at, m.delivery.id), reverse=True)]


def test_deliveries_written_together_have_one_log_entry_and_none_of_their_own(platform: Platform) -> None:
    tenant_id, endpoint_ids = new_tenant(platform)
    made = together(tenant_id, endpoint_ids, utcnow() - timedelta(minutes=5), 10)
    store(made)

    [entry] = log_index_entries(tenant_id)
    assert log_pages.is_page(entry["id"])
    for seeded in made:
        item = table().get_item(Key={"id": seeded.delivery.id})["Item"]
        assert LOG.partition_key not in item
    # Too few to share one: two deliveries written together have their own entries.
    other_tenant, other_endpoints = new_tenant(platform)
    store(together(other_tenant, other_endpoints, utcnow() - timedelta(minutes=5), log_pages.MIN_ROWS - 1))
    assert not any(log_pages.is_page(e["id"]) for e in log_index_entries(other_tenant))
    assert len(log_index_entries(other_tenant)) == log_pages.MIN_ROWS - 1


def test_the_log_reads_paged_deliveries_in_order_once_each_by_cursor_and_by_endpoint(platform: Platform) -> None:
    """Three pages' worth of deliveries written together, between and beside deliveries with their own entries (one
    of them in the very millisecond of a page, so ties break by id across both kinds), read 4 at a time."""
    tenant_id, endpoint_ids = new_tenant(platform)
    base = utcnow() - timedelta(minutes=10)
    made: list[Seeded] = []
    for n in range(3):
        group = together(tenant_id, endpoint_ids, base + timedelta(seconds=n), 7)
        alone = make(tenant_id, endpoint_ids[0], base + timedelta(seconds=n, milliseconds=500), DeliveryStatus.DEAD)
        store(group)
        store([alone])
        made += [*group, alone]
    tie = make(tenant_id, endpoint_ids[1], base + timedelta(seconds=1), DeliveryStatus.DELIVERED)
    store([tie])
    made.append(tie)

    pages = every_page(DeliveryFilter(tenant_id=tenant_id), limit=4)
    assert [i for page in pages for i in page] == newest_first(made)
    assert all(len(page) == 4 for page in pages[:-1])
    for endpoint_id in endpoint_ids:
        mine = [m for m in made if m.delivery.endpoint_id == endpoint_id]
        read = every_page(DeliveryFilter(tenant_id=tenant_id, endpoint_id=endpoint_id), limit=3)
        assert [i for page in read for i in page] == newest_first(mine)
    dead = every_page(DeliveryFilter(tenant_id=tenant_id, status=DeliveryStatus.DEAD), limit=10)
    assert [i for page in dead for i in page] == newest_first([m for m in made if m.delivery.status.value == "dead"])
    everything = DeliveryFilter(tenant_id=tenant_id)
    assert deliveries().count(everything, utcnow(), up_to=len(made)) == BoundedCount(len(made), exact=True)
    # A count stops at its limit, a log page's rows counted one by one.
    assert deliveries().count(everything, utcnow(), up_to=len(made) - 1) == BoundedCount(len(made) - 1, exact=False)


def test_a_crash_between_the_page_and_its_deliveries_leaves_rows_the_log_skips(platform: Platform) -> None:
    """The page is written first: dying before the deliveries leaves rows that stand for nothing (the request
    failed). The producer's retry writes them, and each is read once."""
    tenant_id, endpoint_ids = new_tenant(platform)
    made = together(tenant_id, endpoint_ids, utcnow() - timedelta(minutes=5), 5)
    [page] = log_pages.paginate([m.delivery for m in made])
    table().put_item(Item=log_pages.item(page, sharded(tenant_id, page.id)))  # ... and the process dies

    assert every_page(DeliveryFilter(tenant_id=tenant_id), limit=3) == [[]]
    store(made, with_events=False)
    assert [i for p in every_page(DeliveryFilter(tenant_id=tenant_id), limit=3) for i in p] == newest_first(made)


def test_deliveries_written_again_later_are_read_once_at_their_new_time(platform: Platform) -> None:
    """A fan-out run again (a retry under an idempotency key) rewrites its deliveries under a new page: the first
    page's rows then stand for nothing. One of them given its own entry since is read once too."""
    tenant_id, endpoint_ids = new_tenant(platform)
    first_time = utcnow() - timedelta(minutes=5)
    made = together(tenant_id, endpoint_ids, first_time, 4)
    store(made)
    again = [replace(m, delivery=replace(m.delivery, created_at=first_time + timedelta(seconds=2))) for m in made]
    store(again, with_events=False)
    single = replace(again[0], delivery=replace(again[0].delivery, created_at=first_time + timedelta(seconds=3)))
    store([single], with_events=False)  # alone: its own entry

    assert len([e for e in log_index_entries(tenant_id) if log_pages.is_page(e["id"])]) == 2
    read = [i for p in every_page(DeliveryFilter(tenant_id=tenant_id), limit=2) for i in p]
    assert read == newest_first([single, *again[1:]])


def test_a_page_is_not_a_delivery(platform: Platform) -> None:
    """Asked for by its id, through the repository or the API, a page is no delivery: 404, never a 500."""
    tenant_id, token = platform.new_tenant()
    endpoint_id = platform.new_endpoint(token, "http://127.0.0.1:9/a")["id"]
    store(together(tenant_id, [endpoint_id], utcnow() - timedelta(minutes=5), 3))
    [entry] = log_index_entries(tenant_id)
    assert deliveries().get(entry["id"]) is None
    assert deliveries().peek(entry["id"]) is None
    answer = platform.call("GET", f"/v1/deliveries/{entry['id']}", token)
    assert answer.status == 404, answer.body
    assert answer.headers["content-type"] == "application/problem+json"


def test_a_page_outlives_every_delivery_it_lists() -> None:
    """Waiting in its queue (the queue's retention), then retrying to the longest horizon, then the redrive window."""
    from hookrelay.domain.clock import RETENTION_DAYS
    from hookrelay.domain.schedule import MAX_HORIZON_SECONDS

    longest = timedelta(seconds=schema.DELIVERY_QUEUE.retention_seconds + MAX_HORIZON_SECONDS)
    assert longest + timedelta(days=RETENTION_DAYS) < log_pages.LIFETIME
