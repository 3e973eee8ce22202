"""A producer's W3C trace, end to end on the local stack (`--fast`): the `traceparent` sent to ingest arrives on the
webhook with the same trace id, on its retry, and on the redrive of the event once it died; each request with a span
id of its own, which the delivery log shows (domain/trace_context.py). Every wait is on what arrives, bounded."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hookrelay.domain import trace_context
from tests.e2e.harness import HTTP_TIMEOUT, LocalStack, eventually
from tests.support.consumer import Received, Reply, ScriptedConsumer

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PRODUCER_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{PRODUCER_SPAN}-01"
TRACESTATE = "producer=e2e"
WAIT_SECONDS = 30.0  # generous: the fast schedule's three attempts take about 3 s


@pytest.fixture
def consumer() -> Iterator[ScriptedConsumer]:
    server = ScriptedConsumer()
    yield server
    server.close()


def trace_of(request: Received) -> trace_context.TraceContext:
    trace = trace_context.parse(request.headers.get("traceparent"), request.headers.get("tracestate"))
    assert trace is not None, f"no valid traceparent in {request.headers}"
    return trace


def test_the_producers_trace_reaches_the_webhook_its_retry_and_its_redrive(
    stack: LocalStack, consumer: ScriptedConsumer
) -> None:
    tenant_id, tenant_key = stack.new_tenant("traced")
    endpoint = stack.created("/v1/endpoints", tenant_key, {"url": consumer.url, "event_types": ["*"]})
    # A retriable failure, then hard failures until the cap: retried, then dead after three attempts.
    consumer.queue([Reply(503), Reply(404), Reply(404)])
    published = stack.http.post(
        f"{stack.api_url}/v1/events",
        json={"tenant_id": tenant_id, "type": "order.updated", "data": {"id": 1}},
        headers={"authorization": f"Bearer {stack.producer_key}", "traceparent": TRACEPARENT, "tracestate": TRACESTATE},
        timeout=HTTP_TIMEOUT,
    )
    assert published.status_code == 202, published.text
    [delivery_id] = published.json()["delivery_ids"]

    attempts = consumer.wait_for(3, timeout=WAIT_SECONDS)
    dead = eventually(
        lambda: stack.delivery(tenant_key, delivery_id),
        "the delivery dead after its third attempt",
        timeout=WAIT_SECONDS,
        predicate=lambda d: d["status"] == "dead",
    )
    traces = [trace_of(request) for request in attempts]
    assert {(t.trace_id, t.tracestate, t.sampled) for t in traces} == {(TRACE_ID, TRACESTATE, True)}
    spans = [t.parent_id for t in traces]
    assert len(set(spans) | {PRODUCER_SPAN}) == 4  # a span of each attempt's own, none the producer's
    assert dead["trace_id"] == TRACE_ID and [a["span_id"] for a in dead["attempts"]] == spans

    redrive = stack.created(
        f"/v1/endpoints/{endpoint['id']}/redrive", tenant_key, {"since": dead["created_at"], "status": "dead"}
    )
    assert redrive["status"] in ("running", "completed"), redrive
    [*_, redriven] = consumer.wait_for(4, timeout=WAIT_SECONDS)
    again = trace_of(redriven)
    assert redriven.headers["webhook-id"] == published.json()["event_id"]
    assert (again.trace_id, again.tracestate) == (TRACE_ID, TRACESTATE) and again.parent_id not in {
        *spans,
        PRODUCER_SPAN,
    }
