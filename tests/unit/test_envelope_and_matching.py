from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from hookrelay.domain.envelope import envelope_body, message_group_id
from hookrelay.domain.matching import type_matches

WHEN = datetime(2026, 11, 30, 12, 0, 0, 123000, tzinfo=UTC)


def test_envelope_is_compact_json_with_rfc3339_utc_timestamp() -> None:
    body = envelope_body(event_id="evt_1", event_type="order.updated", timestamp=WHEN, data={"total": 1.5, "name": "é"})
    expected = '{"id":"evt_1","type":"order.updated","timestamp":"2026-11-30T12:00:00.123Z",'
    expected += '"data":{"total":1.5,"name":"é"}}'
    assert body == expected


def test_envelope_carries_ordering_key_and_sequence_only_when_given() -> None:
    plain = json.loads(envelope_body(event_id="e", event_type="t", timestamp=WHEN, data={}))
    assert "ordering_key" not in plain and "sequence" not in plain
    ordered = json.loads(
        envelope_body(event_id="e", event_type="t", timestamp=WHEN, data={}, ordering_key="order-7", sequence=3)
    )
    assert (ordered["ordering_key"], ordered["sequence"]) == ("order-7", 3)


def test_message_group_is_stable_per_ordering_key_and_bounded_by_concurrency() -> None:
    groups = {message_group_id("ep_1", 4, "order-7", f"evt_{i}") for i in range(50)}
    assert len(groups) == 1  # one key, one group, whatever the event
    spread = {message_group_id("ep_1", 4, None, f"evt_{i}") for i in range(200)}
    assert spread == {f"ep_1#{slot}" for slot in range(4)}


@pytest.mark.parametrize(
    ("event_type", "filters", "expected"),
    [
        ("order.updated", ["*"], True),
        ("order.updated", ["order.updated"], True),
        ("order.updated", ["order.*"], True),
        ("order.updated", ["*.updated"], True),
        ("order.updated", ["order.created"], False),
        ("orders.updated", ["order.*"], False),
        ("order.updated", ["invoice.*", "order.*"], True),
        ("order.updated", ["order"], False),
        ("order+updated", ["order.updated"], False),  # the dot is literal, not a regex wildcard
    ],
)
def test_event_type_filters(event_type: str, filters: list[str], expected: bool) -> None:
    assert type_matches(event_type, filters) is expected
