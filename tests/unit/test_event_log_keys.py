"""The event log's keys (adapters/event_log.py): an event is logged only when its id is timed at its own millisecond,
so its sort key follows from its id; a keyed id, whatever moment its digest reads as, is never taken for one; an
event's rows are its fan-out's deliveries, with the ids ingest gave them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookrelay.adapters import event_log, log_pages
from hookrelay.adapters.dynamodb import event_item
from hookrelay.domain import ids
from hookrelay.domain.clock import to_rfc3339, truncate_to_milliseconds
from hookrelay.domain.lifecycle import fan_out_id, new_event
from tests.support.builders import an_endpoint

NOW = datetime(2026, 12, 5, 17, 30, 1, 123999, tzinfo=UTC)


@given(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(9000, 1, 1), timezones=st.just(UTC)))
def test_an_id_drawn_at_a_moment_reads_back_as_its_millisecond(moment: datetime) -> None:
    read = ids.moment_of(ids.id_at("evt", moment))
    assert read == truncate_to_milliseconds(moment)


@given(st.text(min_size=1, max_size=80))
def test_a_keyed_id_reads_as_some_moment_or_none_and_never_fails(key: str) -> None:
    keyed = ids.keyed_id("evt", key)
    moment = ids.moment_of(keyed)
    assert moment is None or moment.tzinfo is not None  # (about 8% of digests read past the year 9999: None)


def test_ids_of_no_such_form_have_no_moment() -> None:
    for identifier in ("evt_1", "evt_missing", "seq#tn#k", "evt_" + "Z" * 26, "evt_" + "0" * 25 + "U"):
        assert ids.moment_of(identifier) is None


def test_an_event_made_by_ingest_is_loggable_and_keyed_at_its_own_time() -> None:
    event = new_event(tenant_id="tn_1", event_type="a.b", data={}, now=NOW, horizon_seconds=60)
    assert event_log.is_loggable(event)
    assert event_log.sort_key(event.id) == f"{to_rfc3339(NOW)}#{event.id}"
    assert event_log.may_be_logged(event.id, NOW + timedelta(days=30))
    assert not event_log.may_be_logged(event.id, NOW + timedelta(days=365))


def test_an_event_with_a_keyed_id_cannot_be_appended() -> None:
    keyed = new_event(
        tenant_id="tn_1", event_type="a.b", data={}, now=NOW, horizon_seconds=60, event_id=ids.keyed_id("evt", "k")
    )
    assert not event_log.is_loggable(keyed)


def test_the_bounds_of_a_millisecond_hold_its_events_and_no_others() -> None:
    at = to_rfc3339(NOW)
    key = event_log.sort_key(ids.id_at("evt", NOW))
    before = event_log.sort_key(ids.id_at("evt", NOW - timedelta(milliseconds=1)))
    after = event_log.sort_key(ids.id_at("evt", NOW + timedelta(milliseconds=1)))
    assert event_log.lower_bound(at) <= key <= event_log.upper_bound(at)
    assert before < event_log.lower_bound(at) and after > event_log.upper_bound(at)


@pytest.mark.parametrize("fan_out", [0, 1, 3])
def test_an_events_rows_are_its_fan_outs_deliveries_newest_id_first(fan_out: int) -> None:
    event = new_event(tenant_id="tn_1", event_type="a.b", data={}, now=NOW, horizon_seconds=60)
    endpoints = [an_endpoint(f"ep_{n}") for n in range(fan_out)]
    stored = event_log.item(event_item(event), "tn_1#0", [e.id for e in endpoints])
    rows = list(event_log.entries(stored))
    expected = sorted((fan_out_id(event, e) for e in endpoints), reverse=True)
    assert [row["id"] for row in rows] == expected
    assert all(row["created_at"] == to_rfc3339(NOW) and row[log_pages.PAGE] == event.id for row in rows)
    assert {row["endpoint_id"] for row in rows} == {e.id for e in endpoints}


def test_a_logged_event_keeps_nothing_twice_and_reads_back_as_stored_elsewhere() -> None:
    """Its tenant, timestamp and id are its key's; read back, the item is the Events table's, exactly."""
    event = new_event(tenant_id="ten_1", event_type="a.b", data={"n": 1}, now=NOW, horizon_seconds=60)
    stored = event_log.item(event_item(event), "ten_1#3", ["ep_1"])
    assert not {"tenant_id", "timestamp", "id"} & set(stored)
    assert event_log.event_item_of(stored) == event_item(event)
