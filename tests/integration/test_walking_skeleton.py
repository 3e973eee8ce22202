"""Events in through the real ingest handler, signed webhooks out through the real delivery handler."""

from __future__ import annotations

import json

import pytest
from standardwebhooks import Webhook

from hookrelay.adapters.sqs import CARRIED_EVENT_MAX_BYTES
from tests.support.consumer import ScriptedConsumer
from tests.support.platform import Platform


def test_event_is_delivered_signed_and_verifiable(platform: Platform, consumer: ScriptedConsumer) -> None:
    tenant_id, tenant_token = platform.new_tenant()
    endpoint = platform.new_endpoint(tenant_token, consumer.url, ["order.*"])
    producer = platform.new_key("producer")

    accepted = platform.call(
        "POST", "/v1/events", producer, {"tenant_id": tenant_id, "type": "order.updated", "data": {"id": 42}}
    )
    assert accepted.status == 202, accepted.body
    event_id = accepted.json()["event_id"]
    assert len(accepted.json()["delivery_ids"]) == 1

    assert platform.pump() == 1
    [request] = consumer.wait_for(1)
    envelope = Webhook(endpoint["secret"]).verify(request.body, request.headers)
    assert envelope == {
        "id": event_id,
        "type": "order.updated",
        "timestamp": envelope["timestamp"],
        "data": {"id": 42},
    }
    assert request.headers["webhook-id"] == event_id
    assert json.loads(request.body)["id"] == event_id


@pytest.mark.parametrize("size", [100, CARRIED_EVENT_MAX_BYTES], ids=["carried", "read"])
def test_small_and_large_events_arrive_exactly_as_signed(
    platform: Platform, consumer: ScriptedConsumer, size: int
) -> None:
    """A small event travels in its first attempt's message, a larger one is read from its table: the webhook is
    the same either way."""
    tenant_id, tenant_token = platform.new_tenant()
    endpoint = platform.new_endpoint(tenant_token, consumer.url)
    data = {"note": "é" * size}  # six bytes a character once escaped into the message: past the limit
    producer = platform.new_key("producer")
    accepted = platform.call("POST", "/v1/events", producer, {"tenant_id": tenant_id, "type": "a", "data": data})
    assert accepted.status == 202, accepted.body
    assert platform.pump() == 1
    [request] = consumer.wait_for(1)
    assert Webhook(endpoint["secret"]).verify(request.body, request.headers)["data"] == data
