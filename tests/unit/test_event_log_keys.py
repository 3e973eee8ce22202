"""The event log's keys (adapters/event_log.py): an event is logged only when its id is timed at its own millisecond,
so its sort key follows from its id; a keyed id, whatever moment its digest reads as, is never taken for one; an
event's rows are its fan-out's deliveries, with the ids ingest gave them, and read back as those ingest left
unstored."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookrelay.adapters import event_log, log_pages
from hookrelay.adapters.dynamodb import delivery_item, event_item, unstored_of
from hookrelay.adapters.records import from_data
from hookrelay.domain import ids, trace_context
from hookrelay.domain.circuit import CircuitState
from hookrelay.domain.clock import to_rfc3339, truncate_to_milliseconds
from hookrelay.domain.lifecycle import (
    fan_out_id,
    may_stay_unstored,
    new_delivery,
    new_event,
    parked_on_arrival,
    queued_delivery,
)
from hookrelay.domain.models import Delivery, EndpointState
from hookrelay.domain.status import DeliveryStatus
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
    stored = event_log.item(event_item(event), "tn_1#0", [new_delivery(event, e, NOW) for e in endpoints])
    rows = list(event_log.entries(stored))
    expected = sorted((fan_out_id(event, e) for e in endpoints), reverse=True)
    assert [row["id"] for row in rows] == expected
    assert all(row["created_at"] == to_rfc3339(NOW) and row[log_pages.PAGE] == event.id for row in rows)
    assert {row["endpoint_id"] for row in rows} == {e.id for e in endpoints}


@given(
    max_in_flight=st.integers(min_value=1, max_value=50),
    queue_shard=st.integers(min_value=0, max_value=63),
    ordering_key=st.none() | st.text(min_size=1, max_size=20),
    traced=st.booleans(),
    body_bytes=st.integers(min_value=0, max_value=3000),
)
def test_a_row_reads_back_as_the_delivery_ingest_left_unstored(
    max_in_flight: int, queue_shard: int, ordering_key: str | None, traced: bool, body_bytes: int
) -> None:
    """What the settle (or any first write) creates and every read shows of a delivery with no record is exactly
    what ingest made, as a stored record would read: its group (an endpoint's `max_in_flight` may change after),
    its queue shard, its event's type, time and trace."""
    trace = trace_context.start(sampled=True) if traced else None
    data = {"blob": "x" * body_bytes}
    event = new_event(
        tenant_id="tn_1",
        event_type="a.b",
        data=data,
        now=NOW,
        horizon_seconds=60,
        ordering_key=ordering_key,
        trace=trace,
    )
    endpoint = replace(an_endpoint("ep_1"), max_in_flight=max_in_flight, queue_shard=queue_shard)
    delivery = new_delivery(event, endpoint, event.timestamp)
    assert may_stay_unstored(delivery)
    (row,) = event_log.entries(event_log.item(event_item(event), "tn_1#0", [delivery]))
    assert unstored_of(row) == from_data(Delivery, delivery_item(delivery))


def test_only_a_fan_out_as_ingest_made_it_may_stay_unstored() -> None:
    event = new_event(tenant_id="tn_1", event_type="a.b", data={}, now=NOW, horizon_seconds=60)
    endpoint = an_endpoint("ep_1")
    made = new_delivery(event, endpoint, NOW)
    keyed = new_event(
        tenant_id="tn_1", event_type="a.b", data={}, now=NOW, horizon_seconds=60, event_id=ids.keyed_id("evt", "k")
    )
    assert may_stay_unstored(made)
    assert not may_stay_unstored(parked_on_arrival(made, replace(endpoint, circuit=CircuitState.OPEN), NOW))
    assert not may_stay_unstored(new_delivery(event, replace(endpoint, state=EndpointState.DISABLED), NOW))
    assert not may_stay_unstored(new_delivery(event, endpoint, NOW + timedelta(milliseconds=1)))  # not its event's ms
    assert not may_stay_unstored(queued_delivery(event, endpoint, NOW))  # a random id: not its event's fan-out
    assert not may_stay_unstored(new_delivery(keyed, endpoint, NOW))  # a keyed id: not timed at its event
    assert not may_stay_unstored(replace(made, posted_at=NOW))
    assert not may_stay_unstored(replace(made, attempt_count=1, status=DeliveryStatus.DELIVERED))


def test_a_row_of_an_event_logged_before_unstored_deliveries_stands_for_a_record_only() -> None:
    """Rows written before deliveries were left unstored name the endpoint alone: its delivery was always written,
    so a row with no record is a crash's leftover, never read as a queued delivery."""
    event = new_event(tenant_id="tn_1", event_type="a.b", data={}, now=NOW, horizon_seconds=60)
    stored = {**event_log.item(event_item(event), "tn_1#0", []), event_log.FAN_OUT: "ep_1 ep_2"}
    rows = list(event_log.entries(stored))
    assert {row["endpoint_id"] for row in rows} == {"ep_1", "ep_2"}
    assert [unstored_of(row) for row in rows] == [None, None]


def test_a_delivery_outside_its_endpoints_message_groups_is_refused_a_row() -> None:
    event = new_event(tenant_id="tn_1", event_type="a.b", data={}, now=NOW, horizon_seconds=60)
    delivery = replace(new_delivery(event, an_endpoint("ep_1"), NOW), message_group_id="retry~x")
    with pytest.raises(ValueError, match="message groups"):
        event_log.item(event_item(event), "tn_1#0", [delivery])


def test_a_logged_event_keeps_nothing_twice_and_reads_back_as_stored_elsewhere() -> None:
    """Its tenant, timestamp and id are its key's; read back, the item is the Events table's, exactly."""
    event = new_event(tenant_id="ten_1", event_type="a.b", data={"n": 1}, now=NOW, horizon_seconds=60)
    stored = event_log.item(event_item(event), "ten_1#3", [new_delivery(event, an_endpoint("ep_1"), NOW)])
    assert not {"tenant_id", "timestamp", "id"} & set(stored)
    assert event_log.event_item_of(stored) == event_item(event)
