"""The crash-point matrix: every AWS call of each write path, crashed once, then the normal retries and the reconciler.

For each path, a clean run counts its AWS calls; then, for each call n, a fresh scenario runs with the process dying
at call n (`tests/support/crash.py`), after which what the real world does next happens: SQS delivers the message
again once its visibility timeout has passed, a producer retries under its `Idempotency-Key` once the crashed
invocation's in-progress record has expired, the scheduled sweeper and reconciler run. Then the invariant:

- every accepted event (or replay, test event, redrive) ends delivered, dead (its death recorded exactly once, with
  its reason) or cancelled; a request whose crash came before it wrote anything was never accepted (it answered 5xx);
- nothing is sent twice, except where at-least-once is documented: an attempt whose worker died after sending and
  before recording it is made again (the consumer guide's first rule), and an endpoint notice published by a sweep
  that died before recording it is published again, under the same `notice_id`;
- nothing is left `queued`, `attempting` or `running`, and the dead-letter and poison queues are empty.

Time never passes for real: the services' clocks read a virtual one that is moved on instead, and the retry state
machine (retry executions, the circuit's probe workflow) is stepped by hand in that time
(`tests/support/workflow_sim.py`): its waits end when due, an unanswered task times out and is re-sent, then reported
lost. The paths of the retry workflow and of the circuit (the failure that opens it, parking behind it, its probe,
its ordered drain) crash once at each call site (a step repeated per delivery is crashed in its first).

Then the same again with throttles: at the first call of each kind, AWS answers every try with its throttling
error, past botocore's retries (adapters/aws.py), so the code meets the error itself; same invariant. A message
whose invocation failed comes back after its visibility timeout (when time passes), as SQS hands it out again.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import boto3
import pytest

from hookrelay import wiring
from hookrelay.adapters import redrive_sqs, schema
from hookrelay.adapters.aws import MAX_ATTEMPTS
from hookrelay.adapters.dynamodb import EndpointTable
from hookrelay.adapters.schema import RETRY_STATE_MACHINE_ARN
from hookrelay.domain.circuit import OPEN_AFTER_FAILURES, CircuitState
from hookrelay.domain.classification import Outcome
from hookrelay.domain.clock import to_rfc3339, utcnow
from hookrelay.domain.models import Attempt
from hookrelay.domain.queues import DeliveryLane
from hookrelay.domain.status import DeadReason, DeliveryStatus
from hookrelay.handlers.api import start_redrive_once
from hookrelay.handlers.ingest import publish_once
from local.lambda_runtime import invoke
from local.provision import delivery_queue_urls
from local.schedule import scheduled_event
from local.sqs_source import queue_arn_of, to_record
from scripts.create_admin_key import create_admin_key
from tests.support.aws import as_function, moto_stack
from tests.support.consumer import Reply, ScriptedConsumer
from tests.support.crash import MATRIX, Crash, CrashInjector, Row, injector, unsharded
from tests.support.platform import Platform
from tests.support.records import make, store
from tests.support.workflow_sim import WorkflowSim

# Retries seconds apart (so the workflows' waits are short), a horizon past every jump in time a scenario makes.
SCHEDULE = json.dumps({"name": "crash-points", "gaps": [0, 2, 2], "repeat_every": 300, "horizon": 3 * 3600})
LATER = timedelta(minutes=7)  # past a queue's visibility timeout, a stale claim, the reconciler's grace
UNSETTLED = {DeliveryStatus.QUEUED, DeliveryStatus.ATTEMPTING, DeliveryStatus.RETRYING}


@dataclass
class World:
    platform: Platform
    consumer: ScriptedConsumer
    hook: CrashInjector
    sim: WorkflowSim
    producer: str
    notices_queue: str
    tenant_id: str = ""
    token: str = ""
    endpoint_id: str = ""
    key: str = ""
    scratch: dict[str, Any] = field(default_factory=dict)

    @property
    def sqs(self) -> Any:
        return self.platform.sqs

    def url(self, spec: schema.QueueSpec) -> str:
        """The queue's URL; the delivery queue's is shard 0's fast lane."""
        return self.urls(spec)[0]

    def urls(self, spec: schema.QueueSpec) -> list[str]:
        """The queue's URL; for the delivery queue, every delivery queue's (each shard's lanes)."""
        if schema.is_delivery_queue(spec):
            return delivery_queue_urls(self.platform.env).all()
        return [self.platform.env[spec.env_var]]


# --- What the world does after a crash ---


def run_queue(world: World, spec: schema.QueueSpec, function: str, *, limit: int = 50) -> int:
    """The SQS event sources of the queue (of every delivery queue, for the delivery queue), one message per
    invocation."""
    return sum(_run_one_queue(world, spec, url, function, limit=limit) for url in world.urls(spec))


