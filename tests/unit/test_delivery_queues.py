"""The delivery queues' shards and lanes: the stable hash, the assignment at creation, the queue specs, the one
variable of URLs, and the adapter's routing of each message to its (shard, lane) queue."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from hookrelay.adapters import schema
from hookrelay.adapters.schema import DeliveryQueueUrls
from hookrelay.adapters.sqs import SqsDeliveryQueue
from hookrelay.adapters.stepfunctions import command_document, parse_command, ticket_document
from hookrelay.domain.lifecycle import queued_delivery
from hookrelay.domain.queues import (
    DEFAULT_DELIVERY_SHARDS,
    MAX_DELIVERY_SHARDS,
    DeliveryLane,
    check_shards,
    shard_for,
)
from hookrelay.functions import DELIVERY, REDRIVE, event_sources, queue_trigger
from hookrelay.services.endpoints import EndpointService
from hookrelay.services.ports import (
    CircuitCommand,
    CircuitCommandKind,
    DeliveryMessage,
    RetryTicket,
    first_attempt_message,
)
from tests.support.delivery_world import ERROR_500, make_world
from tests.support.fakes import ConditionalEndpoints, NoDeliveries, nothing_parked

# --- shard_for: stable and uniform enough ---


def test_the_shard_of_an_id_is_pinned_so_every_process_and_version_agrees() -> None:
    # CRC-32 values, pinned: a change of hash would move every endpoint created afterwards differently from the
    # ones before, which is harmless, but a hash that differed between processes would not be (Python's `hash`).
    assert [shard_for("ep_01J9ZQ3V5X", n) for n in (1, 2, 3, 8)] == [0, 1, 1, 3]
    assert [shard_for(f"ep_{i}", 4) for i in range(8)] == [2, 0, 2, 0, 3, 1, 3, 1]


def test_the_shard_does_not_depend_on_pythons_per_process_hash_seed() -> None:
    code = "from hookrelay.domain.queues import shard_for; print([shard_for(f'ep_{i}', 5) for i in range(50)])"
    runs = {
        subprocess.run(  # noqa: S603 (our own fixed command)
            [sys.executable, "-c", code],
            env={"PYTHONHASHSEED": seed, "PYTHONPATH": "lambdas"},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(runs) == 1


@pytest.mark.parametrize("shards", [2, 3, 8])
def test_endpoints_spread_over_the_shards_evenly_enough(shards: int) -> None:
    # ULID-like ids share long prefixes: the hash must spread them anyway. Within 10% of even for 8,000 ids.
    counts = Counter(shard_for(f"ep_01J9ZQ3V5X{i:06d}", shards) for i in range(8000))
    assert sorted(counts) == list(range(shards))
    even = 8000 / shards
    assert all(abs(count - even) < even * 0.10 for count in counts.values()), counts


def test_there_is_at_least_one_shard_and_at_most_the_maximum() -> None:
    with pytest.raises(ValueError):
        shard_for("ep_1", 0)
    assert check_shards(1) == 1 and check_shards(MAX_DELIVERY_SHARDS) == MAX_DELIVERY_SHARDS
    for bad in (0, MAX_DELIVERY_SHARDS + 1, True, "2", 1.5):
        with pytest.raises(ValueError):
            check_shards(bad)  # type: ignore[arg-type]


# --- An endpoint's shard: chosen once, at creation, and copied onto its deliveries ---


def a_service(queue_shards: int) -> tuple[EndpointService, ConditionalEndpoints]:
    endpoints = ConditionalEndpoints()
    service = EndpointService(
        endpoints, deliveries=NoDeliveries(), parking=nothing_parked(endpoints), queue_shards=queue_shards
    )
    return service, endpoints


def test_an_endpoint_is_given_its_shard_by_the_hash_of_its_id_when_it_is_created_and_keeps_it() -> None:
    service, endpoints = a_service(queue_shards=8)
    created = [service.create("ten_1", url=f"https://example.com/{n}", event_types=["*"]) for n in range(40)]
    for endpoint in created:
        stored = endpoints.get("ten_1", endpoint.id)
        assert stored is not None and stored.queue_shard == endpoint.queue_shard == shard_for(endpoint.id, 8)
    assert len({endpoint.queue_shard for endpoint in created}) > 1  # not all on one shard

    # A later change of the endpoint keeps its shard, whatever the deployment's shards are now.
    service.queue_shards = 1
    moved = next(endpoint for endpoint in created if endpoint.queue_shard > 0)
    service.update("ten_1", moved.id, description="changed")
    stored = endpoints.get("ten_1", moved.id)
    assert stored is not None and stored.description == "changed" and stored.queue_shard == moved.queue_shard


def test_a_delivery_carries_its_endpoints_shard_into_its_first_message() -> None:
    world = make_world()
    stored = world.endpoints.get(world.delivery.tenant_id, world.delivery.endpoint_id)
    assert stored is not None
    endpoint = replace(stored, queue_shard=3)
    delivery = queued_delivery(world.event, endpoint, world.event.timestamp)
    assert delivery.queue_shard == 3
    message = first_attempt_message(delivery, world.event)
    assert (message.shard, message.lane) == (3, DeliveryLane.FAST)


def test_a_retry_ticket_carries_the_deliverys_shard() -> None:
    world = make_world()
    world.deliveries.items[world.delivery.id] = replace(world.delivery, queue_shard=1)
    world.script(ERROR_500)
    world.service.attempt(world.message(1))
    [ticket] = world.workflow.started
    assert ticket.shard == 1


def test_a_ticket_names_its_shards_fast_lane_and_a_command_its_endpoints_slow_lane() -> None:
    ticket = RetryTicket("dlv_1", "ten_1", "g", 2, datetime(2030, 1, 1, tzinfo=UTC), "ep_1", shard=1)
    document = ticket_document(ticket, TWO_SHARDS)
    assert (document["shard"], document["queue_url"]) == (1, "fast-1")
    command = CircuitCommand("ten_1", "ep_1", 3, CircuitCommandKind.DRAIN, ticket.next_attempt_at, shard=1)
    document = command_document(command, TWO_SHARDS)
    assert (document["shard"], document["queue_url"]) == (1, "slow-1")
    assert parse_command(json.loads(json.dumps(document)), "token") == replace(command, reply_to="token")
    old = {key: value for key, value in document.items() if key not in ("shard", "queue_url")}
    assert parse_command(old, None).shard == 0  # a command of a workflow started before shards


# --- The queues: 2 x shards of them, shard 0's fast lane the one delivery queue of before ---


def test_each_shard_has_a_fast_and_a_slow_queue_like_the_delivery_queue_and_shard_0s_fast_one_is_it() -> None:
    queues = schema.delivery_queues(3)
    assert [(q.shard, q.lane) for q in queues] == [(s, lane) for s in range(3) for lane in DeliveryLane]
    assert queues[0] is schema.DELIVERY_QUEUE and schema.DELIVERY_QUEUE.logical_name == "DeliveryQueue"
    assert len({q.logical_name for q in queues}) == 6
    settings = {replace(q, logical_name="", shard=None, lane=None) for q in queues}
    assert settings == {replace(schema.DELIVERY_QUEUE, logical_name="", shard=None, lane=None)}  # same DLQ too
    assert schema.all_queues(3)[: len(schema.OTHER_QUEUES)] == schema.OTHER_QUEUES  # dead-letter queues first


def test_raising_the_shards_only_adds_queues_and_keeps_every_existing_ones_name() -> None:
    before = {q.logical_name for q in schema.delivery_queues(2)}
    after = {q.logical_name for q in schema.delivery_queues(5)}
    assert before < after


def test_the_one_variable_holds_every_queues_url_by_shard_and_lane() -> None:
    urls = {spec: f"https://sqs/{spec.logical_name}" for spec in schema.all_queues(2)}
    parsed = DeliveryQueueUrls.parse(schema.encode_delivery_queues(urls))
    assert parsed.shards == 2
    assert parsed.url(1, DeliveryLane.SLOW) == "https://sqs/DeliveryQueueShard1Slow"
    assert parsed.url(0) == "https://sqs/DeliveryQueue"
    assert len(parsed.all()) == 4
    with pytest.raises(LookupError, match="shard 2"):
        parsed.url(2)
    missing = {spec: url for spec, url in urls.items() if spec.logical_name != "DeliveryQueueShard1Slow"}
    with pytest.raises(ValueError):
        schema.encode_delivery_queues(missing)


def test_the_delivery_function_has_an_event_source_per_queue_batches_of_ten_on_fast_lanes_one_on_slow() -> None:
    sources = [s for s in event_sources(DEFAULT_DELIVERY_SHARDS) if s.function is DELIVERY]
    assert [(s.queue.shard, s.queue.lane, s.batch_size) for s in sources] == [
        (shard, lane, schema.SQS_MAX_BATCH if lane is DeliveryLane.FAST else 1)
        for shard in range(DEFAULT_DELIVERY_SHARDS)
        for lane in DeliveryLane
    ]
    assert queue_trigger(DELIVERY).batch_size == schema.SQS_MAX_BATCH
    [redrive] = [s for s in event_sources(4) if s.function is REDRIVE]  # other queues: one event source, as before
    assert redrive.queue is schema.REDRIVE_JOBS_QUEUE


# --- Routing: each message to its shard's lane, in batches per queue ---


class RecordingSqs:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls.append((QueueUrl, [entry["MessageDeduplicationId"] for entry in Entries]))
        return {}


def message(name: str, shard: int, lane: DeliveryLane = DeliveryLane.FAST) -> DeliveryMessage:
    return DeliveryMessage(name, "ten_1", 1, f"group-{name}", name, shard=shard, lane=lane)


TWO_SHARDS = DeliveryQueueUrls(tuple({lane: f"{lane.value}-{shard}" for lane in DeliveryLane} for shard in range(2)))


def test_each_message_goes_to_its_shards_lane_in_order_batched_per_queue() -> None:
    sqs = RecordingSqs()
    messages = [message(f"a{n}", 0) for n in range(12)] + [message("b", 1), message("c", 1, DeliveryLane.SLOW)]
    messages.insert(3, message("d", 1))
    SqsDeliveryQueue(sqs, TWO_SHARDS).enqueue(messages)
    assert sqs.calls == [
        ("fast-0", [f"a{n}" for n in range(10)]),
        ("fast-0", ["a10", "a11"]),
        ("fast-1", ["d", "b"]),
        ("slow-1", ["c"]),
    ]


def test_a_message_for_a_shard_the_deployment_lacks_sends_nothing_at_all() -> None:
    sqs = RecordingSqs()
    with pytest.raises(LookupError, match="shard 2"):
        SqsDeliveryQueue(sqs, TWO_SHARDS).enqueue([message("a", 0), message("b", 2)])
    assert sqs.calls == []


def test_the_queue_is_given_its_urls_as_the_variable_holds_them() -> None:
    urls = {spec: spec.logical_name for spec in schema.all_queues(2)}
    queue = SqsDeliveryQueue(RecordingSqs(), schema.encode_delivery_queues(urls))
    assert queue.queues.url(1, DeliveryLane.SLOW) == "DeliveryQueueShard1Slow"
