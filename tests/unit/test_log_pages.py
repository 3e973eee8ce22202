"""The log pages' rules (adapters/log_pages.py): which deliveries share a page, and a page's rows as index entries."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hookrelay.adapters import log_pages, schema
from hookrelay.domain import ids
from hookrelay.domain.models import Delivery
from hookrelay.domain.status import DeliveryStatus

AT = datetime(2026, 12, 3, 12, 0, 0, 123000, tzinfo=UTC)


def delivery(tenant_id: str = "ten_a", at: datetime = AT, endpoint_id: str = "ep_1") -> Delivery:
    event_id = ids.new_id("evt")
    return Delivery(
        id=ids.delivery_id(),
        tenant_id=tenant_id,
        endpoint_id=endpoint_id,
        event_id=event_id,
        event_type="t",
        status=DeliveryStatus.QUEUED,
        message_group_id=endpoint_id,
        created_at=at,
        updated_at=at,
    )


def test_a_page_lists_the_deliveries_of_one_tenant_and_millisecond_three_or_more() -> None:
    same = [delivery() for _ in range(3)]
    other_tenant = [delivery("ten_b") for _ in range(2)]
    a_millisecond_later = [delivery(at=AT + timedelta(milliseconds=1))]
    [page] = log_pages.paginate([*same, *other_tenant, *a_millisecond_later])
    assert page.tenant_id == "ten_a"
    assert {row.delivery_id for row in page.rows} == {d.id for d in same}
    assert page.created_at == "2026-12-03T12:00:00.123Z"
    assert log_pages.is_page(page.id)


def test_many_deliveries_are_split_into_pages_of_at_most_max_rows() -> None:
    many = [delivery() for _ in range(log_pages.MAX_ROWS + 5)]
    pages = log_pages.paginate(many)
    assert [len(p.rows) for p in pages] == [log_pages.MAX_ROWS, 5]
    assert len({p.id for p in pages}) == 2


def test_the_same_deliveries_make_the_same_page() -> None:
    same = [delivery() for _ in range(4)]
    assert log_pages.paginate(same) == log_pages.paginate(list(reversed(same)))
    assert log_pages.paginate(same)[0].id != log_pages.paginate(same[:3])[0].id


def test_a_page_reads_back_as_its_deliveries_entries() -> None:
    same = [delivery(endpoint_id=f"ep_{n}") for n in range(3)]
    [page] = log_pages.paginate(same)
    item = log_pages.item(page, "ten_a#2")
    assert item[schema.DELIVERY_LOG_INDEX.partition_key] == "ten_a#2"
    assert log_pages.is_page_item(item)
    entries = sorted(log_pages.entries(item), key=lambda e: e["id"])
    assert [(e["id"], e["endpoint_id"], e["event_id"]) for e in entries] == sorted(
        (d.id, d.endpoint_id, d.event_id) for d in same
    )
    assert {e["created_at"] for e in entries} == {page.created_at}
    assert {e[log_pages.PAGE] for e in entries} == {page.id}


def test_a_row_stands_for_its_delivery_only_while_nothing_superseded_it() -> None:
    [page] = log_pages.paginate([delivery() for _ in range(3)])
    row = next(log_pages.entries(log_pages.item(page, "ten_a#0")))
    stored = {"id": row["id"], "created_at": page.created_at}
    assert log_pages.stands_for(row, stored)
    assert not log_pages.stands_for(row, stored | {schema.DELIVERY_LOG_INDEX.partition_key: "ten_a#1"})
    assert not log_pages.stands_for(row, stored | {"created_at": "2026-12-03T12:00:01.000Z"})
    own = {"id": row["id"], "created_at": page.created_at}
    assert log_pages.stands_for(own, stored | {schema.DELIVERY_LOG_INDEX.partition_key: "ten_a#1"})


def test_a_page_of_a_fan_out_of_ten_is_one_write_unit() -> None:
    """The point of a page: ten deliveries' log in one item of at most 1 KB (one write unit) and its entry."""
    event = delivery()
    fan_out = [replace(event, id=ids.delivery_id(), endpoint_id=ids.endpoint_id()) for _ in range(10)]
    [page] = log_pages.paginate(fan_out)
    item = log_pages.item(page, f"{event.tenant_id}#0")
    size = sum(len(k) + (len(v) if isinstance(v, bytes | str) else 8) for k, v in item.items())
    assert size <= 1024, size


def test_the_architecture_doc_states_the_rule_the_code_keeps() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    words = {2: "Two", 3: "Three", 4: "Four", 5: "Five"}
    assert f"{words[log_pages.MIN_ROWS]} or more of one tenant created in the same millisecond share one" in doc
    assert f"{words[log_pages.MIN_ROWS]} or more deliveries written together" in doc
