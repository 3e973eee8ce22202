"""The reconciler on moto: deliveries recorded and never enqueued are sent; the dead-letter and poison queues are
surfaced as dead deliveries with their reason, once, and emptied; the operator's redrive gives back only what the
platform killed."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from hookrelay import wiring
from hookrelay.adapters import schema
from hookrelay.adapters.dynamodb import DeliveryTable
from hookrelay.adapters.sqs import message_body
from hookrelay.domain.clock import to_rfc3339, utcnow
from hookrelay.domain.models import Delivery
from hookrelay.domain.status import DeadReason, DeliveryStatus
from hookrelay.functions import RECONCILER
from hookrelay.services.ports import DeliveryMessage
from hookrelay.services.reconcile import CATCH_UP_STEP, CATCH_UP_STEPS, RECONCILE_GRACE
from local.lambda_runtime import invoke
from local.schedule import scheduled_event
from scripts.redrive_dead_letters import main as operator_redrive
from tests.support.aws import as_function
from tests.support.consumer import ScriptedConsumer
from tests.support.platform import Platform
from tests.support.records import make, store

LONG_AGO = utcnow() - timedelta(hours=2)


def reconcile(platform: Platform, *, later: timedelta = timedelta(minutes=2)) -> dict:
    """One scheduled run of the reconciler, `later` after now (past the grace it leaves to writers in flight)."""
    with as_function("reconciler"):
        wiring.reconciler().clock = lambda: utcnow() + later
    return invoke("reconciler", scheduled_event("hookrelay-reconciler"))


def queue_depth(platform: Platform, spec: schema.QueueSpec) -> int:
    attributes = platform.sqs.get_queue_attributes(
        QueueUrl=platform.env[spec.env_var],
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def poison(platform: Platform, delivery: Delivery) -> None:
    """A delivery message that failed processing too often, moved to the poison queue by SQS."""
    message = DeliveryMessage(delivery.id, delivery.tenant_id, 1, delivery.message_group_id, delivery.id)
    platform.sqs.send_message(
        QueueUrl=platform.env[schema.POISON_QUEUE.env_var],
        MessageBody=message_body(message),
        MessageGroupId=message.group_id,
        MessageDeduplicationId=message.deduplication_id,
    )


def attempt_lost(platform: Platform, delivery: Delivery) -> None:
    """What the state machine's ReportAttemptLost state sends when an attempt and its re-sends go unanswered."""
    lost = {"reason": "attempt_lost", "delivery_id": delivery.id, "tenant_id": delivery.tenant_id, "attempt": 2}
    platform.sqs.send_message(QueueUrl=platform.env[schema.DEAD_LETTER_QUEUE.env_var], MessageBody=json.dumps(lost))


def tenant_with_endpoint(platform: Platform, consumer: ScriptedConsumer) -> tuple[str, str, str]:
    tenant_id, token = platform.new_tenant()
    return tenant_id, token, platform.new_endpoint(token, consumer.url)["id"]


