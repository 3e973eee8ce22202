"""Auto-disable after sustained failure, on moto: the failing spell kept by the delivery path, the sweeper's notices
on SNS (read through a subscribed SQS queue) at 1, 3 and 5 days of an injected clock, the disable, and recovery."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import boto3
import pytest

from hookrelay import wiring
from hookrelay.adapters import schema
from hookrelay.domain.clock import from_rfc3339, to_rfc3339
from hookrelay.domain.models import Endpoint
from hookrelay.functions import SWEEPER
from hookrelay.handlers.sweeper import handler as sweeper_handler
from hookrelay.services.auto_disable import AutoDisableSweeper, SweepReport
from local import schedule as local_schedule
from local.lambda_runtime import LocalContext
from local.schedule import ScheduledFunction
from local.sqs_source import poll_once
from tests.support.aws import ingest_reads_endpoints_again, patched_env
from tests.support.consumer import Reply, ScriptedConsumer
from tests.support.platform import Platform

DAY = timedelta(days=1)


class Tenant:
    def __init__(self, platform: Platform) -> None:
        self.platform = platform
        self.id, self.token = platform.new_tenant()
        self.producer = platform.new_key("producer")

    def call(self, method: str, path: str, body: Any = None) -> Any:
        return self.platform.call(method, path, self.token, body)

    def publish(self) -> str:
        accepted = self.platform.call(
            "POST", "/v1/events", self.producer, {"tenant_id": self.id, "type": "order.updated", "data": {"n": 1}}
        )
        assert accepted.status == 202, accepted.body
        [delivery_id] = accepted.json()["delivery_ids"]
        return delivery_id

    def endpoint(self, endpoint_id: str) -> dict[str, Any]:
        return self.call("GET", f"/v1/endpoints/{endpoint_id}").json()


def stored(tenant: Tenant, endpoint_id: str) -> Endpoint:
    endpoint = wiring.endpoint_service().endpoints.get(tenant.id, endpoint_id)
    assert endpoint is not None
    return endpoint


@dataclasses.dataclass
class NoticeInbox:
    """An SQS queue subscribed to the notices topic, as a platform team's would be."""

    queue_url: str

    def read(self) -> list[tuple[dict[str, str], dict[str, Any], str]]:
        """(message attributes, JSON body, subject) of every notice that arrived."""
        sqs = boto3.client("sqs")
        notices = []
        while True:
            received = sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=schema.SQS_MAX_BATCH)
            batch = received.get("Messages", [])
            if not batch:
                return notices
            for message in batch:
                envelope = json.loads(message["Body"])
                attributes = {name: value["Value"] for name, value in envelope["MessageAttributes"].items()}
                notices.append((attributes, json.loads(envelope["Message"]), envelope["Subject"]))
                sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])


@pytest.fixture
def inbox(platform: Platform) -> Iterator[NoticeInbox]:
    sqs, sns = boto3.client("sqs"), boto3.client("sns")
    url = sqs.create_queue(QueueName="platform-team-notices")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=platform.env[schema.ENDPOINT_NOTICES_TOPIC.env_var], Protocol="sqs", Endpoint=arn)
    yield NoticeInbox(url)


def sweep_at(moment: datetime) -> SweepReport:
    sweeper: AutoDisableSweeper = dataclasses.replace(wiring.auto_disable_sweeper(), clock=lambda: moment)
    return sweeper.sweep()


def failing_endpoint(platform: Platform, tenant: Tenant, consumer: ScriptedConsumer) -> tuple[str, datetime]:
    """An endpoint whose first delivery attempt has just failed with a 500."""
    endpoint_id = tenant.call("POST", "/v1/endpoints", {"url": consumer.url, "event_types": ["*"]}).json()["id"]
    consumer.queue([Reply(500)])
    tenant.publish()
    assert platform.pump() == 1
    failing_since = stored(tenant, endpoint_id).failing_since
    assert failing_since is not None
    return endpoint_id, failing_since


