"""The circuit of an endpoint on moto: the real handlers, tables, queue and ASL (probe workflow executed by moto's
interpreter), and a scripted consumer on 127.0.0.1. Every transition of domain/circuit.py, and the races.

The schedule: a first retry after 3 s (so the failures that open the circuit are first attempts), then 1 s
apart, then every 3 s, within a 120 s horizon; probes follow it from the opening.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import boto3
import pytest

from hookrelay import wiring
from hookrelay.adapters import schema
from hookrelay.adapters.circuit import DynamoParkingLot
from hookrelay.adapters.dynamodb import DeliveryTable, EndpointTable
from hookrelay.adapters.records import from_data
from hookrelay.adapters.sqs import SqsDeliveryQueue
from hookrelay.adapters.stepfunctions import StepFunctionsRetryWorkflow
from hookrelay.domain.circuit import OPEN_AFTER_FAILURES, CircuitState, Via
from hookrelay.domain.clock import utcnow
from hookrelay.domain.models import Delivery, Endpoint
from hookrelay.domain.status import DeadReason, DeliveryStatus
from hookrelay.functions import INGEST
from hookrelay.services import parking
from hookrelay.services.ports import DELIVERIES_PARKED, DeliveryMessage
from local.lambda_runtime import invoke
from local.schedule import scheduled_event
from scripts.create_admin_key import create_admin_key
from tests.support.aws import as_function, ingest_reads_endpoints_again, moto_stack
from tests.support.consumer import Reply, ScriptedConsumer
from tests.support.platform import Platform
from tests.support.pump import QueuePump, wait_until
from tests.support.records import stored_deliveries

SCHEDULE = json.dumps({"name": "circuit-test", "gaps": [0, 3, 1, 1], "repeat_every": 3, "horizon": 120})
HORIZON_SECONDS = 120
FLAKY = Reply(503)


@pytest.fixture
def platform() -> Iterator[Platform]:
    with moto_stack(retry_schedule=SCHEDULE) as env:
        yield Platform(env=env, admin_token=create_admin_key(env["API_KEYS_TABLE"]).token)


class Outage:
    """One tenant, one endpoint on the consumer, a producer: publish events in order and watch the endpoint."""

    def __init__(self, platform: Platform, consumer: ScriptedConsumer, *, max_in_flight: int | None = None) -> None:
        """`max_in_flight=1`: one message group, so every attempt is made in event order, one at a time."""
        self.platform = platform
        self.consumer = consumer
        self.tenant_id, self.token = platform.new_tenant()
        self.endpoint_id = platform.new_endpoint(self.token, consumer.url, max_in_flight=max_in_flight)["id"]
        self.producer = platform.new_key("producer")
        self.event_ids: list[str] = []
        self.delivery_ids: list[str] = []

    def publish(self, count: int, key: str | None = None) -> list[str]:
        ids = []
        for _ in range(count):
            body: dict[str, Any] = {"tenant_id": self.tenant_id, "type": "a.b", "data": {"n": len(self.event_ids)}}
            if key:
                body["ordering_key"] = key
            accepted = self.platform.call("POST", "/v1/events", self.producer, body)
            assert accepted.status == 202, accepted.body
            self.event_ids.append(accepted.json()["event_id"])
            [delivery_id] = accepted.json()["delivery_ids"]
            self.delivery_ids.append(delivery_id)
            ids.append(delivery_id)
        return ids

    def endpoint(self) -> Endpoint:
        endpoint = EndpointTable(table("ENDPOINTS_TABLE")).get(self.tenant_id, self.endpoint_id)
        assert endpoint is not None
        return endpoint

    def parked(self) -> int:
        """How many deliveries wait in the endpoint's lot (a strongly consistent read)."""
        return (
            DynamoParkingLot(table("DELIVERIES_TABLE"), table("PARKING_LOT_TABLE"), table("EVENT_LOG_TABLE"))
            .count(self.endpoint_id, up_to=10_000)
            .counted
        )

    def delivery(self, delivery_id: str) -> Delivery:
        delivery = DeliveryTable(table("DELIVERIES_TABLE"), table("EVENT_LOG_TABLE")).get(delivery_id)
        assert delivery is not None
        return delivery


def table(env_var: str) -> Any:
    return boto3.resource("dynamodb").Table(os.environ[env_var])