def _run_one_queue(world: World, spec: schema.QueueSpec, url: str, function: str, *, limit: int) -> int:
    """One queue's event source. A message whose invocation dies stays in the queue; it is made visible again at
    once (its visibility timeout, passed), with its receive count, as SQS redelivers it."""
    arn = queue_arn_of(world.sqs, url)
    world.sim.apply_clocks()
    for handled in range(limit):
        messages = world.sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=1, MessageSystemAttributeNames=["All"]
        ).get("Messages", [])
        if not messages:
            return handled
        [message] = messages
        try:
            answer = invoke(function, {"Records": [to_record(message, arn)]}) or {}
        except Crash:
            visible_again(world, url, message)
            raise
        except Exception:  # the invocation failed (a throttle past the retries): the message comes back after its
            world.scratch.setdefault("in_flight", []).append((url, message))  # visibility timeout (`time_passes`)
            return handled
        if answer.get("batchItemFailures"):
            world.sqs.change_message_visibility(
                QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
            )
        else:
            world.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    raise AssertionError(f"{spec.logical_name} did not empty")


def visible_again(world: World, url: str, message: dict[str, Any]) -> None:
    world.sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)


def time_passes(world: World) -> None:
    """Minutes pass: claims go stale, the reconciler's grace is over, in-progress idempotency records expire."""
    world.sim.advance(world.sim.now + LATER)
    for url, message in world.scratch.pop("in_flight", []):
        visible_again(world, url, message)
    table = boto3.resource("dynamodb").Table(world.platform.env[schema.IDEMPOTENCY.env_var])
    for item in table.scan()["Items"]:
        if item.get("status") == "INPROGRESS":  # as the crashed invocation's timeout would have made it
            table.update_item(
                Key={"id": item["id"]},
                UpdateExpression="SET in_progress_expiration = :past",
                ExpressionAttributeValues={":past": 0},
            )


def reconcile(world: World) -> None:
    world.sim.apply_clocks()
    # Only the scenario's tenant: the earlier scenarios' tenants were settled and checked already, and walking them
    # all again would make the matrix quadratic in its crash points.
    with as_function("reconciler"):
        wiring.reconciler().tenants = OneTenant(world.tenant_id)
    invoke("reconciler", scheduled_event("hookrelay-reconciler"))


@dataclass(frozen=True)
class OneTenant:
    tenant_id: str

    def ids(self) -> Iterator[str]:
        yield self.tenant_id


def sweep(world: World) -> None:
    world.sim.apply_clocks()
    invoke("sweeper", scheduled_event("hookrelay-sweeper"))


def drive(world: World, *, rounds: int = 200) -> None:
    """The delivery queue and the workflows, in virtual time, until neither has anything due: what runs while the
    endpoint answers (waits end as they come due; nothing times out, no schedule fires)."""
    for _ in range(rounds):
        if run_queue(world, schema.DELIVERY_QUEUE, "delivery") or world.sim.step():
            continue
        due = world.sim.next_due()
        if due is None:
            return
        world.sim.advance(due)
    raise AssertionError("the workflows never came to rest")


def settle(world: World, *, rounds: int = 100) -> None:
    """Everything that runs on its own afterwards, until nothing is left to do: the queues' event sources, the
    workflows (their waits end, their unanswered tasks time out), the reconciler and the sweeper on schedule."""
    for _ in range(rounds):
        handled = run_queue(world, schema.REDRIVE_JOBS_QUEUE, "redrive")
        drive(world)
        reconcile(world)
        sweep(world)
        if handled or world.sim.step() or queued(world, schema.DELIVERY_QUEUE, schema.REDRIVE_JOBS_QUEUE):
            continue
        if not world.sim.unanswered():
            return
        world.sim.time_out()
    raise AssertionError("the system never came to rest")


def queued(world: World, *specs: schema.QueueSpec) -> int:
    total = 0
    for url in (url for spec in specs for url in world.urls(spec)):
        left = world.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        total += int(left["ApproximateNumberOfMessages"]) + int(left["ApproximateNumberOfMessagesNotVisible"])
    return total


# --- The invariant ---


def sent(world: World, webhook_id: str) -> int:
    return sum(1 for r in world.consumer.received if r.headers.get("webhook-id") == webhook_id)


def tenant_deliveries(world: World) -> list[Any]:
    response = world.platform.call("GET", "/v1/deliveries?limit=100", world.token).json()["data"]
    return [wiring.delivery_table().get(d["id"]) for d in response]


