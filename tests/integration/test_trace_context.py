"""W3C trace context through the real handlers on moto: ingest keeps the producer's `traceparent` with the event,
every attempt's webhook carries the same trace id with a span of its own (retries, replays and redrives included),
and the delivery log shows the trace id and each attempt's span id (domain/trace_context.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from hookrelay.adapters import schema
from hookrelay.domain import trace_context
from hookrelay.domain.clock import to_rfc3339, utcnow
from local.sqs_source import poll_once
from scripts.create_admin_key import create_admin_key
from tests.integration.test_aws_destinations import _queue, _received, _role, _trust
from tests.support.aws import moto_stack
from tests.support.consumer import Received, Reply, ScriptedConsumer
from tests.support.platform import Platform
from tests.support.pump import QueuePump, wait_until
from tests.support.records import stored_event

# Retries a second apart, so a failed first attempt is retried within the test.
TEST_SCHEDULE = json.dumps({"name": "test", "gaps": [0, 1, 1, 1], "horizon": 10, "retry_after_cap": 5})
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PRODUCER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PRODUCER_SPAN}-01"
TRACESTATE = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"


@pytest.fixture
def platform() -> Iterator[Platform]:
    with moto_stack(retry_schedule=TEST_SCHEDULE) as env:
        yield Platform(env=env, admin_token=create_admin_key(env["API_KEYS_TABLE"]).token)


def publish(
    platform: Platform, consumer: ScriptedConsumer, headers: dict[str, str] | None = None
) -> tuple[str, str, dict[str, Any]]:
    """One event to one new endpoint on the consumer; returns (tenant token, endpoint id, the ingest answer)."""
    tenant_id, token = platform.new_tenant()
    endpoint_id = platform.new_endpoint(token, consumer.url)["id"]
    producer = platform.new_key("producer")
    body = {"tenant_id": tenant_id, "type": "order.updated", "data": {"id": 1}}
    accepted = platform.call("POST", "/v1/events", producer, body, headers=headers)
    assert accepted.status == 202, accepted.body
    return token, endpoint_id, accepted.json()


def sent(request: Received) -> trace_context.TraceContext:
    trace = trace_context.parse(request.headers.get("traceparent"), request.headers.get("tracestate"))
    assert trace is not None, request.headers
    return trace


def delivery(platform: Platform, token: str, delivery_id: str) -> dict[str, Any]:
    found = platform.call("GET", f"/v1/deliveries/{delivery_id}", token)
    assert found.status == 200, found.body
    return dict(found.json())


def test_the_producers_trace_reaches_the_webhook_with_a_span_of_the_attempt_and_the_log_shows_both(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    token, _, accepted = publish(platform, consumer, {"traceparent": TRACEPARENT, "tracestate": TRACESTATE})
    platform.pump()

    [request] = consumer.wait_for(1)
    trace = sent(request)
    assert (trace.trace_id, trace.flags, trace.tracestate) == (TRACE_ID, 1, TRACESTATE)
    assert trace.parent_id != PRODUCER_SPAN  # the attempt's own span, a child of the producer's
    shown = delivery(platform, token, accepted["delivery_ids"][0])
    assert shown["trace_id"] == TRACE_ID
    assert [a["span_id"] for a in shown["attempts"]] == [trace.parent_id]
    assert platform.call("GET", f"/v1/events/{accepted['event_id']}", token).json()["trace_id"] == TRACE_ID


def test_a_retry_keeps_the_trace_with_a_new_span_each_attempt(platform: Platform, consumer: ScriptedConsumer) -> None:
    consumer.queue([Reply(503), Reply(500)])
    token, _, accepted = publish(platform, consumer, {"traceparent": TRACEPARENT})
    [delivery_id] = accepted["delivery_ids"]

    with QueuePump.delivery(platform.env):
        wait_until(lambda: delivery(platform, token, delivery_id)["status"] == "delivered", "the third attempt")

    traces = [sent(request) for request in consumer.received]
    assert len(traces) == 3 and {t.trace_id for t in traces} == {TRACE_ID}
    spans = [t.parent_id for t in traces]
    assert len(set(spans) | {PRODUCER_SPAN}) == 4
    assert [a["span_id"] for a in delivery(platform, token, delivery_id)["attempts"]] == spans


def test_a_replay_and_a_redrive_of_a_dead_delivery_send_its_trace(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    consumer.queue([Reply(404)] * 3)  # dead after three attempts (a hard failure)
    token, endpoint_id, accepted = publish(platform, consumer, {"traceparent": TRACEPARENT})
    [delivery_id] = accepted["delivery_ids"]
    with QueuePump.delivery(platform.env):
        wait_until(lambda: delivery(platform, token, delivery_id)["status"] == "dead", "the delivery to die")

    replayed = platform.call("POST", f"/v1/deliveries/{delivery_id}/replay", token)
    assert replayed.status == 202, replayed.body
    since = to_rfc3339(utcnow().replace(year=utcnow().year - 1))
    started = platform.call("POST", f"/v1/endpoints/{endpoint_id}/redrive", token, {"since": since})
    assert started.status == 202, started.body
    while poll_once(platform.sqs, platform.env[schema.REDRIVE_JOBS_QUEUE.env_var], function="redrive"):
        pass
    platform.pump()

    requests = consumer.wait_for(5)
    assert {sent(r).trace_id for r in requests} == {TRACE_ID}
    assert len({sent(r).parent_id for r in requests}) == 5
    replay = delivery(platform, token, replayed.json()["delivery_id"])
    assert replay["trace_id"] == TRACE_ID and replay["attempts"][0]["span_id"] == sent(requests[3]).parent_id


def test_without_a_valid_traceparent_each_event_gets_a_trace_of_its_own(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    malformed = f"00-{'0' * 32}-{PRODUCER_SPAN}-01"  # an all-zero trace id: ignored, not refused
    publish(platform, consumer, {"traceparent": malformed, "tracestate": TRACESTATE})
    publish(platform, consumer)
    platform.pump()

    traces = [sent(request) for request in consumer.wait_for(2)]
    assert len({t.trace_id for t in traces}) == 2 and "0" * 32 not in {t.trace_id for t in traces}
    assert {t.tracestate for t in traces} == {None}  # a tracestate goes only with its own traceparent
    assert {t.sampled for t in traces} == {False}  # the platform's tracing is off here: not sampled


def test_a_trace_the_platform_started_is_shown_as_sent_though_nothing_stores_it(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    token, _, accepted = publish(platform, consumer)
    platform.pump()

    [request] = consumer.wait_for(1)
    trace = sent(request)
    [delivery_id] = accepted["delivery_ids"]
    shown = delivery(platform, token, delivery_id)
    assert shown["trace_id"] == trace.trace_id and [a["span_id"] for a in shown["attempts"]] == [trace.parent_id]
    assert platform.call("GET", f"/v1/events/{accepted['event_id']}", token).json()["trace_id"] == trace.trace_id
    dynamodb = boto3.resource("dynamodb")
    item = dynamodb.Table(platform.env["DELIVERIES_TABLE"]).get_item(Key={"id": delivery_id})["Item"]
    event = stored_event(item["tenant_id"], accepted["event_id"])[2]
    assert "traceparent" not in event and "trace_id" not in item
    assert all("span_id" not in attempt for attempt in item.get("attempts", []))


def test_a_batch_takes_the_headers_trace_unless_an_event_gives_its_own(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    tenant_id, token = platform.new_tenant()
    platform.new_endpoint(token, consumer.url)
    own = f"00-{'a' * 32}-{'b' * 16}-00"
    events = [
        {"type": "a.b", "data": {"n": 0}},
        {"type": "a.b", "data": {"n": 1}, "traceparent": own, "tracestate": "own=1"},
        {"type": "a.b", "data": {"n": 2}, "traceparent": "not one"},  # ignored: the header's applies
    ]
    headers = {"traceparent": TRACEPARENT, "tracestate": TRACESTATE}
    answer = platform.call(
        "POST", "/v1/events/batch", platform.new_key("producer"), {"tenant_id": tenant_id, "events": events}, headers
    )
    assert answer.status == 200 and answer.json()["accepted"] == 3, answer.body
    platform.pump()

    by_n = {json.loads(r.body)["data"]["n"]: sent(r) for r in consumer.wait_for(3)}
    assert (by_n[0].trace_id, by_n[0].tracestate) == (TRACE_ID, TRACESTATE)
    assert (by_n[1].trace_id, by_n[1].tracestate, by_n[1].sampled) == ("a" * 32, "own=1", False)
    assert (by_n[2].trace_id, by_n[2].tracestate) == (TRACE_ID, TRACESTATE)


def test_a_poll_endpoints_message_shows_the_trace(platform: Platform) -> None:
    tenant_id, token = platform.new_tenant()
    created = platform.call("POST", "/v1/endpoints", token, {"kind": "poll"})
    assert created.status == 201, created.body
    endpoint_id = created.json()["id"]
    body = {"tenant_id": tenant_id, "type": "a.b", "data": {}}
    platform.call("POST", "/v1/events", platform.new_key("producer"), body, {"traceparent": TRACEPARENT})
    platform.pump()

    [message] = platform.call("GET", f"/v1/endpoints/{endpoint_id}/messages", token).json()["data"]
    shown = trace_context.parse(message["headers"]["traceparent"])
    assert shown is not None and shown.trace_id == TRACE_ID and shown.parent_id != PRODUCER_SPAN


def test_a_test_event_has_a_trace_too(platform: Platform, consumer: ScriptedConsumer) -> None:
    _, token = platform.new_tenant()
    endpoint_id = platform.new_endpoint(token, consumer.url)["id"]
    assert platform.call("POST", f"/v1/endpoints/{endpoint_id}/test", token).status == 202
    platform.pump()
    [request] = consumer.wait_for(1)
    assert json.loads(request.body)["type"] == "webhook.test" and not sent(request).sampled


def test_an_sqs_destination_gets_the_trace_as_message_attributes(platform: Platform) -> None:
    tenant_id, token = platform.new_tenant()
    url, arn = _queue("traced")
    role = _role("hookrelay-traced", _trust(f"hookrelay-{tenant_id}"))
    created = platform.call("POST", "/v1/endpoints", token, {"url": arn, "role_arn": role})
    assert created.status == 201, created.body
    body = {"tenant_id": tenant_id, "type": "a.b", "data": {}}
    headers = {"traceparent": TRACEPARENT, "tracestate": TRACESTATE}
    assert platform.call("POST", "/v1/events", platform.new_key("producer"), body, headers).status == 202
    platform.pump()

    [message] = _received(url, 1)
    attributes = {name: value["StringValue"] for name, value in message["MessageAttributes"].items()}
    trace = trace_context.parse(attributes["traceparent"], attributes["tracestate"])
    assert trace is not None and (trace.trace_id, trace.tracestate) == (TRACE_ID, TRACESTATE)
    assert trace.parent_id != PRODUCER_SPAN