def executions(platform: Platform) -> list[dict[str, Any]]:
    arn = platform.env["RETRY_STATE_MACHINE_ARN"]
    return boto3.client("stepfunctions").list_executions(stateMachineArn=arn)["executions"]


def probe_executions(platform: Platform) -> list[dict[str, Any]]:
    return [e for e in executions(platform) if e["name"].startswith("circuit-")]


def open_circuit(outage: Outage) -> None:
    """OPEN_AFTER_FAILURES first attempts fail in a row (the consumer answers 503 until told otherwise)."""
    outage.consumer.default = FLAKY
    outage.publish(OPEN_AFTER_FAILURES)
    outage.platform.pump()
    assert outage.endpoint().circuit is CircuitState.OPEN
    ingest_reads_endpoints_again()  # what comes next comes during the outage, after ingest's kept list has expired


def recover_and_drain(outage: Outage, limit: float = 60.0) -> None:
    outage.consumer.default = Reply(200)
    with QueuePump.delivery(outage.platform.env):
        wait_until(lambda: outage.endpoint().circuit is CircuitState.CLOSED, "the circuit to close", limit)


# --- Opening ---


def test_a_stray_failure_does_not_open_the_circuit_and_a_success_starts_the_count_again(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    outage = Outage(platform, consumer, max_in_flight=1)  # attempts in event order: the count is by arrival
    consumer.queue([FLAKY] * (OPEN_AFTER_FAILURES - 1) + [Reply(200)] + [FLAKY] * (OPEN_AFTER_FAILURES - 1))
    outage.publish(2 * OPEN_AFTER_FAILURES - 1)
    platform.pump()

    # Nine failures of ten first attempts, but never five in a row: the circuit stays closed. (The failed
    # deliveries' own retries succeed meanwhile, each a success that starts the count again.)
    assert consumer.answers[: 2 * OPEN_AFTER_FAILURES - 1].count(503) == 2 * OPEN_AFTER_FAILURES - 2
    assert outage.endpoint().circuit is CircuitState.CLOSED
    assert probe_executions(platform) == []


def test_failures_in_a_row_open_the_circuit_and_start_one_probe_workflow(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    outage = Outage(platform, consumer)
    open_circuit(outage)

    endpoint = outage.endpoint()
    assert endpoint.circuit_opened_at is not None and endpoint.next_probe_at is not None
    assert endpoint.circuit_step == 1
    [probe] = probe_executions(platform)
    assert probe["status"] == "RUNNING"
    # The delivery whose failure opened it is parked, not handed to a retry workflow of its own.
    last = outage.delivery(outage.delivery_ids[-1])
    assert last.status is DeliveryStatus.RETRYING and last.parked_at is not None
    assert len(executions(platform)) == OPEN_AFTER_FAILURES  # four retry workflows, one probe workflow
    # The four that failed first wait in their retry workflows, but are parked at once too: oldest event first.
    assert all(outage.delivery(d).parked_at is not None for d in outage.delivery_ids)
    assert outage.parked() == OPEN_AFTER_FAILURES


def test_parked_deliveries_make_no_attempts_and_start_no_executions(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    outage = Outage(platform, consumer)
    open_circuit(outage)
    parked_before = outage.parked()

    parked = outage.publish(20)
    platform.pump()

    events = {outage.delivery(d).event_id for d in parked}
    assert not events & {r.headers["webhook-id"] for r in consumer.received}  # never sent
    assert not set(parked) & {e["name"] for e in executions(platform)}  # no workflow of their own
    for delivery_id in parked:
        delivery = outage.delivery(delivery_id)
        assert delivery.status is DeliveryStatus.QUEUED and delivery.parked_at is not None
        assert delivery.attempts == []
    assert outage.parked() >= parked_before + 20


def ended_execution(platform: Platform, name: str) -> dict[str, Any]:
    found: dict[str, Any] = wait_until(
        lambda: next((e for e in executions(platform) if e["name"] == name and e["status"] != "RUNNING"), None),
        f"execution {name} to end",
    )
    return found


def test_the_retry_workflows_of_the_failures_that_opened_it_are_stopped(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    outage = Outage(platform, consumer)
    open_circuit(outage)
    first = outage.delivery_ids[0]  # failed first, handed to its own retry workflow before the circuit opened

    assert outage.delivery(first).parked_at is not None  # parked when the circuit opened
    assert ended_execution(platform, first)["status"] == "ABORTED"  # stopped waiting: it never wakes
    assert len(outage.delivery(first).attempts) == 1


def test_a_waking_retry_is_parked_and_its_workflow_ends(
    platform: Platform, consumer: ScriptedConsumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As after a crash between parking the opening failures and stopping their retry workflows."""
    monkeypatch.setattr(StepFunctionsRetryWorkflow, "stop", lambda self, delivery_id: None)
    outage = Outage(platform, consumer, max_in_flight=1)  # in event order: the first failure is not the opener
    open_circuit(outage)
    # The probe workflow held: its first probe (3 s after the opening) would attempt the oldest parked delivery,
    # which is this one once its retry has parked it, and that attempt is not the one this test is about.
    sfn = boto3.client("stepfunctions")
    [probe] = probe_executions(platform)
    wait_until(lambda: _stopped(sfn, probe["executionArn"]), "the probe workflow to stop")
    first = outage.delivery_ids[0]
    lot = DynamoParkingLot(table("DELIVERIES_TABLE"), table("PARKING_LOT_TABLE"), table("EVENT_LOG_TABLE"))
    assert lot.unpark(first, outage.endpoint_id)  # and the park itself lost: only the waking retry parks it

    with QueuePump.delivery(platform.env):
        wait_until(lambda: outage.delivery(first).parked_at is not None, "the first delivery's retry to park")
        execution = ended_execution(platform, first)
    assert execution["status"] == "SUCCEEDED"
    assert len(outage.delivery(first).attempts) == 1  # parked on waking: no second attempt
    assert len(consumer.received) == OPEN_AFTER_FAILURES  # and nothing sent since the opening


def test_the_api_shows_the_circuit_and_what_waits_on_it(platform: Platform, consumer: ScriptedConsumer) -> None:
    outage = Outage(platform, consumer)
    open_circuit(outage)
    [parked] = outage.publish(1)
    platform.pump()

    health = platform.call("GET", f"/v1/endpoints/{outage.endpoint_id}/health", outage.token).json()
    circuit = health["circuit"]
    assert circuit["state"] == "open" and circuit["opened_at"] and circuit["next_probe_at"]
    assert circuit["parked"] == outage.parked() >= 2 and circuit["parked_exact"] and circuit["drain"] is None
    delivery = platform.call("GET", f"/v1/deliveries/{parked}", outage.token).json()
    assert delivery["status"] == "queued" and delivery["parked_at"]
    assert delivery["waiting_on"]["circuit"]["next_probe_at"] == circuit["next_probe_at"]
    listed = platform.call("GET", f"/v1/deliveries?endpoint_id={outage.endpoint_id}", outage.token).json()
    assert all(d["parked_at"] for d in listed["data"])  # every one of them waits on the circuit

    recover_and_drain(outage)
    after = platform.call("GET", f"/v1/endpoints/{outage.endpoint_id}/health", outage.token).json()["circuit"]
    assert (after["state"], after["parked"], after["opened_at"]) == ("closed", 0, None)
    assert platform.call("GET", f"/v1/deliveries/{parked}", outage.token).json()["waiting_on"] is None


def test_a_parked_count_stops_at_its_limit(
    platform: Platform, consumer: ScriptedConsumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An outage at volume parks millions: the health read and a parked delivery's `waiting_on` count the lot only
    up to a limit, and say when more wait."""
    outage = Outage(platform, consumer)
    open_circuit(outage)
    [parked] = outage.publish(1)
    platform.pump()
    behind = outage.parked()
    assert behind >= 2

    def counts() -> list[tuple[int, bool]]:
        health = platform.call("GET", f"/v1/endpoints/{outage.endpoint_id}/health", outage.token).json()
        waiting = platform.call("GET", f"/v1/deliveries/{parked}", outage.token).json()["waiting_on"]["circuit"]
        return [(shown["parked"], shown["parked_exact"]) for shown in (health["circuit"], health["backlog"], waiting)]

    monkeypatch.setattr(parking, "PARKED_COUNT_LIMIT", behind - 1)
    assert counts() == [(behind - 1, False)] * 3
    monkeypatch.setattr(parking, "PARKED_COUNT_LIMIT", behind)
    assert counts() == [(behind, True)] * 3


# --- Probe and drain ---


def test_probe_failures_wait_then_success_drains_every_parked_delivery_in_event_order(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    outage = Outage(platform, consumer)
    open_circuit(outage)
    outage.publish(15)
    platform.pump()
    before = len(consumer.received)

    with QueuePump.delivery(platform.env):
        # Probes keep failing on the schedule: one request at a time, never a crowd.
        wait_until(lambda: outage.endpoint().probes_made >= 2, "two failed probes")
        assert len(consumer.received) - before <= outage.endpoint().probes_made + 1
        consumer.default = Reply(200)
        wait_until(lambda: outage.endpoint().circuit is CircuitState.CLOSED, "the circuit to close")

    # Oldest first, in the order the events happened, in each of the endpoint's message groups.
    assert in_each_group(outage, _first_successes(consumer)) == in_each_group(outage, outage.event_ids)
    for delivery_id in outage.delivery_ids:
        assert outage.delivery(delivery_id).status is DeliveryStatus.DELIVERED
    endpoint = outage.endpoint()
    assert outage.parked() == 0 and endpoint.drained_count >= len(outage.event_ids) - 1
    wait_until(lambda: probe_executions(platform)[0]["status"] == "SUCCEEDED", "the probe workflow to end")
    assert len(probe_executions(platform)) == 1


def test_events_published_during_the_drain_come_after_it(platform: Platform, consumer: ScriptedConsumer) -> None:
    outage = Outage(platform, consumer)
    open_circuit(outage)
    outage.publish(10)
    platform.pump()
    consumer.default = Reply(200, delay=0.05)  # slow enough for the drain to still be going

    with QueuePump.delivery(platform.env):
        wait_until(lambda: outage.endpoint().circuit is CircuitState.DRAINING, "the drain to start")
        outage.publish(5)
        wait_until(lambda: outage.endpoint().circuit is CircuitState.CLOSED, "the circuit to close")

    successes = _first_successes(consumer)
    assert in_each_group(outage, successes) == in_each_group(outage, outage.event_ids)


def test_a_429_with_retry_after_during_the_drain_pauses_it(platform: Platform, consumer: ScriptedConsumer) -> None:
    outage = Outage(platform, consumer, max_in_flight=1)  # one group: nothing else in flight beside the 429
    open_circuit(outage)
    outage.publish(6)
    platform.pump()
    # The probe gets through, the next (the first released) is told to come back in 2 s, then all is well.
    consumer.script.clear()
    consumer.default = Reply(200)
    consumer.queue([Reply(200), Reply(429, headers=(("retry-after", "2"),))])

    with QueuePump.delivery(platform.env):
        wait_until(lambda: outage.endpoint().drain_paused_until is not None, "the drain to pause")
        wait_until(lambda: outage.endpoint().circuit is CircuitState.CLOSED, "the circuit to close")

    told = consumer.answers.index(429)
    assert consumer.received[told + 1].at - consumer.received[told].at >= 1.9  # nothing sent during the pause
    assert in_each_group(outage, _first_successes(consumer)) == in_each_group(outage, outage.event_ids)


def test_a_failure_during_the_drain_reopens_the_circuit_and_nothing_is_lost_or_sent_twice(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    outage = Outage(platform, consumer)
    open_circuit(outage)
    outage.publish(8)
    platform.pump()
    consumer.script.clear()
    consumer.default = Reply(200)
    consumer.queue([Reply(200), Reply(200), Reply(500)])  # the probe, one released delivery, then a failure

    with QueuePump.delivery(platform.env):
        wait_until(lambda: 500 in consumer.answers, "a released delivery to fail")
        wait_until(lambda: outage.endpoint().circuit is CircuitState.CLOSED, "the circuit to close again", 90)

    failed = next(d for d in map(outage.delivery, outage.delivery_ids) if 500 in [a.status_code for a in d.attempts])
    assert [a.status_code for a in failed.attempts][-2:] == [500, 200]  # reopened, parked again, delivered later
    assert in_each_group(outage, _first_successes(consumer)) == in_each_group(outage, outage.event_ids)
    successes = [
        r.headers["webhook-id"] for r, answer in zip(consumer.received, consumer.answers, strict=True) if answer == 200
    ]
    assert len(successes) == len(set(successes))  # delivered once each
    assert len(probe_executions(platform)) == 1  # the same workflow probed again after the reopen


# --- Each delivery keeps its own promise ---


def test_a_parked_delivery_past_its_horizon_is_dead_with_its_reason(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    outage = Outage(platform, consumer)
    open_circuit(outage)
    parked = outage.publish(3)
    platform.pump()
    parked_before = outage.parked()

    later = utcnow() + timedelta(seconds=HORIZON_SECONDS + 5)
    report = replace(wiring.circuit_service(), clock=lambda: later).sweep()

    assert report.expired == parked_before >= 1 + 3  # every one parked (their own horizons passed), in one sweep
    for delivery_id in parked:
        delivery = outage.delivery(delivery_id)
        assert delivery.status is DeliveryStatus.DEAD and delivery.parked_at is None
        assert delivery.dead_lettered_at is not None and delivery.dead_reason is DeadReason.HORIZON
    assert outage.parked() == 0


def test_a_parked_deliverys_death_and_its_reason_are_one_write(
    platform: Platform, consumer: ScriptedConsumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash right after a parked delivery's death is written leaves it dead with its reason and marked counted,
    not a dead delivery with no reason; the next sweep ends the others and leaves it be."""
    outage = Outage(platform, consumer)
    open_circuit(outage)
    outage.publish(2)
    platform.pump()
    parked_before = outage.parked()
    later = utcnow() + timedelta(seconds=HORIZON_SECONDS + 5)
    service = replace(wiring.circuit_service(), clock=lambda: later)

    def crash(*_: object) -> None:
        raise RuntimeError("the sweeper died right after the death's write")

    monkeypatch.setattr(service.events, "extend_expiry", crash)
    with pytest.raises(RuntimeError):
        service.sweep()
    dead = [d for d in map(outage.delivery, outage.delivery_ids) if d.status is DeliveryStatus.DEAD]
    assert len(dead) == 1 and outage.parked() == parked_before - 1
    assert dead[0].dead_reason is DeadReason.HORIZON and dead[0].dead_lettered_at is not None

    monkeypatch.undo()
    assert service.sweep().expired == parked_before - 1
    assert outage.delivery(dead[0].id) == dead[0]  # not ended, nor counted, again


def test_disabling_an_endpoint_with_an_open_circuit_cancels_what_is_parked(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    outage = Outage(platform, consumer)
    open_circuit(outage)
    parked = outage.publish(4)
    platform.pump()
    parked_before = outage.parked()
    wiring.endpoint_service().set_enabled(outage.tenant_id, outage.endpoint_id, False)

    report = wiring.circuit_service().sweep()

    assert report.cancelled == parked_before >= 1 + 4  # the one that opened the circuit, the four parked after it
    for delivery_id in parked:
        assert outage.delivery(delivery_id).status is DeliveryStatus.CANCELLED
    endpoint = outage.endpoint()
    assert outage.parked() == 0 and endpoint.circuit is CircuitState.CLOSED


def test_a_lost_probe_workflow_is_restarted_by_the_sweep(platform: Platform, consumer: ScriptedConsumer) -> None:
    outage = Outage(platform, consumer)
    open_circuit(outage)
    sfn = boto3.client("stepfunctions")
    [probe] = probe_executions(platform)
    wait_until(lambda: _stopped(sfn, probe["executionArn"]), "the probe workflow to stop")

    later = utcnow() + timedelta(minutes=5)
    report = replace(wiring.circuit_service(), clock=lambda: later).sweep()

    assert report.restarted == [outage.endpoint_id]
    assert outage.endpoint().circuit_step == 2
    running = [e for e in probe_executions(platform) if e["status"] == "RUNNING"]
    assert [e["name"] for e in running] == [f"circuit-{outage.endpoint_id}-2"]
    # A running workflow is left alone.
    assert replace(wiring.circuit_service(), clock=lambda: later).sweep().restarted == []


# --- Duplicates ---


def test_duplicate_messages_send_nothing_twice(platform: Platform, consumer: ScriptedConsumer) -> None:
    outage = Outage(platform, consumer)
    open_circuit(outage)
    [parked] = outage.publish(1)
    platform.pump()
    parked_before = outage.parked()
    queue = SqsDeliveryQueue(platform.sqs, platform.env[schema.DELIVERY_QUEUE.env_var])
    delivery = outage.delivery(parked)
    # The first-attempt message again, and a drain release twice: the circuit is open, all are held.
    queue.enqueue([_message(delivery, "again", Via.QUEUE), _message(delivery, "d1", Via.DRAIN)])
    platform.pump()
    assert outage.parked() == parked_before  # held, not parked twice
    before = len(consumer.received)

    recover_and_drain(outage)
    queue.enqueue([_message(delivery, "late-1", Via.DRAIN), _message(delivery, "late-2", Via.QUEUE)])
    platform.pump()

    sent = [r.headers["webhook-id"] for r in consumer.received[before:]]
    assert sent.count(delivery.event_id) == 1
    assert outage.delivery(parked).status is DeliveryStatus.DELIVERED


# --- helpers ---


def _stopped(sfn: Any, arn: str) -> bool:
    """Stop the execution; moto refuses (AttributeError) until its interpreter has set the execution up."""
    try:
        sfn.stop_execution(executionArn=arn)
    except AttributeError:
        return False
    return sfn.describe_execution(executionArn=arn)["status"] != "RUNNING"


def _message(delivery: Delivery, tag: str, via: Via) -> DeliveryMessage:
    return DeliveryMessage(
        delivery_id=delivery.id,
        tenant_id=delivery.tenant_id,
        attempt=delivery.attempt_count + 1,
        group_id=delivery.message_group_id,
        deduplication_id=f"{delivery.id}-{tag}",
        endpoint_id=delivery.endpoint_id,
        via=via,
    )


def in_each_group(outage: Outage, event_ids: list[str]) -> dict[str, list[str]]:
    """The events by their deliveries' message group (an endpoint's slot, `max_in_flight` of them), each group's in
    the given order: what the drain keeps in event order. Groups are attempted at once (in the event source's
    batches and across invocations), so events of two groups may be sent in either order."""
    group_of = {
        event_id: outage.delivery(delivery_id).message_group_id
        for event_id, delivery_id in zip(outage.event_ids, outage.delivery_ids, strict=True)
    }
    groups: dict[str, list[str]] = {}
    for event_id in event_ids:
        groups.setdefault(group_of[event_id], []).append(event_id)
    return groups


def _first_successes(consumer: ScriptedConsumer) -> list[str]:
    seen: list[str] = []
    for index, request in enumerate(consumer.received):
        event_id = request.headers["webhook-id"]
        if consumer.answers[index] == 200 and event_id not in seen:
            seen.append(event_id)
    return seen


# --- Parked on arrival: ingest parks new deliveries behind an open circuit (services/parking.py, park_new) ---


def sent_ids(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The delivery ids whose messages are sent to the delivery queue from now on (by any function, in process)."""
    sent: list[str] = []
    real = SqsDeliveryQueue.enqueue

    def recording(self: SqsDeliveryQueue, messages: Any) -> None:
        sent.extend(m.delivery_id for m in messages)
        real(self, messages)

    monkeypatch.setattr(SqsDeliveryQueue, "enqueue", recording)
    return sent


def run_reconciler_later() -> dict[str, Any]:
    """The reconciler's run once the deliveries just written are past its grace."""
    from hookrelay.services.reconcile import RECONCILE_GRACE

    later = utcnow() + RECONCILE_GRACE + timedelta(seconds=30)
    with as_function("reconciler"):
        wiring.reconciler().clock = lambda: later
    report: dict[str, Any] = invoke("reconciler", scheduled_event("hookrelay-reconciler"))
    return report


def unanswered_delivery(outage: Outage) -> Delivery:
    """The one delivery of the outage's endpoint that no 202 reported (its request crashed)."""
    items = stored_deliveries(table("DELIVERIES_TABLE"))
    [item] = [i for i in items if i["endpoint_id"] == outage.endpoint_id and i["id"] not in outage.delivery_ids]
    return from_data(Delivery, item)


def close_unseen(outage: Outage) -> None:
    """The circuit closed by a close that read the lot before a parker's entry was written (the parker died before
    its own read of the endpoint, which would have held the close open)."""
    table("ENDPOINTS_TABLE").update_item(
        Key={"tenant_id": outage.tenant_id, "id": outage.endpoint_id},
        UpdateExpression="SET circuit = :closed REMOVE circuit_closing",
        ExpressionAttributeValues={":closed": CircuitState.CLOSED.value},
    )


def crash(*_args: Any, **_kwargs: Any) -> None:
    raise RuntimeError("the process died here")


def published_with_a_crash_at(
    platform: Platform, consumer: ScriptedConsumer, monkeypatch: pytest.MonkeyPatch, owner: type, method: str
) -> tuple[Outage, Delivery]:
    """An open circuit, then an event whose ingest dies at `owner.method` (the producer gets a 5xx): its delivery."""
    outage = Outage(platform, consumer)
    open_circuit(outage)
    monkeypatch.setattr(owner, method, crash)
    body = {"tenant_id": outage.tenant_id, "type": "a.b", "data": {"n": "crashed"}}
    assert platform.call("POST", "/v1/events", outage.producer, body).status >= 500
    monkeypatch.undo()
    return outage, unanswered_delivery(outage)


def test_events_published_while_the_circuit_is_open_are_parked_on_arrival_with_no_message(
    platform: Platform, consumer: ScriptedConsumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    outage = Outage(platform, consumer)
    open_circuit(outage)
    parked_before = outage.parked()
    sent = sent_ids(monkeypatch)

    parked = outage.publish(3)

    assert sent == []  # no message, so no delivery invocation and no endpoint read per event
    assert outage.parked() == parked_before + 3
    for delivery_id in parked:
        delivery = outage.delivery(delivery_id)
        assert delivery.status is DeliveryStatus.QUEUED and delivery.parked_at is not None
    assert run_reconciler_later()["resent"] == 0  # parked as they should be: the reconciler leaves them be
    recover_and_drain(outage)
    answered = zip(consumer.received, consumer.answers, strict=True)
    delivered = [r.headers["webhook-id"] for r, status in answered if status == 200]
    assert len(delivered) == len(set(delivered))  # each once
    assert in_each_group(outage, delivered) == in_each_group(outage, outage.event_ids)  # with the rest, in event order


def test_ingest_counts_what_it_parks_on_arrival(
    platform: Platform, consumer: ScriptedConsumer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The `DeliveriesParked` metric in ingest's own EMF record (the delivery function counts the parks it makes)."""
    outage = Outage(platform, consumer)
    open_circuit(outage)
    capsys.readouterr()
    outage.publish(2)
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    counted = [r[DELIVERIES_PARKED] for r in records if DELIVERIES_PARKED in r and r.get("service") == INGEST.name]
    assert counted == [[1], [1]]  # one record per request, each counting its delivery


def test_a_circuit_closed_as_the_delivery_parks_on_arrival_has_it_sent(
    platform: Platform, consumer: ScriptedConsumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ingest's listing says open; by the read after the lot entry, the circuit has closed: the delivery comes back
    out and is sent, as any new delivery is."""
    outage = Outage(platform, consumer)
    listed = EndpointTable.list_for_tenant
    monkeypatch.setattr(
        EndpointTable,
        "list_for_tenant",
        lambda self, tenant_id: [replace(e, circuit=CircuitState.OPEN) for e in listed(self, tenant_id)],
    )
    sent = sent_ids(monkeypatch)

    [delivery_id] = outage.publish(1)

    assert sent == [delivery_id]
    assert outage.parked() == 0 and outage.delivery(delivery_id).parked_at is None
    platform.pump()
    assert outage.delivery(delivery_id).status is DeliveryStatus.DELIVERED


def test_a_close_under_way_is_held_open_by_a_delivery_parked_on_arrival(
    platform: Platform, consumer: ScriptedConsumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    outage = Outage(platform, consumer)
    open_circuit(outage)
    table("ENDPOINTS_TABLE").update_item(  # the drain has begun closing: it marked the endpoint, then reads the lot
        Key={"tenant_id": outage.tenant_id, "id": outage.endpoint_id},
        UpdateExpression="SET circuit = :draining, circuit_closing = :yes",
        ExpressionAttributeValues={":draining": CircuitState.DRAINING.value, ":yes": True},
    )
    sent = sent_ids(monkeypatch)

    [delivery_id] = outage.publish(1)

    assert sent == []
    assert outage.delivery(delivery_id).parked_at is not None
    assert outage.endpoint().circuit_closing is False  # that close now fails, whatever it read
    assert outage.parked() == OPEN_AFTER_FAILURES + 1


def test_a_crash_between_the_parked_record_and_its_lot_entry_is_repaired_by_the_reconciler(
    platform: Platform, consumer: ScriptedConsumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    outage, stranded = published_with_a_crash_at(platform, consumer, monkeypatch, DynamoParkingLot, "enter")
    assert stranded.parked_at is not None and outage.parked() == OPEN_AFTER_FAILURES  # marked, never entered
    report = run_reconciler_later()
    assert report["resent"] == 1
    platform.pump()  # its first message: the delivery function parks it again, properly, the circuit being open
    assert outage.parked() == OPEN_AFTER_FAILURES + 1
    recover_and_drain(outage)
    assert outage.delivery(stranded.id).status is DeliveryStatus.DELIVERED


def test_a_crash_before_the_read_that_would_see_the_circuit_close_is_repaired_by_the_reconciler(
    platform: Platform, consumer: ScriptedConsumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hookrelay.services.parking import Parking

    outage, stranded = published_with_a_crash_at(platform, consumer, monkeypatch, Parking, "_still_stands")
    assert stranded.parked_at is not None and outage.parked() == OPEN_AFTER_FAILURES + 1  # entered

    close_unseen(outage)  # a close that read the lot before that entry was written
    consumer.default = Reply(200)
    assert run_reconciler_later()["resent"] == 1
    platform.pump()
    assert outage.delivery(stranded.id).status is DeliveryStatus.DELIVERED
    assert stranded.event_id in {r.headers["webhook-id"] for r in consumer.received}


def test_a_parked_retry_left_behind_a_circuit_that_closed_unseen_is_attempted_when_its_message_comes_back(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    """Its parker died between its lot entry and the endpoint read, and a close that had read the lot just before
    completed: the delivery is marked parked behind a closed circuit, which nothing sweeps or drains. The message it
    was parking comes back (unacknowledged, after its visibility timeout): the delivery is taken out and attempted."""
    outage = Outage(platform, consumer)
    open_circuit(outage)
    retrying = outage.delivery(outage.delivery_ids[0])  # failed once, parked as the circuit opened
    assert retrying.status is DeliveryStatus.RETRYING and retrying.parked_at is not None
    close_unseen(outage)
    consumer.default = Reply(200)
    message = _message(retrying, "again", Via.QUEUE)
    SqsDeliveryQueue(boto3.client("sqs"), platform.env[schema.DELIVERY_QUEUE.env_var]).enqueue([message])

    platform.pump()

    after = outage.delivery(retrying.id)
    assert after.status is DeliveryStatus.DELIVERED and after.parked_at is None
    assert retrying.event_id in {r.headers["webhook-id"] for r in consumer.received}


def test_a_batch_accepted_while_the_circuit_is_open_is_parked_on_arrival_and_drained_in_batch_order(
    platform: Platform, consumer: ScriptedConsumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    outage = Outage(platform, consumer)
    open_circuit(outage)
    sent = sent_ids(monkeypatch)
    items = [{"type": "a.b", "data": {"n": f"batch-{i}"}} for i in range(3)]

    answer = platform.call(
        "POST", "/v1/events/batch", outage.producer, {"tenant_id": outage.tenant_id, "events": items}
    )

    assert answer.status == 200, answer.body
    results = answer.json()["results"]
    batch_events = [r["event_id"] for r in results]
    outage.event_ids.extend(batch_events)
    outage.delivery_ids.extend(delivery_id for r in results for delivery_id in r["delivery_ids"])
    assert sent == []
    assert outage.parked() == OPEN_AFTER_FAILURES + 3
    recover_and_drain(outage)
    answered = zip(consumer.received, consumer.answers, strict=True)
    delivered = [r.headers["webhook-id"] for r, status in answered if status == 200]
    assert len(delivered) == len(set(delivered))  # each once
    # The batch after the events before it, in its own order, in each message group.
    assert in_each_group(outage, delivered) == in_each_group(outage, outage.event_ids)