def check_settled(world: World) -> list[Any]:
    deliveries = tenant_deliveries(world)
    for delivery in deliveries:
        assert delivery.status not in UNSETTLED, (delivery.id, delivery.status)
        if delivery.status is DeliveryStatus.DEAD:
            assert delivery.dead_lettered_at is not None and delivery.dead_reason is not None, delivery.id
    for spec in (schema.DEAD_LETTER_QUEUE, schema.POISON_QUEUE, schema.REDRIVE_JOBS_DEAD_LETTER_QUEUE):
        assert queued(world, spec) == 0, spec
    assert world.sim.active() == [], [e.name for e in world.sim.active()]  # no workflow left running
    return deliveries


def sends_of_the_tenant(world: World) -> dict[str, int]:
    counts: dict[str, int] = {}
    for delivery in tenant_deliveries(world):
        counts.setdefault(delivery.event_id, sent(world, delivery.event_id))
    return counts


# --- The paths ---


@dataclass(frozen=True)
class Path:
    name: str
    functions: frozenset[str]
    setup: Callable[[World], None]
    act: Callable[[World], None]
    recover: Callable[[World], None]
    check: Callable[[World], str]
    # Crash at each call site once, not at each call: a path that repeats its steps (the drain's releases, the
    # failures that open a circuit) would crash at the same code over again.
    each_site_once: bool = False


def fresh_tenant(world: World, reply: Reply | None = None) -> None:
    world.sim.restart_clock()
    world.consumer.script.clear()
    world.consumer.default = reply or Reply(200)
    world.tenant_id, world.token = world.platform.new_tenant(f"t{len(MATRIX)}")
    world.endpoint_id = world.platform.new_endpoint(world.token, world.consumer.url)["id"]
    world.key = f"key-{len(MATRIX)}-{utcnow().timestamp()}"
    world.scratch = {}


# Ingest: idempotency record, tenant, endpoints, sequence counter, event, deliveries, messages, idempotency result.


def ingest_act(world: World) -> None:
    body = {"tenant_id": world.tenant_id, "type": "order.created", "data": {"n": 1}, "ordering_key": "o-1"}
    world.scratch["body"] = body
    answer = world.platform.call("POST", "/v1/events", world.producer, body, {"idempotency-key": world.key})
    assert answer.status == 202, answer.body
    world.scratch["accepted"] = answer.json()


def ingest_recover(world: World) -> None:
    time_passes(world)
    if "accepted" not in world.scratch:  # the producer saw an error: it retries under the same key
        body = world.scratch["body"]
        answer = world.platform.call("POST", "/v1/events", world.producer, body, {"idempotency-key": world.key})
        assert answer.status == 202, answer.body
        world.scratch["accepted"] = answer.json()
    settle(world)


def ingest_check(world: World) -> str:
    accepted = world.scratch["accepted"]
    [delivery] = check_settled(world)
    assert delivery.id in accepted["delivery_ids"] and delivery.event_id == accepted["event_id"]
    assert sends_of_the_tenant(world) == {accepted["event_id"]: 1}  # one event, sent once
    return f"{delivery.status.value}, sent once"


# Replay and the test event: API calls answered 5xx by the crash; the caller does not retry (a replay has no key).


def with_a_delivered_event(world: World) -> None:
    fresh_tenant(world)
    seeded = make(world.tenant_id, world.endpoint_id, utcnow() - timedelta(hours=1), DeliveryStatus.DELIVERED)
    store([seeded])
    world.scratch["original"] = seeded


def replay_act(world: World) -> None:
    original = world.scratch["original"].delivery.id
    answer = world.platform.call("POST", f"/v1/deliveries/{original}/replay", world.token)
    assert answer.status == 202, answer.body


def send_test_event(world: World) -> None:
    answer = world.platform.call("POST", f"/v1/endpoints/{world.endpoint_id}/test", world.token)
    assert answer.status == 202, answer.body


def api_recover(world: World) -> None:
    time_passes(world)
    settle(world)


def new_deliveries_check(world: World) -> str:
    check_settled(world)
    original = world.scratch.get("original")
    made = [d for d in tenant_deliveries(world) if original is None or d.id != original.delivery.id]
    counts = sends_of_the_tenant(world)
    assert all(n <= 1 for n in counts.values()), counts
    if not made:
        assert world.hook.crashed is not None
        return "not accepted (5xx), nothing written"
    assert len(made) == 1 and made[0].status is DeliveryStatus.DELIVERED, made
    return "delivered, sent once"


# Redrive: the API's start (under a key) and the redrive function's page.


