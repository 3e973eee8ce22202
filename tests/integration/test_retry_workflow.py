"""The retry workflow end to end on moto: the real ASL file executed by moto's interpreter, the real
delivery handler on the other side of the FIFO queue, and a scripted consumer on 127.0.0.1.

The schedule here is four attempts one second apart (jitter ±0.1 s), so Wait states stay short.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

import statemachine
from hookrelay.adapters import schema
from hookrelay.adapters.dynamodb import DeliveryTable, EventTable
from hookrelay.domain.clock import RETENTION_DAYS, epoch_seconds
from hookrelay.domain.models import Delivery
from hookrelay.domain.status import DeadReason
from local.provision import delivery_queue_urls
from scripts.create_admin_key import create_admin_key
from tests.support.aws import moto_stack
from tests.support.consumer import Reply, ScriptedConsumer
from tests.support.platform import Platform
from tests.support.pump import QueuePump, wait_until

TEST_SCHEDULE = json.dumps({"name": "test", "gaps": [0, 1, 1, 1], "horizon": 10, "retry_after_cap": 5})
ATTEMPTS_IN_SCHEDULE = 4


@pytest.fixture
def platform() -> Iterator[Platform]:
    with moto_stack(retry_schedule=TEST_SCHEDULE) as env:
        yield Platform(env=env, admin_token=create_admin_key(env["API_KEYS_TABLE"]).token)


def table(env_var: str) -> Any:
    return boto3.resource("dynamodb").Table(os.environ[env_var])


def publish(platform: Platform, consumer: ScriptedConsumer) -> tuple[str, str]:
    """One event to one endpoint on the consumer; returns (event id, delivery id)."""
    tenant_id, token = platform.new_tenant()
    platform.new_endpoint(token, consumer.url)
    producer = platform.new_key("producer")
    accepted = platform.call("POST", "/v1/events", producer, {"tenant_id": tenant_id, "type": "a.b", "data": {"n": 1}})
    assert accepted.status == 202, accepted.body
    [delivery_id] = accepted.json()["delivery_ids"]
    return accepted.json()["event_id"], delivery_id


def executions(platform: Platform) -> list[dict[str, Any]]:
    arn = platform.env["RETRY_STATE_MACHINE_ARN"]
    return boto3.client("stepfunctions").list_executions(stateMachineArn=arn)["executions"]


def finished_execution(platform: Platform, name: str) -> dict[str, Any]:
    """The finished execution of that name (the delivery id, for a delivery's first execution)."""

    def finished() -> dict[str, Any] | None:
        mine = [e for e in executions(platform) if e["name"] == name]
        return mine[0] if mine and mine[0]["status"] != "RUNNING" else None

    return wait_until(finished, f"the execution {name} to finish")


def run_to_the_end(platform: Platform, consumer: ScriptedConsumer) -> tuple[str, Delivery, dict[str, Any]]:
    """Publish one event, pump until its delivery's workflow has finished; returns (event id, delivery, execution)."""
    event_id, delivery_id = publish(platform, consumer)
    with QueuePump.delivery(platform.env):
        execution = finished_execution(platform, delivery_id)
    return event_id, DeliveryTable(table("DELIVERIES_TABLE"), table("EVENT_LOG_TABLE")).get(delivery_id), execution


def dead_letters(platform: Platform) -> list[dict[str, Any]]:
    url = platform.env[schema.DEAD_LETTER_QUEUE.env_var]
    received = platform.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=schema.SQS_MAX_BATCH).get("Messages", [])
    return [json.loads(message["Body"]) for message in received]


def test_fail_fail_succeed_is_delivered_after_three_attempts(platform: Platform, consumer: ScriptedConsumer) -> None:
    consumer.queue([Reply(500), Reply(503)])
    _, delivery, execution = run_to_the_end(platform, consumer)

    assert execution["status"] == "SUCCEEDED"
    assert delivery.status == "delivered"
    assert [(a.number, a.status_code) for a in delivery.attempts] == [(1, 500), (2, 503), (3, 200)]
    requests = consumer.received
    assert len(requests) == 3 and len({r.headers["webhook-id"] for r in requests}) == 1
    assert delivery.expires_at == epoch_seconds(delivery.completed_at) + RETENTION_DAYS * 86400
    assert dead_letters(platform) == []


