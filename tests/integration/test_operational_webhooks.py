"""Operational webhooks on moto: platform events delivered to the tenant's ops endpoint through the real pipeline
(the sweeper, delivery and redrive handlers; tables; the delivery queue; the probe workflow run by moto's
interpreter), each verified the way a consumer with nothing but the standard library would (hmac, hashlib), and
never delivered to the endpoint the event is about.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from hookrelay import wiring
from hookrelay.adapters import schema
from hookrelay.domain.circuit import OPEN_AFTER_FAILURES, CircuitState
from hookrelay.domain.clock import to_rfc3339, utcnow
from hookrelay.services.auto_disable import AutoDisableSweeper, SweepReport
from local.sqs_source import poll_once
from scripts.create_admin_key import create_admin_key
from tests.support.aws import moto_stack
from tests.support.consumer import Received, Reply, ScriptedConsumer
from tests.support.platform import Platform
from tests.support.pump import QueuePump, wait_until
from tests.support.records import make, store

DAY = timedelta(days=1)
# As tests/integration/test_circuit.py: first attempts fail fast enough to open the circuit, probes come seconds apart.
FAST = json.dumps({"name": "ops-test", "gaps": [0, 3, 1, 1], "repeat_every": 3, "horizon": 120})


def verify(secret: str, request: Received) -> dict[str, Any]:
    """What a consumer does with hmac and hashlib only: the Standard Webhooks signature over the raw body."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    headers = request.headers
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + request.body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    signatures = [s.split(",", 1)[1] for s in headers["webhook-signature"].split()]
    assert any(hmac.compare_digest(expected, s) for s in signatures), "signature does not verify"
    envelope: dict[str, Any] = json.loads(request.body)
    assert envelope["id"] == headers["webhook-id"]
    return envelope


@pytest.fixture
def ops() -> Iterator[ScriptedConsumer]:
    """The tenant's operations endpoint: another service than the one that fails."""
    server = ScriptedConsumer()
    yield server
    server.close()


class Tenant:
    """A tenant with the endpoint that will fail (which also asks for platform events: it must still never get one
    about itself) and an ops endpoint subscribed to them, plus a producer."""

    def __init__(self, platform: Platform, consumer: ScriptedConsumer, ops: ScriptedConsumer) -> None:
        self.platform = platform
        self.id, self.token = platform.new_tenant()
        self.producer = platform.new_key("producer")
        self.down = platform.new_endpoint(self.token, consumer.url, ["*", "hookrelay.*"])
        self.ops = platform.new_endpoint(self.token, ops.url, ["hookrelay.endpoint.*", "hookrelay.redrive.*"])
        self.bystander = platform.new_endpoint(self.token, consumer.url + "/bystander", ["billing.*"])

    def publish(self, event_type: str = "order.updated") -> Any:
        body = {"tenant_id": self.id, "type": event_type, "data": {"n": 1}}
        return self.platform.call("POST", "/v1/events", self.producer, body)

    def deliveries(self, endpoint_id: str) -> list[dict[str, Any]]:
        answer = self.platform.call("GET", f"/v1/deliveries?endpoint_id={endpoint_id}", self.token)
        data: list[dict[str, Any]] = answer.json()["data"]
        return data


def platform_events(server: ScriptedConsumer) -> list[Received]:
    return [r for r in server.received if json.loads(r.body)["type"].startswith("hookrelay.")]


def sweep_at(moment: datetime) -> SweepReport:
    sweeper: AutoDisableSweeper = dataclasses.replace(wiring.auto_disable_sweeper(), clock=lambda: moment)
    return sweeper.sweep()


def test_an_endpoint_failing_past_the_threshold_sends_one_failing_webhook_to_the_ops_endpoint_and_recovery_one_more(
    platform: Platform, consumer: ScriptedConsumer, ops: ScriptedConsumer
) -> None:
    tenant = Tenant(platform, consumer, ops)
    consumer.queue([Reply(500)])
    assert tenant.publish().status == 202
    assert platform.pump(max_batches=1) == 1  # one round: the retry is due soon after
    since = wiring.endpoint_service().get(tenant.id, tenant.down["id"]).failing_since
    assert since is not None

    first = since + DAY + timedelta(minutes=5)
    for moment in (first, first + timedelta(hours=1)):  # two hourly sweeps: the notice is owed once
        sweep_at(moment)
        platform.pump()
    [request] = platform_events(ops)
    envelope = verify(tenant.ops["secret"], request)
    assert envelope["type"] == "hookrelay.endpoint.failing"
    data = envelope["data"]
    assert (data["endpoint_id"], data["url"], data["notice"]) == (tenant.down["id"], consumer.url, "failing_1d")
    assert data["failing_since"] == to_rfc3339(since) and data["last_failure"]["status_code"] == 500
    assert "secret" not in request.body.decode().lower().replace("secrets", "")
    [logged] = tenant.deliveries(tenant.ops["id"])  # in the delivery log like any delivery
    assert (logged["event_id"], logged["status"]) == (envelope["id"], "delivered")

    # The endpoint works again: the next delivery gets through and ends the spell.
    assert tenant.publish().status == 202
    platform.pump()
    platform.pump()  # the recovered webhook, enqueued by the delivery that got through
    failing, recovered = platform_events(ops)
    envelope = verify(tenant.ops["secret"], recovered)
    assert envelope["type"] == "hookrelay.endpoint.recovered"
    assert envelope["data"]["failing_since"] == to_rfc3339(since)
    assert envelope["ordering_key"] == f"hookrelay.{tenant.down['id']}"
    assert envelope["sequence"] > json.loads(failing.body)["sequence"]  # a consumer can drop a stale `failing`

    assert platform_events(consumer) == []  # never to the endpoint it is about, nor to the bystander
    sweep_at(first + 2 * DAY)  # the spell is over: nothing more
    platform.pump()
    assert len(platform_events(ops)) == 2