def with_dead_deliveries(world: World) -> None:
    fresh_tenant(world)
    dead = [make(world.tenant_id, world.endpoint_id, utcnow() - timedelta(hours=2, minutes=i)) for i in range(2)]
    store(dead)
    for seeded in dead:
        wiring.delivery_table().mark_dead_lettered(seeded.delivery.id, utcnow(), DeadReason.EXHAUSTED)
    world.scratch["dead"] = dead


def redrive_act(world: World) -> None:
    since = to_rfc3339(utcnow() - timedelta(hours=3))
    world.scratch["since"] = since
    answer = world.platform.call(
        "POST",
        f"/v1/endpoints/{world.endpoint_id}/redrive",
        world.token,
        {"since": since},
        {"idempotency-key": world.key},
    )
    assert answer.status == 202, answer.body
    world.scratch["redrive_id"] = answer.json()["redrive_id"]
    run_queue(world, schema.REDRIVE_JOBS_QUEUE, "redrive")


def redrive_recover(world: World) -> None:
    time_passes(world)
    if "redrive_id" not in world.scratch:
        answer = world.platform.call(
            "POST",
            f"/v1/endpoints/{world.endpoint_id}/redrive",
            world.token,
            {"since": world.scratch["since"]},
            {"idempotency-key": world.key},
        )
        assert answer.status == 202, answer.body
        world.scratch["redrive_id"] = answer.json()["redrive_id"]
    settle(world)


def redrive_check(world: World) -> str:
    check_settled(world)
    redrive = world.platform.call("GET", f"/v1/redrives/{world.scratch['redrive_id']}", world.token).json()
    assert redrive["state"] == "completed", redrive
    for seeded in world.scratch["dead"]:
        assert sent(world, seeded.event.id) == 1, seeded.delivery.id
    return f"redrive completed, {len(world.scratch['dead'])} replays sent once each"


# Delivery: a first attempt that succeeds, and a last attempt that dies (the dead-letter path).


def with_a_queued_event(world: World) -> None:
    fresh_tenant(world)
    answer = world.platform.call(
        "POST", "/v1/events", world.producer, {"tenant_id": world.tenant_id, "type": "a.b", "data": {}}
    )
    world.scratch["event_id"] = answer.json()["event_id"]


def with_a_queued_event_for_a_slow_endpoint(world: World) -> None:
    """The endpoint is slow: its fast lane forwards the message (tail, mark, send) and its slow lane attempts it and
    deletes the tail (domain/lanes.py)."""
    with_a_queued_event(world)
    table = EndpointTable(boto3.resource("dynamodb").Table(world.platform.env[schema.ENDPOINTS.env_var]))
    assert table.switch_lane(world.tenant_id, world.endpoint_id, DeliveryLane.SLOW)


def slow_lane_check(world: World) -> str:
    outcome = delivery_check(world)
    tails = boto3.resource("dynamodb").Table(world.platform.env[schema.SLOW_TAILS.env_var]).scan()["Items"]
    assert not [t for t in tails if t["group_id"].startswith(f"{world.endpoint_id}#")], tails  # the group's settled
    return outcome


def with_a_last_attempt_due(world: World) -> None:
    """A delivery with two hard failures (404) recorded: its third attempt is its last, whatever it answers."""
    fresh_tenant(world, Reply(404))
    seeded = make(world.tenant_id, world.endpoint_id, utcnow() - timedelta(minutes=5), DeliveryStatus.RETRYING)
    failed = [
        Attempt(
            number=n,
            started_at=utcnow() - timedelta(minutes=5 - n),
            latency_ms=5,
            status_code=404,
            outcome=Outcome.RETRY_LIMITED,
        )
        for n in (1, 2)
    ]
    delivery = replace(
        seeded.delivery,
        attempts=failed,
        attempt_count=2,
        first_attempt_at=failed[0].started_at,
        next_attempt_at=utcnow() - timedelta(seconds=1),
        completed_at=None,
        expires_at=None,
    )
    store([type(seeded)(seeded.event, delivery)])
    message = {"delivery_id": delivery.id, "tenant_id": world.tenant_id, "attempt": 3, "endpoint_id": world.endpoint_id}
    world.sqs.send_message(
        QueueUrl=world.url(schema.DELIVERY_QUEUE),
        MessageBody=json.dumps(message),
        MessageGroupId=delivery.id,
        MessageDeduplicationId=f"{delivery.id}-3",
    )
    world.scratch["event_id"] = seeded.event.id


def delivery_act(world: World) -> None:
    run_queue(world, schema.DELIVERY_QUEUE, "delivery")


