"""Records as a test lays them out: whole-second times (stored times keep milliseconds), fixed ids, defaults
that any field can override."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hookrelay.domain.circuit import park_order
from hookrelay.domain.clock import epoch_seconds
from hookrelay.domain.models import Delivery, Endpoint, Event, SigningSecret

T0 = datetime(2025, 3, 7, 18, 0, tzinfo=UTC)
TENANT = "tn_contract"


def at(seconds: float) -> datetime:
    """T0 plus `seconds`."""
    return T0 + timedelta(seconds=seconds)


def an_endpoint(endpoint_id: str = "ep_1", **fields: Any) -> Endpoint:
    values: dict[str, Any] = {
        "id": endpoint_id,
        "tenant_id": TENANT,
        "url": "https://consumer.example/hook",
        "event_types": ["*"],
        "secrets": [SigningSecret(secret="whsec_contract", created_at=T0)],
        "created_at": T0,
        "updated_at": T0,
    }
    return Endpoint(**(values | fields))


def an_event(event_id: str = "evt_1", **fields: Any) -> Event:
    values: dict[str, Any] = {
        "id": event_id,
        "tenant_id": TENANT,
        "type": "order.updated",
        "timestamp": T0,
        "body": f'{{"id":"{event_id}","type":"order.updated","data":{{}}}}',
        "expires_at": epoch_seconds(T0 + timedelta(days=30)),
    }
    return Event(**(values | fields))


def a_delivery(delivery_id: str = "dlv_1", endpoint_id: str = "ep_1", **fields: Any) -> Delivery:
    """A queued delivery of event `evt_<n>` (n from the delivery id), ordered by its event's time (T0)."""
    event_id = "evt_" + delivery_id.removeprefix("dlv_")
    values: dict[str, Any] = {
        "id": delivery_id,
        "tenant_id": TENANT,
        "endpoint_id": endpoint_id,
        "event_id": event_id,
        "event_type": "order.updated",
        "message_group_id": f"{endpoint_id}#0",
        "created_at": T0,
        "updated_at": T0,
        "event_order": park_order(T0, event_id),
    }
    return Delivery(**(values | fields))
