"""The delivery log's write shards as a deployment setting (`log_shards`): paging over many shards, and over a
count raised between two pages, returns every delivery once, newest first; one page's reads stay one Query per
shard (and its items)."""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import boto3
import botocore.client
import pytest

from hookrelay.adapters import schema
from hookrelay.adapters.dynamodb import DeliveryTable, log_shards
from hookrelay.domain.clock import utcnow
from hookrelay.domain.paging import Position
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ports import DeliveryFilter
from scripts.create_admin_key import create_admin_key
from tests.support.aws import moto_stack
from tests.support.platform import Platform
from tests.support.records import Seeded, make, store


@pytest.fixture(scope="module")
def platform() -> Iterator[Platform]:
    with moto_stack() as env:
        yield Platform(env=env, admin_token=create_admin_key(env["API_KEYS_TABLE"]).token)


@pytest.fixture
def shard_count(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Set the deployed count (the process's environment: the adapter is called here, outside any function)."""
    return lambda n: monkeypatch.setenv(schema.DELIVERY_LOG_SHARDS, str(n))


def deliveries() -> DeliveryTable:
    return DeliveryTable(
        boto3.resource("dynamodb").Table(os.environ[schema.DELIVERIES.env_var]),
        boto3.resource("dynamodb").Table(os.environ[schema.EVENT_LOG.env_var]),
    )


def new_tenant(platform: Platform) -> tuple[str, str]:
    tenant_id, token = platform.new_tenant()
    return tenant_id, platform.new_endpoint(token, "http://127.0.0.1:9/a")["id"]


def seeded(tenant_id: str, endpoint_id: str, times: list[datetime]) -> list[Seeded]:
    made = [make(tenant_id, endpoint_id, at, DeliveryStatus.DELIVERED) for at in times]
    store(made)
    return made


def shard_of_entry(made: Seeded) -> int:
    """The shard the delivery's entry is under in the by_tenant index, as written."""
    (index,) = [i for i in schema.DELIVERIES.indexes if i.name == "by_tenant"]
    table = boto3.resource("dynamodb").Table(os.environ[schema.DELIVERIES.env_var])
    item = table.get_item(Key={"id": made.delivery.id})["Item"]
    return int(str(item[index.partition_key]).rpartition("#")[2])


def newest_first(made: list[Seeded]) -> list[str]:
    return [m.delivery.id for m in sorted(made, key=lambda m: (m.delivery.created_at, m.delivery.id), reverse=True)]


def read(where: DeliveryFilter, limit: int, start: Position | None = None) -> tuple[list[str], Position | None]:
    page = deliveries().find(where, limit, start, utcnow())
    return [d.id for d in page.deliveries], page.resume_after


def every_page(where: DeliveryFilter, limit: int, start: Position | None = None) -> list[list[str]]:
    pages = []
    while True:
        ids, start = read(where, limit, start)
        pages.append(ids)
        if start is None:
            return pages


def test_an_unset_count_is_the_default_and_a_bad_one_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(schema.DELIVERY_LOG_SHARDS, raising=False)
    assert log_shards() == schema.DEFAULT_LOG_SHARDS
    for bad in ("0", str(schema.MAX_LOG_SHARDS + 1), "four"):
        monkeypatch.setenv(schema.DELIVERY_LOG_SHARDS, bad)
        with pytest.raises(ValueError, match="log_shards"):
            log_shards()


def test_paging_over_many_shards_returns_every_delivery_once_newest_first(platform: Platform, shard_count: Any) -> None:
    """64 shards (the scatter-gather's concurrent reads), 130 deliveries, a third of them in the same millisecond
    as another (the index orders by time only; the merge breaks ties by id), read 17 at a time."""
    shard_count(64)
    tenant_id, endpoint_id = new_tenant(platform)
    base = utcnow() - timedelta(minutes=10)
    made = seeded(tenant_id, endpoint_id, [base + timedelta(milliseconds=n - n % 3) for n in range(130)])
    assert len(Counter(m.delivery.created_at for m in made)) < 130  # ties there are

    pages = every_page(DeliveryFilter(tenant_id=tenant_id), limit=17)

    assert [i for page in pages for i in page] == newest_first(made)
    assert [len(page) for page in pages] == [17] * 7 + [11]
    by_endpoint = every_page(DeliveryFilter(tenant_id=tenant_id, endpoint_id=endpoint_id), limit=50)
    assert [i for page in by_endpoint for i in page] == newest_first(made)


def test_a_count_raised_between_pages_keeps_the_old_entries_and_the_cursor(
    platform: Platform, shard_count: Any
) -> None:
    """Written under 4 shards, a first page read; the count raised to 32 and more written (interleaved in time with
    the first, so the continued read must merge both); the cursor resumes where it was: each delivery once, in
    order, the old ones from the shards they were written to."""
    tenant_id, endpoint_id = new_tenant(platform)
    base = utcnow() - timedelta(minutes=10)
    shard_count(4)
    old = seeded(tenant_id, endpoint_id, [base + timedelta(milliseconds=2 * n) for n in range(60)])
    where = DeliveryFilter(tenant_id=tenant_id)
    first, cursor = read(where, limit=20)
    assert first == newest_first(old)[:20] and cursor is not None

    shard_count(32)
    new = seeded(tenant_id, endpoint_id, [base + timedelta(milliseconds=2 * n + 1) for n in range(60)])
    assert max(shard_of_entry(m) for m in new) >= 4  # the raise took: new entries spread past the old shards
    rest = [i for page in every_page(where, limit=20, start=cursor) for i in page]

    last_read = next(m.delivery for m in old if m.delivery.id == first[-1])
    below = [m for m in old + new if (m.delivery.created_at, m.delivery.id) < (last_read.created_at, last_read.id)]
    assert rest == newest_first(below)
    assert len(set(first + rest)) == len(first + rest)
    assert [i for page in every_page(where, limit=25) for i in page] == newest_first(old + new)


@pytest.fixture
def queries(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """The DynamoDB operations made from here on, from any thread: (operation, the thread's id)."""
    made: list[tuple[str, int]] = []
    original = botocore.client.BaseClient._make_api_call

    def recorded(client: Any, operation: str, params: dict[str, Any]) -> Any:
        if client.meta.service_model.service_name == "dynamodb":
            made.append((operation, threading.get_ident()))  # atomic: the scatter's threads may record at once
        return original(client, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", recorded)
    return made


def test_one_page_over_64_shards_costs_a_query_per_shard_and_its_items(
    platform: Platform, shard_count: Any, queries: list[tuple[str, int]]
) -> None:
    """What the scatter-gather costs: one Query of each shard of each half of the log, the index's and the event
    log's (each reads at most _MIN_SHARD_PAGE entries or events, half a read unit for a few small ones), and one
    BatchGetItem of the page's items; the Queries go out at once, from several threads, not one after the other."""
    shard_count(64)
    tenant_id, endpoint_id = new_tenant(platform)
    seeded(tenant_id, endpoint_id, [utcnow() - timedelta(minutes=5, milliseconds=n) for n in range(200)])
    queries.clear()

    ids, cursor = read(DeliveryFilter(tenant_id=tenant_id), limit=50)

    assert len(ids) == 50 and cursor is not None
    assert Counter(operation for operation, _ in queries) == {"Query": 2 * 64, "BatchGetItem": 1}
    assert len({thread for operation, thread in queries if operation == "Query"}) > 1