def delivery_check(world: World) -> str:
    [delivery] = check_settled(world)
    times = sent(world, world.scratch["event_id"])
    if delivery.status is DeliveryStatus.DEAD:
        assert delivery.dead_reason is DeadReason.EXHAUSTED and delivery.attempt_count == 3
    else:
        assert delivery.status is DeliveryStatus.DELIVERED
    if times == 1:
        return f"{delivery.status.value}, sent once"
    # At least once, documented: the worker died after sending and before recording; the attempt is made again.
    assert times == 2 and world.hook.crashed is not None and len(delivery.attempts) == delivery.attempt_count
    return f"{delivery.status.value}, sent twice (died after sending: at-least-once, documented)"


# A replay delivered marks its dead original recovered: the replay's record, then the original's mark.


def with_a_replay_of_a_dead_delivery_queued(world: World) -> None:
    with_dead_deliveries(world)
    original = world.scratch["dead"][0]
    answer = world.platform.call("POST", f"/v1/deliveries/{original.delivery.id}/replay", world.token)
    assert answer.status == 202, answer.body
    world.scratch["original"], world.scratch["replay"] = original, answer.json()["delivery_id"]


def recovery_mark_check(world: World) -> str:
    check_settled(world)
    original = world.scratch["original"]
    replay = wiring.delivery_table().get(world.scratch["replay"])
    marked = wiring.delivery_table().get(original.delivery.id)
    assert replay.status is DeliveryStatus.DELIVERED, replay
    assert marked.status is DeliveryStatus.DEAD and marked.recovered_by == replay.id, marked
    unrecovered = world.platform.call("GET", "/v1/deliveries?status=dead&recovered=false", world.token).json()["data"]
    assert [d["id"] for d in unrecovered] == [world.scratch["dead"][1].delivery.id]
    times = sent(world, original.event.id)
    if times == 1:
        return "replay delivered, sent once; original dead, recovered by it"
    # At least once, documented: the worker died after sending and before recording; the attempt is made again.
    assert times == 2 and world.hook.crashed is not None
    return "replay delivered, sent twice (died after sending: at-least-once, documented); original recovered by it"


# The sweeper's notices: publish, then record.


def with_a_failing_endpoint(world: World) -> None:
    fresh_tenant(world)
    endpoints = EndpointTable(boto3.resource("dynamodb").Table(world.platform.env[schema.ENDPOINTS.env_var]))
    assert endpoints.mark_failing(world.tenant_id, world.endpoint_id, utcnow() - timedelta(days=1, hours=2))


def sweep_act(world: World) -> None:
    invoke("sweeper", scheduled_event("hookrelay-sweeper"))


def sweep_recover(world: World) -> None:
    sweep_act(world)  # the next hourly sweep


def notices_of(world: World) -> list[dict[str, Any]]:
    found = []
    while messages := world.sqs.receive_message(
        QueueUrl=world.notices_queue, MaxNumberOfMessages=schema.SQS_MAX_BATCH
    ).get("Messages"):
        for message in messages:
            world.sqs.delete_message(QueueUrl=world.notices_queue, ReceiptHandle=message["ReceiptHandle"])
            body = json.loads(message["Body"])
            found.append(json.loads(body.get("Message", message["Body"])) if "Message" in body else body)
    world.scratch.setdefault("notices", []).extend(found)
    return [n for n in world.scratch["notices"] if n.get("endpoint_id") == world.endpoint_id]


def sweep_check(world: World) -> str:
    notices = notices_of(world)
    stored = wiring.endpoint_service().endpoints.get(world.tenant_id, world.endpoint_id)
    assert stored.failure_notice is not None and stored.failure_notice.value == "failing_1d"
    assert [n["kind"] for n in notices] in (["failing_1d"], ["failing_1d", "failing_1d"]), notices
    assert len({n["notice_id"] for n in notices}) == 1
    if len(notices) == 1:
        return "notice sent once"
    return "notice sent twice, same notice_id (died after publishing: at-least-once, documented)"


# The sweeper's notice as an operational webhook: emitted (event, delivery, message), published, then recorded.


def with_a_failing_endpoint_and_an_ops_endpoint(world: World) -> None:
    with_a_failing_endpoint(world)
    ops = world.platform.new_endpoint(world.token, world.consumer.url + "/ops", ["hookrelay.endpoint.*"])
    world.scratch["ops"] = ops["id"]


def sweep_and_settle(world: World) -> None:
    sweep_recover(world)
    settle(world)