def test_always_500_is_dead_after_the_schedule_with_its_reason_and_no_queue_message(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    consumer.default = Reply(500)
    event_id, delivery, execution = run_to_the_end(platform, consumer)

    assert execution["status"] == "SUCCEEDED"  # the workflow ended as designed: the delivery is what died
    assert delivery.status == "dead"
    assert [a.number for a in delivery.attempts] == list(range(1, ATTEMPTS_IN_SCHEDULE + 1))
    assert len(consumer.received) == ATTEMPTS_IN_SCHEDULE
    assert delivery.dead_reason is DeadReason.EXHAUSTED and delivery.dead_lettered_at is not None
    assert dead_letters(platform) == []  # the record is the one truth of "dead": no copy on a queue
    redrive_window_end = epoch_seconds(delivery.completed_at) + RETENTION_DAYS * 86400
    assert delivery.expires_at == redrive_window_end
    assert (
        EventTable(table("EVENTS_TABLE"), table("EVENT_LOG_TABLE")).get(delivery.tenant_id, event_id).expires_at
        >= redrive_window_end
    )


def test_404_is_dead_after_exactly_three_attempts(platform: Platform, consumer: ScriptedConsumer) -> None:
    consumer.default = Reply(404)
    _, delivery, _ = run_to_the_end(platform, consumer)

    assert delivery.status == "dead"
    assert [a.status_code for a in delivery.attempts] == [404, 404, 404]
    assert len(consumer.received) == 3
    assert delivery.dead_reason is DeadReason.EXHAUSTED and dead_letters(platform) == []


def test_429_with_retry_after_delays_the_next_attempt_by_at_least_that_long(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    consumer.queue([Reply(429, headers=(("Retry-After", "3"),))])
    _, delivery, _ = run_to_the_end(platform, consumer)

    assert delivery.status == "delivered"
    first, second = consumer.received
    assert second.at - first.at >= 3  # the schedule alone would have retried after about 1 s
    assert delivery.attempts[0].retry_after == pytest.approx(3)


def test_a_redirect_is_not_followed(platform: Platform, consumer: ScriptedConsumer) -> None:
    consumer.queue([Reply(301, headers=(("Location", consumer.url + "/moved"),))])
    _, delivery, _ = run_to_the_end(platform, consumer)

    assert [r.path for r in consumer.received] == ["/hook", "/hook"]  # never /hook/moved
    assert [(a.status_code, a.outcome) for a in delivery.attempts] == [(301, "retry_limited"), (200, "delivered")]


def test_a_hang_past_the_timeout_counts_as_a_failure(platform: Platform, consumer: ScriptedConsumer) -> None:
    consumer.queue([Reply(200, delay=3.0)])  # the attempt timeout is 2 s here
    _, delivery, _ = run_to_the_end(platform, consumer)

    assert delivery.status == "delivered"
    assert [(a.status_code, a.error) for a in delivery.attempts] == [(None, "timeout"), (200, None)]


def test_a_first_time_success_starts_no_execution(platform: Platform, consumer: ScriptedConsumer) -> None:
    _, delivery_id = publish(platform, consumer)
    assert platform.pump(max_batches=1) == 1  # one round: the workflow's message is 1 s behind

    assert DeliveryTable(table("DELIVERIES_TABLE"), table("EVENT_LOG_TABLE")).get(delivery_id).status == "delivered"
    assert executions(platform) == []


def use_task_timeout(platform: Platform, seconds: int) -> None:
    """Re-render the real ASL with a short task timeout, so that losing a message shows within seconds."""
    values = {
        "Partition": "aws",
        "DeliveryQueueUrl": delivery_queue_urls(platform.env).url(0),
        "DeadLetterQueueUrl": platform.env[schema.DEAD_LETTER_QUEUE.env_var],
        "AttemptTaskTimeoutSeconds": str(seconds),
    }
    boto3.client("stepfunctions").update_state_machine(
        stateMachineArn=platform.env["RETRY_STATE_MACHINE_ARN"], definition=statemachine.render(values)
    )


def lose_next_workflow_message(platform: Platform) -> dict[str, Any]:
    """Take the workflow's next message off the delivery queue without handling it: a lost message."""
    url, [message] = wait_until(platform.receive_delivery, "the workflow's message")
    platform.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return json.loads(message["Body"])


def test_a_lost_message_is_resent_when_the_task_times_out(platform: Platform, consumer: ScriptedConsumer) -> None:
    use_task_timeout(platform, 2)
    consumer.queue([Reply(500)])
    _, delivery_id = publish(platform, consumer)
    assert (
        platform.pump(max_batches=1) == 1
    )  # attempt 1 fails and starts the workflow (one round: its retry is 1 s behind)

    lost = lose_next_workflow_message(platform)
    with QueuePump.delivery(platform.env):
        execution = finished_execution(platform, delivery_id)

    assert lost["attempt"] == 2 and "task_token" in lost
    assert execution["status"] == "SUCCEEDED"
    delivery = DeliveryTable(table("DELIVERIES_TABLE"), table("EVENT_LOG_TABLE")).get(delivery_id)
    assert delivery.status == "delivered" and [a.number for a in delivery.attempts] == [1, 2]


def test_an_attempt_nobody_answers_is_reported_lost(platform: Platform, consumer: ScriptedConsumer) -> None:
    use_task_timeout(platform, 1)
    consumer.queue([Reply(500)])
    _, delivery_id = publish(platform, consumer)
    assert platform.pump(max_batches=1) == 1  # one round: the workflow's message is 1 s behind

    lost = [lose_next_workflow_message(platform) for _ in range(1 + statemachine.resend_count())]
    execution = finished_execution(platform, delivery_id)

    assert {message["attempt"] for message in lost} == {2}
    assert execution["status"] == "FAILED"
    failure = boto3.client("stepfunctions").describe_execution(executionArn=execution["executionArn"])
    assert failure["error"] == "hookrelay.AttemptLost"
    assert dead_letters(platform) == [
        {
            "reason": "attempt_lost",
            "delivery_id": delivery_id,
            "tenant_id": lost[0]["tenant_id"],
            "attempt": 2,
            "error": "States.Timeout",
        }
    ]


@pytest.fixture
def roomy_platform() -> Iterator[Platform]:
    """The test schedule's gaps with a horizon long enough to outlast an execution that gives up."""
    schedule = json.dumps({"name": "roomy", "gaps": [0, 1, 1, 1], "horizon": 120})
    with moto_stack(retry_schedule=schedule) as env:
        yield Platform(env=env, admin_token=create_admin_key(env["API_KEYS_TABLE"]).token)


def test_a_stale_message_after_the_workflow_gave_up_resumes_it_with_a_fresh_execution(
    roomy_platform: Platform, consumer: ScriptedConsumer
) -> None:
    platform = roomy_platform
    use_task_timeout(platform, 1)
    consumer.queue([Reply(500), Reply(500)])
    _, delivery_id = publish(platform, consumer)
    assert platform.pump(max_batches=1) == 1  # one round: the workflow's message is 1 s behind
    lost = [lose_next_workflow_message(platform) for _ in range(1 + statemachine.resend_count())]
    assert finished_execution(platform, delivery_id)["status"] == "FAILED"  # AttemptLost: its tokens are dead

    # The first of those messages turns up after all (it sat behind a backlog): attempt 2 is made, fails again.
    use_task_timeout(platform, 60)
    stored = DeliveryTable(table("DELIVERIES_TABLE"), table("EVENT_LOG_TABLE")).get(delivery_id)
    group_id = stored.message_group_id
    platform.sqs.send_message(
        QueueUrl=delivery_queue_urls(platform.env).url(stored.queue_shard),
        MessageBody=json.dumps(lost[0]),
        MessageGroupId=group_id,
        MessageDeduplicationId=f"{delivery_id}-stale",
    )
    with QueuePump.delivery(platform.env):
        resumed = finished_execution(platform, f"{delivery_id}-3")

    assert resumed["status"] == "SUCCEEDED"
    delivery = DeliveryTable(table("DELIVERIES_TABLE"), table("EVENT_LOG_TABLE")).get(delivery_id)
    assert delivery.status == "delivered"
    assert [(a.number, a.status_code) for a in delivery.attempts] == [(1, 500), (2, 500), (3, 200)]
    assert len(consumer.received) == 3