def test_the_first_failed_attempt_starts_the_failing_spell_and_a_success_ends_it(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    tenant = Tenant(platform)
    endpoint_id = tenant.call("POST", "/v1/endpoints", {"url": consumer.url, "event_types": ["*"]}).json()["id"]
    assert tenant.endpoint(endpoint_id)["failing_since"] is None

    consumer.queue([Reply(503), Reply(500)])
    first = tenant.publish()
    platform.pump()
    attempt = tenant.call("GET", f"/v1/deliveries/{first}").json()["attempts"][0]
    view = tenant.endpoint(endpoint_id)
    assert view["failing_since"] == attempt["started_at"]
    assert tenant.call("GET", f"/v1/endpoints/{endpoint_id}/health").json()["failing_since"] == attempt["started_at"]

    tenant.publish()  # a second failure keeps the spell's start
    platform.pump()
    assert tenant.endpoint(endpoint_id)["failing_since"] == attempt["started_at"]

    tenant.publish()  # the default reply: 200
    platform.pump()
    assert len(consumer.received) == 3
    assert tenant.endpoint(endpoint_id)["failing_since"] is None
    assert tenant.call("GET", f"/v1/endpoints/{endpoint_id}/health").json()["failing_since"] is None
    assert stored(tenant, endpoint_id).failure_notice is None


def test_notices_at_one_three_and_five_days_once_each_then_the_disable_and_recovery(
    platform: Platform, consumer: ScriptedConsumer, inbox: NoticeInbox
) -> None:
    tenant = Tenant(platform)
    healthy_id = tenant.call("POST", "/v1/endpoints", {"url": consumer.url + "/ok", "event_types": ["none.*"]}).json()
    endpoint_id, since = failing_endpoint(platform, tenant, consumer)

    assert sweep_at(since + DAY - timedelta(minutes=1)).examined == 0  # not due: not even read
    expected = [(1, "failing_1d"), (3, "failing_3d"), (5, "disabled")]
    for days, kind in expected:
        moment = since + days * DAY + timedelta(minutes=5)
        assert [n.value for _, n in sweep_at(moment).notices] == [kind]
        assert sweep_at(moment + timedelta(hours=1)).notices == []  # the next hourly sweep sends nothing again
        [(attributes, body, subject)] = inbox.read()
        assert attributes == {"tenant_id": tenant.id, "endpoint_id": endpoint_id, "kind": kind}
        assert body["kind"] == kind and body["endpoint_id"] == endpoint_id and body["url"] == consumer.url
        assert from_rfc3339(body["failing_since"]) == since
        assert body["last_failure"]["status_code"] == 500
        assert from_rfc3339(body["disable_at"]) == (moment if kind == "disabled" else since + 5 * DAY)
        assert endpoint_id in subject and f"/v1/endpoints/{endpoint_id}/enable" in body["what_to_do"]

    disabled = tenant.endpoint(endpoint_id)
    assert disabled["state"] == "disabled"
    assert disabled["disabled_reason"] == f"auto: failing since {to_rfc3339(since)}"
    assert tenant.endpoint(healthy_id["id"])["state"] == "enabled"
    assert sweep_at(since + 10 * DAY).examined == 0  # a disabled endpoint leaves the failing index

    ingest_reads_endpoints_again()  # ingest's list of the tenant's endpoints from before the disable has expired
    missed = tenant.publish()  # while disabled: recorded cancelled, never sent
    assert platform.pump() == 0
    assert tenant.call("GET", f"/v1/deliveries/{missed}").json()["status"] == "cancelled"

    enabled = tenant.call("POST", f"/v1/endpoints/{endpoint_id}/enable").json()
    assert (enabled["state"], enabled["failing_since"], enabled["disabled_reason"]) == ("enabled", None, None)
    window = {"status": "cancelled", "since": to_rfc3339(since)}
    redrive = tenant.call("POST", f"/v1/endpoints/{endpoint_id}/redrive", window)
    assert redrive.status == 202 and redrive.json()["status"] == "running", redrive.body
    while poll_once(platform.sqs, platform.env[schema.REDRIVE_JOBS_QUEUE.env_var], function="redrive"):
        pass
    platform.pump()
    replays = tenant.call("GET", f"/v1/deliveries?endpoint_id={endpoint_id}&status=delivered").json()["data"]
    assert [d["replay_of"] for d in replays] == [missed]
    assert inbox.read() == []


def test_a_spell_first_seen_past_the_threshold_is_warned_before_it_is_disabled(
    platform: Platform, consumer: ScriptedConsumer, inbox: NoticeInbox
) -> None:
    tenant = Tenant(platform)
    endpoint_id, since = failing_endpoint(platform, tenant, consumer)

    assert [n.value for _, n in sweep_at(since + 6 * DAY).notices] == ["failing_3d"]
    assert tenant.endpoint(endpoint_id)["state"] == "enabled"
    report = sweep_at(since + 6 * DAY + timedelta(hours=1))
    assert [n.value for _, n in report.notices] == ["disabled"] and report.disabled == [endpoint_id]
    assert [attributes["kind"] for attributes, _, _ in inbox.read()] == ["failing_3d", "disabled"]


def test_a_success_between_notices_ends_the_spell_and_its_notices(
    platform: Platform, consumer: ScriptedConsumer, inbox: NoticeInbox
) -> None:
    tenant = Tenant(platform)
    endpoint_id, since = failing_endpoint(platform, tenant, consumer)
    assert len(sweep_at(since + 2 * DAY).notices) == 1

    tenant.publish()  # answered 200
    platform.pump()
    assert sweep_at(since + 6 * DAY).examined == 0
    assert tenant.endpoint(endpoint_id)["state"] == "enabled"
    assert [attributes["kind"] for attributes, _, _ in inbox.read()] == ["failing_1d"]


def test_a_tenant_disabled_endpoint_gets_no_notices(
    platform: Platform, consumer: ScriptedConsumer, inbox: NoticeInbox
) -> None:
    tenant = Tenant(platform)
    endpoint_id, since = failing_endpoint(platform, tenant, consumer)
    tenant.call("POST", f"/v1/endpoints/{endpoint_id}/disable")

    assert sweep_at(since + 6 * DAY).examined == 0
    assert tenant.endpoint(endpoint_id)["disabled_reason"] is None and inbox.read() == []


def test_the_scheduled_handler_runs_the_sweep(platform: Platform, consumer: ScriptedConsumer) -> None:
    tenant = Tenant(platform)
    failing_endpoint(platform, tenant, consumer)
    # The real clock: nothing is due a moment after the first failure.
    summary = sweeper_handler({"source": "aws.events"}, LocalContext.of(SWEEPER))
    assert summary == {"examined": 0, "notices": 0, "disabled": []}


def test_the_local_timer_sweeps_an_endpoint_into_disabled_on_a_shortened_day(
    platform: Platform, consumer: ScriptedConsumer, inbox: NoticeInbox
) -> None:
    """What a person watches in `python -m local --fast`, with a still shorter day: warnings, then the disable."""
    tenant = Tenant(platform)
    # A 1 s "day": a sweep every 0.1 s would have to stall for 2 s to skip a warning (which the policy allows).
    with patched_env({schema.ENDPOINT_HEALTH_DAY_SECONDS: "1"}):
        wiring.reset()
        endpoint_id, _ = failing_endpoint(platform, tenant, consumer)
        timer = ScheduledFunction("sweeper", every_seconds=0.1)
        timer.start()
        try:
            deadline = time.monotonic() + 30
            while tenant.endpoint(endpoint_id)["state"] != "disabled" and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            timer.stop()
        wiring.reset()
    assert tenant.endpoint(endpoint_id)["state"] == "disabled"
    assert [attributes["kind"] for attributes, _, _ in inbox.read()] == ["failing_1d", "failing_3d", "disabled"]


def test_stopping_a_timer_waits_for_a_running_invocation_only_its_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local stack's stop gives a long sweep two seconds, then ends the workers; it does not wait it out."""
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def long_sweep(function: str, event: dict) -> None:
        started.set()
        release.wait(60)
        finished.set()

    monkeypatch.setattr(local_schedule, "invoke", long_sweep)
    timer = ScheduledFunction("sweeper", every_seconds=0.01)
    timer.start()
    assert started.wait(10)
    threading.Timer(5, release.set).start()  # the sweep ends in 5 s: a stop that waited for it would see it end
    timer.stop(grace_seconds=0.1)
    assert not finished.is_set()  # stop returned while the invocation was still running
    assert finished.wait(10)