def operational_webhook_check(world: World) -> str:
    outcome = sweep_check(world)
    check_settled(world)
    ops = [d for d in tenant_deliveries(world) if d.endpoint_id == world.scratch["ops"]]
    [delivery] = ops  # one delivery of the notice, whatever the crash point
    assert delivery.event_type == "hookrelay.endpoint.failing" and delivery.status is DeliveryStatus.DELIVERED
    assert sent(world, delivery.event_id) == 1
    assert all(not r.path.endswith("/hook") or b"hookrelay." not in r.body for r in world.consumer.received)
    return f"{outcome}; one webhook to the ops endpoint, sent once"


# The reconciler surfacing a lost attempt and a poison message as dead deliveries.


def with_dead_letters_waiting(world: World) -> None:
    fresh_tenant(world)
    lost = make(world.tenant_id, world.endpoint_id, utcnow() - timedelta(hours=1), DeliveryStatus.RETRYING)
    poisoned = make(world.tenant_id, world.endpoint_id, utcnow() - timedelta(hours=1, minutes=1), DeliveryStatus.QUEUED)
    store([lost, poisoned])
    letter = {"reason": "attempt_lost", "delivery_id": lost.delivery.id, "tenant_id": world.tenant_id, "attempt": 2}
    world.sqs.send_message(QueueUrl=world.url(schema.DEAD_LETTER_QUEUE), MessageBody=json.dumps(letter))
    body = {"delivery_id": poisoned.delivery.id, "tenant_id": world.tenant_id, "attempt": 1}
    world.sqs.send_message(
        QueueUrl=world.url(schema.POISON_QUEUE),
        MessageBody=json.dumps(body),
        MessageGroupId=poisoned.delivery.message_group_id,
        MessageDeduplicationId=poisoned.delivery.id,
    )
    world.scratch["expected"] = {lost.delivery.id: DeadReason.ATTEMPT_LOST, poisoned.delivery.id: DeadReason.POISON}


def surface_act(world: World) -> None:
    reconcile(world)


def surface_check(world: World) -> str:
    deliveries = {d.id: d for d in check_settled(world)}
    for delivery_id, reason in world.scratch["expected"].items():
        assert deliveries[delivery_id].status is DeliveryStatus.DEAD and deliveries[delivery_id].dead_reason is reason
    assert world.consumer.received == []  # surfacing sends nothing: the tenant (or the operator) redrives
    return "both dead with their reason, recorded once; queues empty"


# The retry workflow: a first attempt fails, its retry execution is started and sends the second, which succeeds.


def with_a_failure_to_come(world: World) -> None:
    fresh_tenant(world)
    world.consumer.queue([Reply(503)])  # the first attempt fails; everything after succeeds
    publish(world, 1)


def publish(world: World, count: int) -> list[str]:
    """Events accepted (ingest is not the path under test: its calls are not counted) and their first messages."""
    event_ids = world.scratch.setdefault("event_ids", [])
    for _ in range(count):
        body = {"tenant_id": world.tenant_id, "type": "a.b", "data": {"n": len(event_ids)}}
        answer = world.platform.call("POST", "/v1/events", world.producer, body)
        assert answer.status == 202, answer.body
        event_ids.append(answer.json()["event_id"])
    return list(event_ids[-count:])


def retry_act(world: World) -> None:
    drive(world)


def successes(world: World, event_id: str) -> int:
    answered = zip(world.consumer.received, world.consumer.answers, strict=True)
    return sum(1 for request, status in answered if request.headers.get("webhook-id") == event_id and status == 200)


def all_delivered_check(world: World) -> str:
    """Every event delivered; once each, or twice where the worker died after sending (at-least-once, documented)."""
    deliveries = check_settled(world)
    assert deliveries and all(d.status is DeliveryStatus.DELIVERED for d in deliveries), [
        (d.id, d.status) for d in deliveries
    ]
    counts = [successes(world, event_id) for event_id in world.scratch["event_ids"]]
    assert all(n in (1, 2) for n in counts), counts
    endpoint = wiring.endpoint_service().endpoints.get(world.tenant_id, world.endpoint_id)
    assert endpoint is not None and endpoint.circuit is CircuitState.CLOSED, endpoint
    assert wiring.circuit_service().parking.lot.count(world.endpoint_id, 1).counted == 0  # nothing left parked
    if all(n == 1 for n in counts):
        return f"{len(deliveries)} delivered, each sent through once"
    assert world.hook.crashed is not None
    return f"{len(deliveries)} delivered; one sent through twice (died after sending: at-least-once, documented)"


# The circuit: opening it, parking behind it, its probe, and the ordered drain after a probe gets through.


def with_failures_about_to_open_the_circuit(world: World) -> None:
    """One failure short of opening: those failed deliveries wait in their retry workflows; one more event is due."""
    fresh_tenant(world, Reply(503))
    publish(world, OPEN_AFTER_FAILURES - 1)
    run_queue(world, schema.DELIVERY_QUEUE, "delivery")
    world.sim.step()
    assert [e.kind for e in world.sim.active()] == ["retry"] * (OPEN_AFTER_FAILURES - 1)
    publish(world, 1)


