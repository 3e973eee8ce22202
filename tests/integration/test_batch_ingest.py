"""POST /v1/events/batch through API Gateway's shape on moto: per-event results in order, idempotent retries,
order per ordering key, the whole request's refusals, how few AWS calls a batch makes, and every crash point of
its write sequence followed by the producer's retry and the reconciler."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest

from hookrelay import wiring
from hookrelay.adapters import schema
from hookrelay.adapters.dynamodb import EndpointTable
from hookrelay.domain.clock import utcnow
from hookrelay.domain.queues import DeliveryLane
from hookrelay.domain.status import DeliveryStatus
from hookrelay.handlers.publish_schemas import MAX_BATCH_EVENTS
from hookrelay.services.reconcile import RECONCILE_GRACE
from local.lambda_runtime import invoke
from local.schedule import scheduled_event
from tests.support.aws import as_function
from tests.support.consumer import ScriptedConsumer
from tests.support.crash import MATRIX, Crash, CrashInjector, Row, injector
from tests.support.platform import Platform
from tests.support.records import stored_deliveries

BATCH = "/v1/events/batch"


@pytest.fixture
def setup(platform: Platform, consumer: ScriptedConsumer) -> tuple[Platform, str, str, str]:
    tenant_id, tenant_token = platform.new_tenant()
    producer = platform.new_key("producer")
    platform.new_endpoint(tenant_token, consumer.url)
    return platform, tenant_id, tenant_token, producer


def endpoint_queue(platform: Platform, tenant_id: str) -> str:
    """The fast lane of the tenant's one endpoint's shard, as the crash injector names a queue in its calls."""
    endpoints = boto3.resource("dynamodb").Table(platform.env[schema.ENDPOINTS.env_var])
    [endpoint] = EndpointTable(endpoints).list_for_tenant(tenant_id)
    return schema.delivery_queue(endpoint.queue_shard, DeliveryLane.FAST).logical_name + ".fifo"


CATALOGUE_READ = "DynamoDB.GetItem [EventTypes]"


def events(n: int, **fields: Any) -> list[dict[str, Any]]:
    return [{"type": "order.updated", "data": {"n": i}, **fields} for i in range(n)]


def publish(platform: Platform, producer: str, tenant_id: str, items: list[Any]) -> dict[str, Any]:
    answer = platform.call("POST", BATCH, producer, {"tenant_id": tenant_id, "events": items})
    assert answer.status == 200, answer.body
    assert answer.headers["content-type"] == "application/json"
    return answer.json()


def problem(response: Any, status: int) -> dict[str, Any]:
    assert response.status == status, response.body
    assert response.headers["content-type"] == "application/problem+json"
    return response.json()


def received_events(consumer: ScriptedConsumer) -> list[dict[str, Any]]:
    return [json.loads(r.body) for r in consumer.received]


def test_a_batch_of_ten_with_one_bad_event_delivers_nine_and_refuses_one_in_its_place(
    setup, consumer: ScriptedConsumer
) -> None:
    platform, tenant_id, _, producer = setup
    items = events(10)
    items[4] = {"type": "order.updated", "data": ["not", "an", "object"]}
    answer = publish(platform, producer, tenant_id, items)

    assert (answer["accepted"], answer["refused"]) == (9, 1)
    results = answer["results"]
    assert [r["status"] for r in results] == [202] * 4 + [422] + [202] * 5
    refused = results[4]
    assert refused["type"].endswith("/validation") and refused["title"]
    assert [e["field"] for e in refused["errors"]] == ["events.4.data"]
    assert platform.pump() == 9
    delivered = received_events(consumer)
    assert sorted(e["data"]["n"] for e in delivered) == [0, 1, 2, 3, 5, 6, 7, 8, 9]
    assert {e["id"] for e in delivered} == {r["event_id"] for r in results if r["status"] == 202}


def test_a_retried_batch_with_keys_answers_the_same_ids_and_delivers_each_event_once(
    setup, consumer: ScriptedConsumer
) -> None:
    platform, tenant_id, _, producer = setup
    items = [item | {"idempotency_key": f"order-{i}"} for i, item in enumerate(events(10))]
    first = publish(platform, producer, tenant_id, items)
    again = publish(platform, producer, tenant_id, items)

    ids = [(r["event_id"], r["delivery_ids"]) for r in first["results"]]
    assert [(r["event_id"], r["delivery_ids"]) for r in again["results"]] == ids
    assert [r["duplicate"] for r in first["results"]] == [False] * 10
    assert [r["duplicate"] for r in again["results"]] == [True] * 10
    platform.pump()
    assert Counter(e["id"] for e in received_events(consumer)) == Counter({event_id: 1 for event_id, _ in ids})
    deliveries = stored_deliveries(boto3.resource("dynamodb").Table(platform.env[schema.DELIVERIES.env_var]))
    assert len(deliveries) == 10


def test_a_key_reused_for_another_event_or_twice_in_a_batch_is_refused_in_place(setup) -> None:
    platform, tenant_id, _, producer = setup
    publish(platform, producer, tenant_id, [{"type": "a", "data": {"v": 1}, "idempotency_key": "k"}])
    answer = publish(
        platform,
        producer,
        tenant_id,
        [
            {"type": "a", "data": {"v": 2}, "idempotency_key": "k"},  # another event under a used key
            {"type": "a", "data": {}, "idempotency_key": "fresh"},
            {"type": "a", "data": {}, "idempotency_key": "fresh"},  # twice in one batch
        ],
    )
    statuses = [(r["status"], r["type"].rsplit("/", 1)[-1] if r["status"] != 202 else "") for r in answer["results"]]
    assert statuses == [(422, "idempotency-mismatch"), (202, ""), (422, "idempotency-mismatch")]


def test_keys_are_scoped_to_the_calling_api_key(setup) -> None:
    platform, tenant_id, _, producer = setup
    item = [{"type": "a", "data": {}, "idempotency_key": "same"}]
    first = publish(platform, producer, tenant_id, item)["results"][0]
    second = publish(platform, platform.new_key("producer"), tenant_id, item)["results"][0]
    assert first["event_id"] != second["event_id"] and not second["duplicate"]


def test_order_is_kept_per_ordering_key_across_and_within_batches(setup, consumer: ScriptedConsumer) -> None:
    platform, tenant_id, _, producer = setup
    keys = ["a", "b", "a", "a", "b", "a"]
    first = publish(
        platform, producer, tenant_id, [{"type": "t", "data": {"i": i}, "ordering_key": k} for i, k in enumerate(keys)]
    )
    second = publish(platform, producer, tenant_id, [{"type": "t", "data": {"i": 6}, "ordering_key": "a"}])
    assert [r["sequence"] for r in first["results"]] == [1, 1, 2, 3, 2, 4]
    assert second["results"][0]["sequence"] == 5
    platform.pump()
    delivered = received_events(consumer)
    by_key: dict[str, list[tuple[int, int]]] = {}
    for envelope in delivered:  # in the order the consumer received them
        by_key.setdefault(envelope["ordering_key"], []).append((envelope["sequence"], envelope["data"]["i"]))
    assert by_key == {"a": [(1, 0), (2, 2), (3, 3), (4, 5), (5, 6)], "b": [(1, 1), (2, 4)]}


def test_an_event_over_256_kib_is_refused_in_its_place(setup) -> None:
    platform, tenant_id, _, producer = setup
    big = {"type": "blob", "data": {"x": "a" * (256 * 1024)}}
    answer = publish(platform, producer, tenant_id, [events(1)[0], big, events(1)[0]])
    assert [r["status"] for r in answer["results"]] == [202, 413, 202]
    assert answer["results"][1]["type"].endswith("/too-large")


@pytest.mark.parametrize(
    ("body", "status"),
    [
        pytest.param(b'{"tenant_id": ', 400, id="malformed-json"),
        pytest.param({"tenant_id": "TENANT", "events": []}, 422, id="no-events"),
        pytest.param({"tenant_id": "TENANT", "events": events(MAX_BATCH_EVENTS + 1)}, 422, id="101-events"),
        pytest.param({"tenant_id": "ten_nope", "events": events(1)}, 422, id="unknown-tenant"),
        pytest.param({"events": events(1)}, 422, id="no-tenant"),
        pytest.param({"tenant_id": "TENANT", "events": events(1), "surprise": 1}, 422, id="unknown-field"),
        pytest.param(
            {"tenant_id": "TENANT", "events": [{"type": "t", "data": {"x": "a" * 200_000}}] * 6}, 413, id="over-1-mib"
        ),
    ],
)
def test_only_a_request_that_is_no_batch_is_refused_whole(setup, body: Any, status: int) -> None:
    platform, tenant_id, _, producer = setup
    if isinstance(body, dict) and body.get("tenant_id") == "TENANT":
        body = body | {"tenant_id": tenant_id}
    problem(platform.call("POST", BATCH, producer, body), status)
    assert platform.pump() == 0


def test_an_idempotency_key_header_is_refused_not_ignored(setup) -> None:
    platform, tenant_id, _, producer = setup
    body = {"tenant_id": tenant_id, "events": events(1)}
    refused = problem(platform.call("POST", BATCH, producer, body, {"idempotency-key": "whole-batch"}), 400)
    assert "idempotency_key" in refused["detail"]
    assert platform.pump() == 0


def test_a_full_batch_of_100_is_accepted(setup) -> None:
    platform, tenant_id, _, producer = setup
    answer = publish(platform, producer, tenant_id, events(MAX_BATCH_EVENTS))
    assert answer["accepted"] == MAX_BATCH_EVENTS
    assert platform.queued_deliveries() == MAX_BATCH_EVENTS


def test_only_producer_keys_may_publish_a_batch(setup) -> None:
    platform, tenant_id, tenant_token, _ = setup
    problem(platform.call("POST", BATCH, tenant_token, {"tenant_id": tenant_id, "events": events(1)}), 403)


# --- How few AWS calls a batch makes (the calls of the ingest function, in order) ---


@pytest.fixture
def hook(setup) -> Iterator[CrashInjector]:
    with injector() as installed:
        yield installed


def calls_of(hook: CrashInjector, platform: Platform, producer: str, tenant_id: str, items: list[Any]) -> list[str]:
    hook.arm(frozenset({"ingest"}), None)
    publish(platform, producer, tenant_id, items)
    hook.disarm()
    # The catalogue's read of each type (cached a minute per container, so made or not as the cache stands) is
    # the one read the catalogue adds, the same for a batch as for one event: left out here.
    return [call.removeprefix("ingest: ") for call in hook.calls if call != f"ingest: {CATALOGUE_READ}"]


def test_a_batch_of_ten_reads_once_and_writes_and_sends_in_batches(setup, hook: CrashInjector) -> None:
    platform, tenant_id, _, producer = setup
    calls = calls_of(hook, platform, producer, tenant_id, events(10))
    assert calls == [
        "DynamoDB.GetItem [Tenants]",
        "DynamoDB.Query [Endpoints]",
        # The ten events, each its deliveries' log entry (adapters/event_log.py), and what their deliveries, queued
        # as ingest made them, are read from until their first write (their settle) stores them: nothing more.
        "DynamoDB.BatchWriteItem [EventLog]",
        f"SQS.SendMessageBatch [{endpoint_queue(platform, tenant_id)}]",
    ]


def test_keyed_events_are_conditional_puts_and_one_sequence_write_per_ordering_key(setup, hook: CrashInjector) -> None:
    platform, tenant_id, _, producer = setup
    items = [item | {"idempotency_key": f"k{i}", "ordering_key": "o"} for i, item in enumerate(events(10))]
    calls = calls_of(hook, platform, producer, tenant_id, items)
    assert Counter(calls) == Counter(
        {
            "DynamoDB.GetItem [Tenants]": 1,
            "DynamoDB.Query [Endpoints]": 1,
            "DynamoDB.UpdateItem [Events]": 1,  # the ordering key's counter, drawn ten at once
            "DynamoDB.PutItem [Events]": 10,  # each conditional on its key's event being new
            "DynamoDB.BatchWriteItem [Deliveries]": 2,  # the log page listing the ten, then the ten
            f"SQS.SendMessageBatch [{endpoint_queue(platform, tenant_id)}]": 1,
        }
    )


# --- Crash points: the process dies at each AWS call of a batch, then what the world does next ---

LATER = timedelta(minutes=7)  # past the writer window (the reconciler's grace) and a stale claim


def time_passes(later: Any) -> None:
    with as_function("ingest"):
        wiring.ingest_service().clock = lambda: later
    with as_function("delivery"):
        wiring.delivery_service().clock = lambda: later
    with as_function("reconciler"):
        wiring.reconciler().clock = lambda: later


def settle(platform: Platform) -> None:
    for _ in range(2):
        platform.pump()
        invoke("reconciler", scheduled_event("hookrelay-reconciler"))
    platform.pump()


def deliveries_of(platform: Platform, tenant_id: str) -> list[dict[str, Any]]:
    items = stored_deliveries(boto3.resource("dynamodb").Table(platform.env[schema.DELIVERIES.env_var]))
    return [item for item in items if item["tenant_id"] == tenant_id]


def crash_case(platform: Platform, hook: CrashInjector, consumer: ScriptedConsumer, number: int | None) -> Row:
    """A fresh tenant; a batch of three keyed events and one without a key, crashed at call `number`; the
    producer retries the whole batch once the writer window has passed; the reconciler and the delivery function
    run. What the producer was told, and what was delivered, must agree."""
    platform.forget_checkpoints()  # an earlier case moved the reconciler's clock minutes on
    tenant_id, token = platform.new_tenant(f"crash-{number}")
    platform.new_endpoint(token, consumer.url)
    producer = platform.new_key("producer")
    items = [{"type": "t", "data": {"tenant": tenant_id, "i": i}, "idempotency_key": f"k{i}"} for i in range(3)]
    items.append({"type": "t", "data": {"tenant": tenant_id, "i": 3}})
    hook.arm(frozenset({"ingest"}), number)
    try:
        first = platform.call("POST", BATCH, producer, {"tenant_id": tenant_id, "events": items})
    except Crash:
        first = None
    hook.disarm()
    assert number is None or hook.crashed is not None, f"call {number} was not reached"
    label = hook.crashed or "-"
    if first is not None:
        assert first.status == 200, first.body
        answer = first.json()
    else:
        time_passes(utcnow() + LATER)
        answer = publish(platform, producer, tenant_id, items)
    settle(platform)
    wiring.reset()
    results = answer["results"]
    assert [r["status"] for r in results] == [202] * 4, results
    delivered = Counter(
        json.loads(r.body)["id"] for r in consumer.received if json.loads(r.body)["data"]["tenant"] == tenant_id
    )
    for result in results[:3]:  # keyed: one event each, whatever the crash, delivered once
        assert delivered[result["event_id"]] == 1, (label, result)
    assert delivered[results[3]["event_id"]] == 1, label  # the retry's own event without a key
    # A crash after the first run stored (and perhaps delivered) the unkeyed event makes a second event of it on
    # the retry, as a retry without a key always does; nothing is left unsettled either way.
    statuses = {item["status"] for item in deliveries_of(platform, tenant_id)}
    assert statuses == {DeliveryStatus.DELIVERED.value}, (label, statuses)
    unkeyed = len(delivered) - 3
    outcome = "answered 200" if first is not None else "5xx; the retry converged"
    outcome += f": 3 keyed events delivered once each, the unkeyed one as {unkeyed} event{'s' * (unkeyed > 1)}"
    return Row("ingest batch", "-" if number is None else f"#{number} {label}", outcome)


def test_every_crash_point_of_a_batch_converges_on_the_producers_retry(
    setup, hook: CrashInjector, consumer: ScriptedConsumer
) -> None:
    platform = setup[0]
    MATRIX.append(crash_case(platform, hook, consumer, None))
    calls = list(hook.calls)
    # tenant, endpoints, the unkeyed events' batch, 3 keyed puts, the log page (adapters/log_pages.py: a crash
    # right after it leaves rows with no delivery), deliveries, messages; and the catalogue's read of each type
    # when the container's cache has none
    assert len([call for call in calls if not call.endswith(CATALOGUE_READ)]) == 9
    for number in range(len(calls)):
        MATRIX.append(crash_case(platform, hook, consumer, number))


def test_a_retry_while_the_crashed_writer_may_be_alive_is_409_for_its_events_only(setup, hook: CrashInjector) -> None:
    platform, tenant_id, _, producer = setup
    items = [{"type": "t", "data": {"i": i}, "idempotency_key": f"k{i}"} for i in range(2)]
    # Calls: tenant, endpoints, the events' puts, then the deliveries' batch write: die there.
    hook.arm(frozenset({"ingest"}), "ingest: DynamoDB.BatchWriteItem [Deliveries]")
    with pytest.raises(Crash):
        platform.call("POST", BATCH, producer, {"tenant_id": tenant_id, "events": items})
    hook.disarm()
    assert hook.crashed == "ingest: DynamoDB.BatchWriteItem [Deliveries]"
    soon = publish(platform, producer, tenant_id, [*items, {"type": "t", "data": {}}])
    assert [r["status"] for r in soon["results"]] == [409, 409, 202]
    assert soon["results"][0]["type"].endswith("/idempotency-in-flight")
    # When its retry can succeed: once the crashed writer's window is over (services/ingest.py), not in a moment.
    assert 0 < soon["results"][0]["retry_after"] <= RECONCILE_GRACE.total_seconds()
    time_passes(utcnow() + LATER)
    later = publish(platform, producer, tenant_id, items)
    assert [(r["status"], r["duplicate"]) for r in later["results"]] == [(202, True), (202, True)]
