"""adapters/records.py: the domain's records (dataclasses) as DynamoDB items and queue JSON, and back."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookrelay.adapters.records import UnreadableRecord, from_data, to_data
from hookrelay.domain.circuit import CircuitState
from hookrelay.domain.classification import FailureKind, Outcome
from hookrelay.domain.clock import truncate_to_milliseconds
from hookrelay.domain.models import (
    ApiKey,
    Attempt,
    Delivery,
    Endpoint,
    Event,
    FailureNotice,
    PortalSession,
    SigningSecret,
    Tenant,
)
from hookrelay.domain.paging import Position
from hookrelay.domain.redrive import Redrive, RedriveState
from hookrelay.domain.status import DeadReason, DeliveryStatus
from tests.support.builders import T0, a_delivery, an_endpoint, an_event, at


def an_attempt(number: int = 1, **fields: Any) -> Attempt:
    values: dict[str, Any] = {"number": number, "started_at": at(number), "latency_ms": 12, "outcome": Outcome.RETRY}
    return Attempt(**(values | fields))


def every_field_set() -> list[Any]:
    """One of each record, its optional fields given (so that each field's reader is used)."""
    failed = an_attempt(
        error=FailureKind.TIMEOUT,
        error_detail="read timed out",
        status_code=503,
        response_excerpt="busy",
        retry_after=1.5,
    )
    return [
        Tenant(id="tn_1", name="Acme", created_at=T0),
        ApiKey(key_id="k_1", role="admin", secret_hash="h", created_at=T0, description="ci", revoked_at=at(5)),
        PortalSession(
            id="ps_1", tenant_id="tn_1", secret_hash="h", created_at=T0, expires_at=1_900_000_000, opened_by="k_1"
        ),
        an_endpoint(
            description="orders",
            secrets=[SigningSecret(secret="whsec_x", created_at=T0, expires_at=at(60))],
            failing_since=at(1),
            failure_notice=FailureNotice.FAILING_1D,
            disabled_reason="failing",
            circuit=CircuitState.OPEN,
            circuit_failed=["dlv_1", "dlv_2"],
            circuit_opened_at=at(2),
            next_probe_at=at(3),
            circuit_closing=True,
            drain_paused_until=at(4),
        ),
        an_event(ordering_key="order-7", sequence=7),
        a_delivery(
            status=DeliveryStatus.DEAD,
            attempts=[failed, an_attempt(2, status_code=410, outcome=Outcome.RETRY_LIMITED)],
            attempt_count=2,
            first_attempt_at=at(1),
            next_attempt_at=at(2),
            completed_at=at(3),
            replay_of="dlv_0",
            claimed_at=at(2),
            expires_at=1_900_000_000,
            dead_lettered_at=at(3),
            dead_reason=DeadReason.EXHAUSTED,
            event_order="0001",
            parked_at=at(2),
        ),
        Redrive(
            id="rd_1",
            tenant_id="tn_1",
            endpoint_id="ep_1",
            since=T0,
            until=at(3600),
            status_filter=DeliveryStatus.DEAD,
            state=RedriveState.COMPLETED,
            total=3,
            position=Position("cursor"),
            created_at=T0,
            completed_at=at(60),
            error="page 2 failed",
            expires_at=1_900_000_000,
        ),
    ]


@pytest.mark.parametrize("record", every_field_set(), ids=lambda r: type(r).__name__)
def test_a_record_comes_back_as_it_was_written_from_an_item_and_from_json(record: Any) -> None:
    item = to_data(record, decimals=True)
    assert from_data(type(record), item) == record
    assert from_data(type(record), json.loads(json.dumps(to_data(record)))) == record


def test_times_are_written_at_fixed_millisecond_width_so_that_they_sort_as_stored() -> None:
    written = to_data(an_attempt(started_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)))
    assert written["started_at"] == "2026-01-02T03:04:05.000Z"
    finer = datetime(2026, 1, 2, 3, 4, 5, 678_901, tzinfo=UTC)
    assert from_data(Attempt, to_data(an_attempt(started_at=finer))).started_at == truncate_to_milliseconds(finer)


def test_enums_are_their_values_absent_fields_are_left_out_and_floats_are_decimals_in_an_item() -> None:
    item = to_data(an_attempt(retry_after=2.5), decimals=True)
    assert item == {
        "number": 1,
        "started_at": "2025-03-07T18:00:01.000Z",
        "latency_ms": 12,
        "outcome": "retry",
        "retry_after": Decimal("2.5"),
    }
    assert to_data(an_attempt(retry_after=2.5))["retry_after"] == 2.5