def open_circuit(world: World) -> None:
    with_failures_about_to_open_the_circuit(world)
    drive_until_parked(world)
    world.consumer.default = Reply(200)  # the endpoint is back: the next probe gets through


def drive_until_parked(world: World) -> None:
    run_queue(world, schema.DELIVERY_QUEUE, "delivery")
    world.sim.step()
    endpoint = wiring.endpoint_service().endpoints.get(world.tenant_id, world.endpoint_id)
    assert endpoint is not None and endpoint.circuit is CircuitState.OPEN, endpoint
    assert [e.kind for e in world.sim.active()] == ["circuit"]  # the retry workflows were stopped as they parked


def with_an_open_circuit_and_a_queued_event(world: World) -> None:
    """An event accepted just before the circuit opened: its message is queued, for the delivery function to park."""
    open_circuit(world)
    with as_function("ingest"):
        ingest = wiring.ingest_service()
    parking, ingest.parking = ingest.parking, None  # ingest read the circuit closed
    try:
        publish(world, 1)
    finally:
        ingest.parking = parking


def park_on_arrival_act(world: World) -> None:
    """An event accepted while the circuit is open: ingest parks its delivery (the path under test)."""
    ingest_act(world)


def park_on_arrival_recover(world: World) -> None:
    ingest_recover(world)
    circuit_recover(world)


def park_on_arrival_check(world: World) -> str:
    world.scratch["event_ids"].append(world.scratch["accepted"]["event_id"])
    return all_delivered_check(world)


def opening_act(world: World) -> None:
    run_queue(world, schema.DELIVERY_QUEUE, "delivery")


def circuit_recover(world: World) -> None:
    world.consumer.default = Reply(200)
    time_passes(world)
    settle(world)


def with_a_probe_due(world: World) -> None:
    """The probe workflow's first command, sent: probe the oldest parked delivery (the endpoint is back)."""
    open_circuit(world)
    due = world.sim.next_due()
    assert due is not None
    world.sim.advance(due)
    assert world.sim.step()


def probe_act(world: World) -> None:
    run_queue(world, schema.DELIVERY_QUEUE, "delivery")


def with_a_drain_due(world: World) -> None:
    """The probe got through: the workflow's next command, the first drain, is sent."""
    with_a_probe_due(world)
    probe_act(world)
    assert world.sim.step()
    endpoint = wiring.endpoint_service().endpoints.get(world.tenant_id, world.endpoint_id)
    assert endpoint is not None and endpoint.circuit is CircuitState.DRAINING, endpoint


def drain_act(world: World) -> None:
    drive(world)


DELIVERY = frozenset({"delivery"})
PATHS = (
    Path("ingest", frozenset({"ingest"}), fresh_tenant, ingest_act, ingest_recover, ingest_check),
    Path("replay", frozenset({"api"}), with_a_delivered_event, replay_act, api_recover, new_deliveries_check),
    Path("test event", frozenset({"api"}), fresh_tenant, send_test_event, api_recover, new_deliveries_check),
    Path("redrive", frozenset({"api", "redrive"}), with_dead_deliveries, redrive_act, redrive_recover, redrive_check),
    Path("delivery", frozenset({"delivery"}), with_a_queued_event, delivery_act, api_recover, delivery_check),
    Path("dead letter", frozenset({"delivery"}), with_a_last_attempt_due, delivery_act, api_recover, delivery_check),
    Path(
        "slow lane",
        frozenset({"delivery"}),
        with_a_queued_event_for_a_slow_endpoint,
        delivery_act,
        api_recover,
        slow_lane_check,
    ),
    Path(
        "recovery mark",
        DELIVERY,
        with_a_replay_of_a_dead_delivery_queued,
        delivery_act,
        api_recover,
        recovery_mark_check,
    ),
    Path("sweeper notice", frozenset({"sweeper"}), with_a_failing_endpoint, sweep_act, sweep_recover, sweep_check),
    Path(
        "operational webhook",
        frozenset({"sweeper"}),
        with_a_failing_endpoint_and_an_ops_endpoint,
        sweep_act,
        sweep_and_settle,
        operational_webhook_check,
    ),
    Path("surfacing", frozenset({"reconciler"}), with_dead_letters_waiting, surface_act, api_recover, surface_check),
    Path("retry hand-over", DELIVERY, with_a_failure_to_come, retry_act, api_recover, all_delivered_check, True),
    Path(
        "circuit opening",
        DELIVERY,
        with_failures_about_to_open_the_circuit,
        opening_act,
        circuit_recover,
        all_delivered_check,
        True,
    ),
    Path(
        "parking",
        DELIVERY,
        with_an_open_circuit_and_a_queued_event,
        opening_act,
        circuit_recover,
        all_delivered_check,
        True,
    ),
    Path(
        "parking on arrival",
        frozenset({"ingest"}),
        open_circuit,
        park_on_arrival_act,
        park_on_arrival_recover,
        park_on_arrival_check,
    ),
    Path("probe", DELIVERY, with_a_probe_due, probe_act, circuit_recover, all_delivered_check, True),
    Path("drain", DELIVERY, with_a_drain_due, drain_act, circuit_recover, all_delivered_check, True),
)