def test_a_delivery_recorded_and_never_enqueued_is_sent_by_the_reconciler(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    tenant_id, _token, endpoint_id = tenant_with_endpoint(platform, consumer)
    stranded = make(tenant_id, endpoint_id, utcnow(), DeliveryStatus.QUEUED)
    store([stranded])  # as ingest leaves it when it dies between the delivery's write and its message
    assert platform.pump() == 0

    assert reconcile(platform, later=timedelta(seconds=0))["resent"] == 0  # still within the writer's grace
    assert reconcile(platform)["resent"] == 1
    assert platform.pump() == 1
    assert [r.headers["webhook-id"] for r in consumer.wait_for(1)] == [stranded.event.id]
    assert reconcile(platform)["resent"] == 0  # delivered: nothing more to send
    assert wiring.delivery_table().get(stranded.delivery.id).status is DeliveryStatus.DELIVERED


def test_a_message_sent_twice_is_attempted_once(platform: Platform, consumer: ScriptedConsumer) -> None:
    tenant_id, _token, endpoint_id = tenant_with_endpoint(platform, consumer)
    producer = platform.new_key("producer")
    accepted = platform.call("POST", "/v1/events", producer, {"tenant_id": tenant_id, "type": "a.b", "data": {}})
    assert accepted.status == 202 and endpoint_id
    assert reconcile(platform)["resent"] == 1  # its first message is still waiting: the copy is harmless
    platform.pump()
    assert len(consumer.wait_for(1)) == 1
    assert len(consumer.received) == 1


def test_poison_and_lost_attempts_are_surfaced_as_dead_deliveries_once_and_the_queues_emptied(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    tenant_id, token, endpoint_id = tenant_with_endpoint(platform, consumer)
    poisoned = make(tenant_id, endpoint_id, LONG_AGO, DeliveryStatus.QUEUED)
    lost = make(tenant_id, endpoint_id, LONG_AGO + timedelta(minutes=1), DeliveryStatus.RETRYING)
    gone = make(tenant_id, endpoint_id, LONG_AGO + timedelta(minutes=2), DeliveryStatus.RETRYING)  # never stored
    store([poisoned, lost])
    poison(platform, poisoned.delivery)
    attempt_lost(platform, lost.delivery)
    attempt_lost(platform, gone.delivery)

    assert reconcile(platform)["surfaced"] == 2
    for seeded, reason in ((poisoned, DeadReason.POISON), (lost, DeadReason.ATTEMPT_LOST)):
        shown = platform.call("GET", f"/v1/deliveries/{seeded.delivery.id}", token).json()
        assert shown["status"] == "dead" and shown["completed_at"] is not None
        assert wiring.delivery_table().get(seeded.delivery.id).dead_reason is reason
    assert queue_depth(platform, schema.DEAD_LETTER_QUEUE) == 0 and queue_depth(platform, schema.POISON_QUEUE) == 0

    attempt_lost(platform, lost.delivery)  # the same letter again (a crash before its delete): a no-op
    assert reconcile(platform)["surfaced"] == 0
    assert queue_depth(platform, schema.DEAD_LETTER_QUEUE) == 0
    assert platform.pump() == 0 and consumer.received == []


class LateAttemptLands(DeliveryTable):
    """The delivery table, where a late attempt gets through just after the reconciler has read the delivery."""

    def get(self, delivery_id: str, tenant_id: str | None = None) -> Delivery | None:
        read = super().get(delivery_id, tenant_id)
        if read is not None and read.status is DeliveryStatus.ATTEMPTING:
            self.set_status(delivery_id, read.tenant_id, DeliveryStatus.DELIVERED, utcnow(), None)
        return read


def test_a_late_delivery_is_not_overwritten_by_surfacing(platform: Platform, consumer: ScriptedConsumer) -> None:
    tenant_id, _token, endpoint_id = tenant_with_endpoint(platform, consumer)
    late = make(tenant_id, endpoint_id, LONG_AGO, DeliveryStatus.ATTEMPTING)
    store([late])
    attempt_lost(platform, late.delivery)
    reconciler = wiring.reconciler()
    reconciler.deliveries = LateAttemptLands(reconciler.deliveries.table, reconciler.deliveries.event_log)

    first = reconciler.run()
    assert first.surfaced == [] and len(first.kept) == 1 and late.delivery.id in first.kept[0]
    assert wiring.delivery_table().get(late.delivery.id).status is DeliveryStatus.DELIVERED
    platform.sqs.purge_queue(QueueUrl=platform.env[schema.DEAD_LETTER_QUEUE.env_var])


def test_the_operator_redrive_replays_what_the_platform_killed_and_nothing_else(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    tenant_id, _token, endpoint_id = tenant_with_endpoint(platform, consumer)
    poisoned = make(tenant_id, endpoint_id, LONG_AGO, DeliveryStatus.QUEUED)
    tenants_own = make(tenant_id, endpoint_id, LONG_AGO + timedelta(minutes=1))  # dead: its endpoint's 404s
    store([poisoned, tenants_own])
    wiring.delivery_table().mark_dead_lettered(tenants_own.delivery.id, utcnow(), DeadReason.EXHAUSTED)
    poison(platform, poisoned.delivery)
    reconcile(platform)

    since = f"--since={to_rfc3339(LONG_AGO - timedelta(minutes=1))}"
    listed = operator_redrive([since])
    assert listed.found == [poisoned.delivery.id] and listed.replayed == []
    assert platform.pump() == 0
    applied = operator_redrive([since, "--apply"])
    assert applied.replayed == [poisoned.delivery.id]
    assert operator_redrive([since, "--apply"]).replayed == [poisoned.delivery.id]  # re-run: the same replay
    assert platform.pump() == 1
    assert [r.headers["webhook-id"] for r in consumer.wait_for(1)] == [poisoned.event.id]


class RefusingQueue:
    """The delivery queue refusing every send: a run that dies after reading its span, before the checkpoint moves."""

    def enqueue(self, messages: list) -> None:
        raise ConnectionError("the queue is unreachable")


def run_at(when: datetime) -> dict:
    with as_function("reconciler"):
        wiring.reconciler().clock = lambda: when
    return invoke("reconciler", scheduled_event("hookrelay-reconciler"))


def test_each_run_reads_the_log_from_where_the_last_finished_and_a_failed_run_leaves_its_span_to_the_next(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    from local.stack import scheduled_functions

    (timer,) = [t for t in scheduled_functions(fast=True) if t.function == RECONCILER.name]
    assert "lookback_minutes" not in timer.event()  # run every 2 s here, it reads no more than deployed
    tenant_id, _token, endpoint_id = tenant_with_endpoint(platform, consumer)
    start = utcnow()
    first = make(tenant_id, endpoint_id, start, DeliveryStatus.QUEUED)
    store([first])

    assert run_at(start + RECONCILE_GRACE + timedelta(seconds=1)) == {"examined": 1, "resent": 1, "surfaced": 0}
    # The next runs, however soon, read only what was written since: each delivery is read once.
    assert run_at(start + RECONCILE_GRACE + timedelta(seconds=3))["examined"] == 0

    second = make(tenant_id, endpoint_id, start + timedelta(seconds=10), DeliveryStatus.QUEUED)
    store([second])
    with as_function("reconciler"):
        wired = wiring.reconciler()
        working, wired.queue = wired.queue, RefusingQueue()
    with pytest.raises(Exception, match="unreachable"):
        run_at(start + RECONCILE_GRACE + timedelta(minutes=1))
    wired.queue = working
    # The failed run read `second` and died before its send: the checkpoint did not move, the next run reads it again.
    assert run_at(start + RECONCILE_GRACE + timedelta(minutes=6)) == {"examined": 1, "resent": 1, "surfaced": 0}
    assert platform.pump() == 2
    assert sorted(r.headers["webhook-id"] for r in consumer.wait_for(2)) == sorted([first.event.id, second.event.id])


def test_a_run_far_behind_catches_up_a_step_at_a_time_and_an_operator_looks_further(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    tenant_id, _token, endpoint_id = tenant_with_endpoint(platform, consumer)
    start = utcnow()
    run_at(start)  # the checkpoint: `start` less the grace
    behind = start + CATCH_UP_STEP * (CATCH_UP_STEPS + 2)  # the reconciler failed for this long
    late = make(tenant_id, endpoint_id, behind - CATCH_UP_STEP, DeliveryStatus.QUEUED)
    store([late])
    assert run_at(behind)["resent"] == 0  # CATCH_UP_STEPS spans, not yet as far as `late`
    assert run_at(behind + timedelta(seconds=1))["resent"] == 1  # the next run goes on from there
    assert run_at(behind + timedelta(seconds=2))["resent"] == 0

    # An operator's look back reads its span whatever the checkpoint says (re-sending is harmless).
    with as_function("reconciler"):
        wiring.reconciler().clock = lambda: behind + timedelta(seconds=3)
    report = invoke("reconciler", {**scheduled_event("hookrelay-reconciler"), "lookback_minutes": 30})
    assert report["resent"] == 1