def test_a_set_is_a_dynamodb_set_in_an_item_a_sorted_list_in_json_and_left_out_when_empty() -> None:
    marked = replace(an_endpoint(), tail_marks=frozenset({"7", "12"}))
    assert to_data(marked, decimals=True)["tail_marks"] == {"7", "12"}  # DynamoDB's string set
    assert to_data(marked)["tail_marks"] == ["12", "7"]
    assert from_data(Endpoint, to_data(marked, decimals=True)).tail_marks == {"7", "12"}
    assert from_data(Endpoint, json.loads(json.dumps(to_data(marked)))).tail_marks == {"7", "12"}
    assert "tail_marks" not in to_data(an_endpoint(), decimals=True)  # DynamoDB has no empty set
    with pytest.raises(UnreadableRecord):
        from_data(Endpoint, to_data(an_endpoint()) | {"tail_marks": "7"})


def test_an_item_s_own_keys_are_ignored_and_its_numbers_read_as_the_fields_types() -> None:
    item = to_data(a_delivery(attempt_count=3), decimals=True) | {"by_tenant": "tn_1#3", "attempt_count": Decimal(3)}
    read = from_data(Delivery, item)
    assert read == a_delivery(attempt_count=3)
    assert type(read.attempt_count) is int


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"attempt_count": "3"}, "a string for an int"),
        ({"attempt_count": Decimal("2.5")}, "a fraction for an int"),
        ({"attempt_count": True}, "a bool for an int"),
        ({"status": "lost"}, "no such status"),
        ({"created_at": 1_700_000_000}, "a number for a time"),
        ({"created_at": "yesterday"}, "not a time"),
        ({"attempts": {"number": 1}}, "a map for a list"),
        ({"attempts": [{"number": 1}]}, "an attempt without its other fields"),
        ({"tenant_id": 7}, "a number for a string"),
    ],
)
def test_data_that_does_not_fit_its_record_is_unreadable_never_a_wrong_record(change: dict[str, Any], why: str) -> None:
    with pytest.raises(UnreadableRecord):
        from_data(Delivery, to_data(a_delivery()) | change)


def test_a_record_missing_a_field_it_needs_or_not_a_map_is_unreadable() -> None:
    data = to_data(an_event())
    del data["body"]
    with pytest.raises(UnreadableRecord):
        from_data(Event, data)
    with pytest.raises(UnreadableRecord):
        from_data(Event, ["evt_1"])


def test_an_absent_optional_field_reads_as_its_default() -> None:
    data = to_data(an_endpoint())
    for name in ("circuit", "circuit_failed", "probes_made", "state", "description"):
        data.pop(name, None)
    assert from_data(Endpoint, data) == an_endpoint()


times = st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)).map(
    truncate_to_milliseconds
)
texts = st.text(max_size=20)
attempts = st.builds(
    Attempt,
    number=st.integers(1, 100),
    started_at=times,
    latency_ms=st.integers(0, 10**6),
    status_code=st.none() | st.integers(100, 599),
    error=st.none() | st.sampled_from(FailureKind),
    error_detail=st.none() | texts,
    response_excerpt=st.none() | texts,
    outcome=st.sampled_from(Outcome),
    retry_after=st.none() | st.floats(0, 10**6, allow_nan=False),
)
deliveries = st.builds(
    Delivery,
    id=texts,
    tenant_id=texts,
    endpoint_id=texts,
    event_id=texts,
    event_type=texts,
    status=st.sampled_from(DeliveryStatus),
    message_group_id=texts,
    attempts=st.lists(attempts, max_size=4),
    attempt_count=st.integers(0, 100),
    created_at=times,
    updated_at=times,
    first_attempt_at=st.none() | times,
    completed_at=st.none() | times,
    expires_at=st.none() | st.integers(0, 2**40),
    dead_reason=st.none() | st.sampled_from(DeadReason),
    parked_at=st.none() | times,
)


@settings(max_examples=200, deadline=None)
@given(deliveries)
def test_any_delivery_comes_back_as_written(delivery: Delivery) -> None:
    assert from_data(Delivery, to_data(delivery, decimals=True)) == delivery
    assert from_data(Delivery, json.loads(json.dumps(to_data(delivery)))) == delivery