@pytest.fixture
def world(consumer: ScriptedConsumer, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    # A received dead letter is hidden for its visibility timeout; here that timeout "passes" at once.
    monkeypatch.setattr(redrive_sqs, "DRAIN_VISIBILITY_SECONDS", 0)
    monkeypatch.setenv(schema.ENDPOINT_HEALTH_DAY_SECONDS, "86400")
    with moto_stack(execute_state_machine=False, retry_schedule=SCHEDULE) as env, injector() as hook:
        for command in (publish_once, start_redrive_once):  # built with a client from before the injector
            command.__dict__.pop("_once", None)
        admin = create_admin_key(env["API_KEYS_TABLE"])
        platform = Platform(env=env, admin_token=admin.token)
        sqs = boto3.client("sqs")
        notices_queue = sqs.create_queue(QueueName="notices-copy")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=notices_queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        boto3.client("sns").subscribe(
            TopicArn=env[schema.ENDPOINT_NOTICES_TOPIC.env_var],
            Protocol="sqs",
            Endpoint=arn,
            Attributes={"RawMessageDelivery": "true"},
        )
        sim = WorkflowSim(
            env[RETRY_STATE_MACHINE_ARN], delivery_queue_urls(env).url(0), env[schema.DEAD_LETTER_QUEUE.env_var]
        )
        sim.install()  # after the injector: a call it crashes is never an answer
        yield World(platform, consumer, hook, sim, platform.new_key("producer"), notices_queue)
        sim.uninstall()
        for command in (publish_once, start_redrive_once):
            command.__dict__.pop("_once", None)


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
def test_every_crash_point_ends_delivered_dead_or_cancelled(world: World, path: Path) -> None:
    path.setup(world)
    world.hook.arm(path.functions, None)
    path.act(world)
    world.hook.disarm()
    calls = list(world.hook.calls)
    points = list(world.hook.points)
    path.recover(world)
    MATRIX.append(Row(path.name, "-", path.check(world)))
    assert calls, f"{path.name} made no AWS call"

    for number, label in enumerate(calls):
        if path.each_site_once and points[number].nth > 1:
            continue
        path.setup(world)
        world.hook.arm(path.functions, points[number])  # wherever it falls in this run
        try:
            path.act(world)
        except (Crash, AssertionError):
            pass  # the process died (the API answered 5xx, or the message stays in its queue)
        world.hook.disarm()
        assert world.hook.crashed is not None, f"{path.name}: call {number} ({label}) was not reached"
        path.recover(world)
        MATRIX.append(Row(path.name, f"#{number} {world.hook.crashed}", path.check(world)))
        start_afresh(world)

    # Throttled past botocore's retries, at the first call of each kind: what the code does with the error itself.
    for number, label in enumerate(calls):
        if unsharded(label) in map(unsharded, calls[:number]):
            continue
        path.setup(world)
        world.hook.arm(path.functions, label, mode="throttle")  # the first call so labelled, wherever it falls
        with contextlib.suppress(Crash, Exception):
            # The API answered 5xx, a scheduled run failed (the next one comes), or a message went back.
            path.act(world)
        world.hook.disarm()
        assert world.hook.crashed is not None, f"{path.name}: call {number} ({label}) was not reached"
        assert world.hook.throttled_tries == MAX_ATTEMPTS and len(world.hook.backoffs) == MAX_ATTEMPTS - 1, label
        path.recover(world)
        point = f"#{number} {label} throttled {MAX_ATTEMPTS}x"
        MATRIX.append(Row(path.name, point, path.check(world), kind="throttle"))
        start_afresh(world)


def start_afresh(world: World) -> None:
    wiring.reset()  # the clients' retry quotas, the clocks moved on by `time_passes`
    world.platform.forget_checkpoints()  # moved on with them
    for command in (publish_once, start_redrive_once):
        command.__dict__.pop("_once", None)
