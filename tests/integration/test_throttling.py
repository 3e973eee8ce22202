"""Behaviour at the edge: an AWS quota throttles a call (tests/support/crash.py answers its HTTP tries with the
service's throttling error). One kind of call per adapter: DynamoDB, SQS, SNS, Step Functions.

Within botocore's retry budget (adapters/aws.py) the call is retried after a jittered backoff and the work goes
on as if nothing happened. Past it, the error reaches the handler, which hands the work back: the SQS event source
gets a failed batch item (the message comes back), the API answers 503 with Retry-After (the producer retries
under its key), a scheduled function fails (its next run does the work). Nothing is lost either way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest

from hookrelay import wiring
from hookrelay.adapters import schema
from hookrelay.adapters.aws import MAX_ATTEMPTS, THROTTLED_RETRY_AFTER_SECONDS
from hookrelay.adapters.dynamodb import EndpointTable
from hookrelay.domain.clock import utcnow
from hookrelay.handlers.ingest import publish_once
from local.lambda_runtime import invoke
from local.schedule import scheduled_event
from local.sqs_source import queue_arn_of, to_record
from scripts.create_admin_key import create_admin_key
from tests.support.aws import moto_stack
from tests.support.consumer import Reply, ScriptedConsumer
from tests.support.crash import FOREVER, CrashInjector, injector
from tests.support.platform import Platform

WITHIN_BUDGET = MAX_ATTEMPTS - 1  # throttled on every try but the last


@pytest.fixture
def throttled(consumer: ScriptedConsumer) -> Iterator[tuple[Platform, CrashInjector]]:
    with moto_stack(execute_state_machine=False) as env, injector() as hook:
        publish_once.__dict__.pop("_once", None)  # built with a client from before the injector
        yield Platform(env=env, admin_token=create_admin_key(env["API_KEYS_TABLE"]).token), hook
        publish_once.__dict__.pop("_once", None)


def tenant(platform: Platform, consumer: ScriptedConsumer) -> tuple[str, str, str, str]:
    tenant_id, token = platform.new_tenant()
    endpoint_id = platform.new_endpoint(token, consumer.url)["id"]
    return tenant_id, token, endpoint_id, platform.new_key("producer")


def publish(platform: Platform, producer: str, tenant_id: str, key: str | None = None) -> Any:
    headers = {"idempotency-key": key} if key else None
    return platform.call("POST", "/v1/events", producer, {"tenant_id": tenant_id, "type": "a.b", "data": {}}, headers)


def arm_at(hook: CrashInjector, function: str, calls: list[str], wanted: str, tries: int) -> None:
    """Throttle the first call of `function` whose label names `wanted` (a clean run listed the calls). By label,
    not by number: a warm container makes fewer calls than the clean run did (the catalogue's cached reads)."""
    [label] = [label for label in calls if wanted in label][:1]
    hook.arm(frozenset({function}), label, mode="throttle", tries=tries)


def calls_of(hook: CrashInjector, function: str, run: Any) -> list[str]:
    hook.arm(frozenset({function}), None)
    run()
    calls = list(hook.calls)
    hook.disarm()
    return calls


def deliver_one(platform: Platform) -> dict[str, Any]:
    """One invocation of the delivery function with the next message, as its event source makes it; the message is
    deleted only if the invocation succeeded and reported no failed item."""
    url, [message] = platform.receive_delivery() or ("", [])
    try:
        answer = invoke("delivery", {"Records": [to_record(message, queue_arn_of(platform.sqs, url))]}) or {}
    except Exception as error:  # the whole batch failed: the message comes back
        answer = {"raised": repr(error)}
    if answer.get("raised") or answer.get("batchItemFailures"):
        platform.sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    else:
        platform.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return answer


def handed_back(answer: dict[str, Any]) -> bool:
    return bool(answer.get("raised") or answer.get("batchItemFailures"))


def delivery_status(platform: Platform, token: str, delivery_id: str) -> str:
    return str(platform.call("GET", f"/v1/deliveries/{delivery_id}", token).json()["status"])


def assert_retried(hook: CrashInjector, tries: int) -> None:
    assert hook.throttled_tries == tries, hook.calls
    assert len(hook.backoffs) == min(tries, MAX_ATTEMPTS - 1)  # a backoff before each retry
    assert all(0 <= delay <= 20 for delay in hook.backoffs)  # botocore's full jitter, capped


# --- DynamoDB: the delivery's first write (a first attempt's: the one that records and settles it, after the send) ---


@pytest.mark.parametrize("tries", [WITHIN_BUDGET, FOREVER], ids=["recovers", "handed back"])
def test_a_throttled_dynamodb_write_in_delivery(
    throttled: tuple[Platform, CrashInjector], consumer: ScriptedConsumer, tries: int
) -> None:
    platform, hook = throttled
    tenant_id, token, _, producer = tenant(platform, consumer)
    [probe_id] = publish(platform, producer, tenant_id).json()["delivery_ids"]
    calls = calls_of(hook, "delivery", lambda: deliver_one(platform))
    [delivery_id] = publish(platform, producer, tenant_id).json()["delivery_ids"]

    arm_at(hook, "delivery", calls, "DynamoDB.PutItem [Deliveries]", tries)
    answer = deliver_one(platform)
    hook.disarm()

    assert_retried(hook, min(tries, MAX_ATTEMPTS))
    if tries == WITHIN_BUDGET:
        assert not handed_back(answer) and delivery_status(platform, token, delivery_id) == "delivered"
    else:
        # Sent, its record refused: still `queued`, as when a worker dies between the send and the record.
        assert handed_back(answer) and delivery_status(platform, token, delivery_id) == "queued"
        assert not handed_back(deliver_one(platform))  # the message came back
        assert delivery_status(platform, token, delivery_id) == "delivered"
    sent = Counter(r.headers["webhook-id"] for r in consumer.received)
    # At least once: an attempt whose record was refused is made again (the consumer guide's first rule).
    assert sorted(sent.values()) == ([1, 1] if tries == WITHIN_BUDGET else [1, 2])
    assert delivery_status(platform, token, probe_id) == "delivered"


# --- Step Functions: a first failure hands the delivery over to its retry workflow ---


@pytest.mark.parametrize("tries", [WITHIN_BUDGET, FOREVER], ids=["recovers", "handed back"])
def test_a_throttled_retry_workflow_start(
    throttled: tuple[Platform, CrashInjector], consumer: ScriptedConsumer, tries: int
) -> None:
    platform, hook = throttled
    consumer.default = Reply(503)
    tenant_id, token, _, producer = tenant(platform, consumer)
    publish(platform, producer, tenant_id)
    calls = calls_of(hook, "delivery", lambda: deliver_one(platform))
    [delivery_id] = publish(platform, producer, tenant_id).json()["delivery_ids"]

    arm_at(hook, "delivery", calls, "SFN.StartExecution", tries)
    answer = deliver_one(platform)
    hook.disarm()

    assert_retried(hook, min(tries, MAX_ATTEMPTS))
    assert delivery_status(platform, token, delivery_id) == "retrying"  # the attempt is recorded either way
    if tries == FOREVER:
        assert handed_back(answer)
        assert not handed_back(deliver_one(platform))  # back again: the attempt made, it starts the workflow
    sfn = boto3.client("stepfunctions")
    executions = sfn.list_executions(stateMachineArn=platform.env[schema.RETRY_STATE_MACHINE_ARN])["executions"]
    assert delivery_id in {e["name"] for e in executions}  # its retries are carried
    assert [r.headers["webhook-id"] for r in consumer.received].count(consumer.received[-1].headers["webhook-id"]) == 1


# --- SQS: ingest enqueues the first attempts ---


@pytest.mark.parametrize("tries", [WITHIN_BUDGET, FOREVER], ids=["recovers", "answered 503"])
def test_a_throttled_enqueue_in_ingest(
    throttled: tuple[Platform, CrashInjector], consumer: ScriptedConsumer, tries: int
) -> None:
    platform, hook = throttled
    tenant_id, token, _, producer = tenant(platform, consumer)
    calls = calls_of(hook, "ingest", lambda: publish(platform, producer, tenant_id, "warm-up"))

    arm_at(hook, "ingest", calls, "SQS.SendMessageBatch", tries)
    answer = publish(platform, producer, tenant_id, "order-42")
    hook.disarm()

    assert_retried(hook, min(tries, MAX_ATTEMPTS))
    if tries == FOREVER:
        assert answer.status == 503, answer.body
        assert answer.headers["retry-after"] == str(THROTTLED_RETRY_AFTER_SECONDS)
        assert answer.json()["type"].endswith("busy")
        answer = publish(platform, producer, tenant_id, "order-42")  # the producer retries under its key
    assert answer.status == 202, answer.body
    while platform.pump():
        pass
    [delivery_id] = answer.json()["delivery_ids"]
    assert delivery_status(platform, token, delivery_id) == "delivered"
    assert [r.headers["webhook-id"] for r in consumer.received].count(answer.json()["event_id"]) == 1


# --- SNS: the sweeper's endpoint notice ---


@pytest.mark.parametrize("tries", [WITHIN_BUDGET, FOREVER], ids=["recovers", "next sweep"])
def test_a_throttled_notice_publish(
    throttled: tuple[Platform, CrashInjector], consumer: ScriptedConsumer, tries: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    platform, hook = throttled
    monkeypatch.setenv(schema.ENDPOINT_HEALTH_DAY_SECONDS, "86400")
    wiring.reset()
    endpoints = EndpointTable(boto3.resource("dynamodb").Table(platform.env[schema.ENDPOINTS.env_var]))

    def failing_for_a_day() -> tuple[str, str]:
        tenant_id, _, endpoint_id, _ = tenant(platform, consumer)
        assert endpoints.mark_failing(tenant_id, endpoint_id, utcnow() - timedelta(days=1, hours=2))
        return tenant_id, endpoint_id

    def sweep() -> Any:
        return invoke("sweeper", scheduled_event("hookrelay-sweeper"))

    failing_for_a_day()
    calls = calls_of(hook, "sweeper", sweep)  # its notice sent
    tenant_id, endpoint_id = failing_for_a_day()

    arm_at(hook, "sweeper", calls, "SNS.Publish", tries)
    try:
        sweep()
        failed = None
    except Exception as error:  # the invocation failed: its Errors alarm; the next hourly sweep sends the notice
        failed = error
    hook.disarm()

    assert_retried(hook, min(tries, MAX_ATTEMPTS))
    notice = lambda: endpoints.get(tenant_id, endpoint_id).failure_notice  # noqa: E731
    if tries == FOREVER:
        assert failed is not None and notice() is None  # not recorded: unsent
        sweep()
    else:
        assert failed is None
    assert notice() is not None and notice().value == "failing_1d"
