"""POST /v1/deliveries/{id}/replay and POST /v1/endpoints/{id}/test, through the real handlers and queue."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from standardwebhooks import Webhook

from hookrelay import wiring
from hookrelay.domain.clock import utcnow
from hookrelay.domain.models import EndpointState
from hookrelay.domain.status import DeliveryStatus
from local.sqs_source import invoke_batch, queue_arn_of
from tests.support.aws import as_function
from tests.support.consumer import Reply, ScriptedConsumer
from tests.support.platform import Platform
from tests.support.records import seed, stored_event


def publish(platform: Platform, tenant_id: str) -> dict:
    producer = platform.new_key("producer")
    event = {"tenant_id": tenant_id, "type": "order.updated", "data": {"id": 1, "total": 12.5}}
    accepted = platform.call("POST", "/v1/events", producer, event)
    assert accepted.status == 202, accepted.body
    return accepted.json()


def test_replay_sends_the_same_event_bytes_as_a_new_delivery(platform: Platform, consumer: ScriptedConsumer) -> None:
    tenant_id, token = platform.new_tenant()
    endpoint = platform.new_endpoint(token, consumer.url)
    accepted = publish(platform, tenant_id)
    [original_id] = accepted["delivery_ids"]
    platform.pump()

    response = platform.call("POST", f"/v1/deliveries/{original_id}/replay", token)
    assert response.status == 202, response.body
    replay = response.json()
    assert replay["replay_of"] == original_id and replay["event_id"] == accepted["event_id"]
    assert replay["delivery_id"] != original_id
    platform.pump()

    first, second = consumer.wait_for(2)
    assert second.body == first.body
    assert second.headers["webhook-id"] == first.headers["webhook-id"] == accepted["event_id"]
    Webhook(endpoint["secret"]).verify(second.body, second.headers)
    replayed = platform.call("GET", f"/v1/deliveries/{replay['delivery_id']}", token).json()
    assert replayed["status"] == "delivered" and replayed["replay_of"] == original_id
    assert [a["number"] for a in replayed["attempts"]] == [1]
    original = platform.call("GET", f"/v1/deliveries/{original_id}", token).json()
    assert original["replay_of"] is None and len(original["attempts"]) == 1


def test_replay_may_run_while_the_original_is_still_retrying(platform: Platform, consumer: ScriptedConsumer) -> None:
    tenant_id, token = platform.new_tenant()
    platform.new_endpoint(token, consumer.url)
    consumer.queue([Reply(503)])
    [original_id] = publish(platform, tenant_id)["delivery_ids"]
    platform.pump()
    assert platform.call("GET", f"/v1/deliveries/{original_id}", token).json()["status"] == "retrying"

    replay_id = platform.call("POST", f"/v1/deliveries/{original_id}/replay", token).json()["delivery_id"]
    platform.pump()
    assert platform.call("GET", f"/v1/deliveries/{replay_id}", token).json()["status"] == "delivered"
    assert platform.call("GET", f"/v1/deliveries/{original_id}", token).json()["status"] == "retrying"


def test_replay_to_a_disabled_endpoint_conflicts(platform: Platform, consumer: ScriptedConsumer) -> None:
    tenant_id, token = platform.new_tenant()
    endpoint_id = platform.new_endpoint(token, consumer.url)["id"]
    [original_id] = publish(platform, tenant_id)["delivery_ids"]
    platform.pump()
    endpoints = wiring.delivery_log_service().endpoints
    endpoints.put(replace(endpoints.get(tenant_id, endpoint_id), state=EndpointState.DISABLED))

    for path in (f"/v1/deliveries/{original_id}/replay", f"/v1/endpoints/{endpoint_id}/test"):
        response = platform.call("POST", path, token)
        assert response.status == 409, response.body
        assert response.headers["content-type"] == "application/problem+json"
    assert platform.pump() == 0


def test_replay_of_an_expired_event_is_gone(platform: Platform, consumer: ScriptedConsumer) -> None:
    tenant_id, token = platform.new_tenant()
    platform.new_endpoint(token, consumer.url)
    accepted = publish(platform, tenant_id)
    platform.pump()
    # TTL has passed but DynamoDB has not deleted the item yet: the event is gone all the same.
    log, key, _ = stored_event(tenant_id, accepted["event_id"])
    log.update_item(
        Key=key,
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": 1},
    )
    response = platform.call("POST", f"/v1/deliveries/{accepted['delivery_ids'][0]}/replay", token)
    assert response.status == 410, response.body
    assert platform.call("GET", f"/v1/events/{accepted['event_id']}", token).status == 404


def test_a_test_event_is_delivered_now_to_that_endpoint_only(platform: Platform, consumer: ScriptedConsumer) -> None:
    _, token = platform.new_tenant()
    endpoint = platform.new_endpoint(token, consumer.url, ["order.*"])  # the filter does not apply to tests
    platform.new_endpoint(token, consumer.url + "/other")

    response = platform.call("POST", f"/v1/endpoints/{endpoint['id']}/test", token)
    assert response.status == 202, response.body
    sent = response.json()
    assert platform.pump() == 1
    [request] = consumer.wait_for(1)
    assert request.path == "/hook" and request.headers["webhook-id"] == sent["event_id"]
    envelope = Webhook(endpoint["secret"]).verify(request.body, request.headers)
    assert envelope["type"] == "webhook.test"
    delivery = platform.call("GET", f"/v1/deliveries/{sent['delivery_id']}", token).json()
    assert delivery["status"] == "delivered" and delivery["event_id"] == sent["event_id"]
    assert platform.call("GET", f"/v1/events/{sent['event_id']}", token).json()["body"].encode() == request.body


def test_a_delivered_replay_marks_its_dead_original_recovered(platform: Platform, consumer: ScriptedConsumer) -> None:
    tenant_id, token = platform.new_tenant()
    endpoint_id = platform.new_endpoint(token, consumer.url)["id"]
    dead = seed(tenant_id, endpoint_id, utcnow() - timedelta(hours=1)).delivery
    cancelled = seed(tenant_id, endpoint_id, utcnow() - timedelta(hours=2), DeliveryStatus.CANCELLED).delivery
    consumer.queue([Reply(500)])  # the dead one's first replay fails (and retries): no mark until one is delivered
    first = platform.call("POST", f"/v1/deliveries/{dead.id}/replay", token).json()["delivery_id"]
    platform.pump()
    assert platform.call("GET", f"/v1/deliveries/{first}", token).json()["status"] == "retrying"
    assert platform.call("GET", f"/v1/deliveries/{dead.id}", token).json()["recovered_by"] is None

    second = platform.call("POST", f"/v1/deliveries/{dead.id}/replay", token).json()["delivery_id"]
    of_cancelled = platform.call("POST", f"/v1/deliveries/{cancelled.id}/replay", token).json()["delivery_id"]
    assert platform.pump() == 2

    original = platform.call("GET", f"/v1/deliveries/{dead.id}", token).json()
    assert (original["status"], original["recovered_by"]) == ("dead", second)
    assert datetime.fromisoformat(original["recovered_at"]) <= utcnow()
    shown = platform.call("GET", f"/v1/deliveries/{cancelled.id}", token).json()
    assert (shown["status"], shown["recovered_by"]) == ("cancelled", of_cancelled)
    # A replay of a delivered delivery marks nothing: only dead and cancelled deliveries are recovered.
    again = platform.call("POST", f"/v1/deliveries/{second}/replay", token).json()["delivery_id"]
    assert platform.pump() == 1
    assert platform.call("GET", f"/v1/deliveries/{again}", token).json()["status"] == "delivered"
    assert platform.call("GET", f"/v1/deliveries/{second}", token).json()["recovered_by"] is None


def test_the_mark_lost_between_the_two_writes_is_made_when_the_message_comes_back(
    platform: Platform, consumer: ScriptedConsumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay recorded delivered, then the invocation dies before marking the original: its message was not
    deleted; when it comes back, the attempt is not made again, and the original is marked."""
    tenant_id, token = platform.new_tenant()
    endpoint_id = platform.new_endpoint(token, consumer.url)["id"]
    dead = seed(tenant_id, endpoint_id, utcnow() - timedelta(hours=1)).delivery
    replay_id = platform.call("POST", f"/v1/deliveries/{dead.id}/replay", token).json()["delivery_id"]

    with as_function("delivery"):
        log = wiring.delivery_service().deliveries
    mark = log.mark_recovered

    def died(*args: object, **kwargs: object) -> bool:
        raise RuntimeError("the invocation died here")

    monkeypatch.setattr(log, "mark_recovered", died)
    url, [message] = platform.receive_delivery() or ("", [])
    assert invoke_batch(platform.sqs, url, queue_arn_of(platform.sqs, url), [message], "delivery") == 1  # failed
    assert platform.call("GET", f"/v1/deliveries/{replay_id}", token).json()["status"] == "delivered"
    assert platform.call("GET", f"/v1/deliveries/{dead.id}", token).json()["recovered_by"] is None
    listed = platform.call("GET", "/v1/deliveries?status=dead&recovered=false", token).json()["data"]
    assert [d["id"] for d in listed] == [dead.id]

    monkeypatch.setattr(log, "mark_recovered", mark)
    # Its visibility timeout passes: the message is back.
    platform.sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
    assert platform.pump() == 1

    assert len(consumer.wait_for(1)) == 1 and len(consumer.received) == 1  # sent once
    assert platform.call("GET", f"/v1/deliveries/{dead.id}", token).json()["recovered_by"] == replay_id
    assert platform.call("GET", "/v1/deliveries?status=dead&recovered=false", token).json()["data"] == []
