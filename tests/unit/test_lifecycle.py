"""The lifecycle rules every service shares: how events and deliveries are made, and how long each lives."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from hookrelay.domain.clock import RETENTION_DAYS, epoch_seconds
from hookrelay.domain.errors import Conflict
from hookrelay.domain.lifecycle import (
    ensure_deliverable,
    event_expiry,
    is_visible_to,
    new_delivery,
    new_event,
    retention_expiry,
)
from hookrelay.domain.models import Endpoint, EndpointState
from hookrelay.domain.status import DeliveryStatus

NOW = datetime(2025, 3, 7, 18, 0, tzinfo=UTC)
HORIZON = 72 * 3600


def endpoint(state: EndpointState = EndpointState.ENABLED) -> Endpoint:
    return Endpoint(
        id="ep_1", tenant_id="ten_1", url="https://hooks.example.com/in", event_types=["*"], state=state,
        secrets=[], max_in_flight=4, created_at=NOW, updated_at=NOW,
    )  # fmt: skip


def test_an_event_outlives_the_longest_delivery_of_it_by_the_redrive_window() -> None:
    event = new_event(
        tenant_id="ten_1", event_type="order.created", data={"n": 1}, now=NOW, horizon_seconds=HORIZON,
        ordering_key="k", sequence=7,
    )  # fmt: skip
    assert event.expires_at == event_expiry(NOW, HORIZON)
    assert event.expires_at == epoch_seconds(NOW + timedelta(seconds=HORIZON, days=RETENTION_DAYS))
    envelope = json.loads(event.body)
    assert envelope == {
        "id": event.id, "type": "order.created", "timestamp": "2025-03-07T18:00:00.000Z", "data": {"n": 1},
        "ordering_key": "k", "sequence": 7,
    }  # fmt: skip


def test_an_enabled_endpoint_gets_a_queued_delivery_and_a_disabled_one_a_cancelled_one() -> None:
    event = new_event(tenant_id="ten_1", event_type="a.b", data={}, now=NOW, horizon_seconds=HORIZON)
    queued = new_delivery(event, endpoint(), NOW)
    assert queued.status is DeliveryStatus.QUEUED and queued.expires_at is None
    assert queued.message_group_id.startswith("ep_1#")
    cancelled = new_delivery(event, endpoint(EndpointState.DISABLED), NOW)
    assert cancelled.status is DeliveryStatus.CANCELLED
    assert cancelled.completed_at == NOW and cancelled.expires_at == retention_expiry(NOW)


@pytest.mark.parametrize("state", [EndpointState.DISABLED, EndpointState.DELETED])
def test_new_deliveries_go_only_to_an_enabled_endpoint(state: EndpointState) -> None:
    assert ensure_deliverable(endpoint()).id == "ep_1"
    with pytest.raises(Conflict):
        ensure_deliverable(endpoint(state))


def test_another_tenants_or_an_expired_record_is_not_visible() -> None:
    event = new_event(tenant_id="ten_1", event_type="a.b", data={}, now=NOW, horizon_seconds=HORIZON)
    assert is_visible_to("ten_1", event, NOW)
    assert not is_visible_to("ten_2", event, NOW)
    assert not is_visible_to("ten_1", event, datetime.fromtimestamp(event.expires_at, UTC))
    assert not is_visible_to("ten_1", None, NOW)