def test_producers_may_not_publish_the_platforms_event_types(
    platform: Platform, consumer: ScriptedConsumer, ops: ScriptedConsumer
) -> None:
    tenant = Tenant(platform, consumer, ops)
    refused = tenant.publish("hookrelay.endpoint.failing")
    assert refused.status == 422, refused.body
    assert "reserved" in refused.body.decode()
    assert platform.pump() == 0 and ops.received == []
    assert tenant.publish("hookrelayed.thing").status == 202  # only the prefix with its dot is reserved


def test_the_circuit_opening_and_closing_send_one_webhook_each(
    consumer: ScriptedConsumer, ops: ScriptedConsumer
) -> None:
    with moto_stack(retry_schedule=FAST) as env:
        platform = Platform(env=env, admin_token=create_admin_key(env["API_KEYS_TABLE"]).token)
        tenant = Tenant(platform, consumer, ops)
        consumer.default = Reply(503)
        for _ in range(OPEN_AFTER_FAILURES):
            assert tenant.publish().status == 202
        platform.pump()
        endpoints = wiring.endpoint_service()
        assert endpoints.get(tenant.id, tenant.down["id"]).circuit is CircuitState.OPEN
        with QueuePump.delivery(env):  # the probe workflow's first command announces it
            wait_until(lambda: platform_events(ops), "the opened webhook", 30)
        assert endpoints.get(tenant.id, tenant.down["id"]).circuit is CircuitState.OPEN  # the probe failed
        [opened] = platform_events(ops)
        data = verify(tenant.ops["secret"], opened)["data"]
        assert json.loads(opened.body)["type"] == "hookrelay.endpoint.circuit_opened"
        assert (data["endpoint_id"], data["circuit"], data["consecutive_failures"]) == (
            tenant.down["id"],
            "open",
            OPEN_AFTER_FAILURES,
        )

        consumer.default = Reply(200)
        with QueuePump.delivery(env):
            wait_until(
                lambda: endpoints.get(tenant.id, tenant.down["id"]).circuit is CircuitState.CLOSED,
                "the circuit to close",
                60,
            )
            wait_until(lambda: len(platform_events(ops)) >= 2, "the closed webhook", 10)
        types = [verify(tenant.ops["secret"], r)["type"] for r in platform_events(ops)]
        assert types == ["hookrelay.endpoint.circuit_opened", "hookrelay.endpoint.circuit_closed"]
        closed = json.loads(platform_events(ops)[1].body)["data"]
        assert closed["opened_at"] == data["opened_at"] and closed["circuit"] == "closed"
        assert platform_events(consumer) == []


def test_a_completed_redrive_sends_one_webhook_with_its_counts(
    platform: Platform, consumer: ScriptedConsumer, ops: ScriptedConsumer
) -> None:
    tenant = Tenant(platform, consumer, ops)
    outage = (utcnow() - timedelta(hours=6)).replace(microsecond=0)
    dead = [make(tenant.id, tenant.down["id"], outage + timedelta(minutes=i)) for i in range(3)]
    store(dead)
    body = {"since": to_rfc3339(outage - timedelta(minutes=1))}
    started = platform.call("POST", f"/v1/endpoints/{tenant.down['id']}/redrive", tenant.token, body)
    assert started.status == 202, started.body
    redrive_id = started.json()["redrive_id"]
    while poll_once(platform.sqs, platform.env[schema.REDRIVE_JOBS_QUEUE.env_var], function="redrive"):
        pass
    platform.pump()

    [request] = platform_events(ops)
    envelope = verify(tenant.ops["secret"], request)
    assert envelope["type"] == "hookrelay.redrive.completed"
    data = envelope["data"]
    assert (data["redrive_id"], data["endpoint_id"], data["status"]) == (redrive_id, tenant.down["id"], "dead")
    assert (data["total"], data["replayed"], data["skipped"]) == (3, 3, 0)
    assert platform.call("GET", f"/v1/redrives/{redrive_id}", tenant.token).json()["state"] == "completed"
    assert platform_events(consumer) == [] and len(consumer.received) == 3  # the replays, and nothing else
