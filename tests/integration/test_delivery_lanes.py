"""Batched delivery and its lanes on moto, with the real handlers and queues and consumers on 127.0.0.1: a batch's
healthy endpoints are not held by a hanging one, which moves to its slow lane; and an endpoint's move to the slow lane
and back loses, duplicates and reorders nothing (domain/lanes.py)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest

from hookrelay import wiring
from hookrelay.adapters.dynamodb import DeliveryTable, EndpointTable
from hookrelay.adapters.schema import SQS_MAX_BATCH
from hookrelay.adapters.slow_tails import SlowTailTable
from hookrelay.adapters.sqs import SqsDeliveryQueue
from hookrelay.domain.classification import ATTEMPT_TIMEOUT_SECONDS
from hookrelay.domain.models import Endpoint
from hookrelay.domain.queues import DeliveryLane
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.delivery import DeliveryService, Lanes
from local.provision import delivery_queue_urls
from local.sqs_source import invoke_batch_failures, poll_once, queue_arn_of, receive
from scripts.create_admin_key import create_admin_key
from tests.support.aws import as_function, moto_stack
from tests.support.consumer import Reply, ScriptedConsumer
from tests.support.platform import Platform
from tests.support.pump import QueuePump, wait_until

HEALTHY = 9
MAX_IN_FLIGHT_USED = 50  # groups enough that a batch of ten lands in several of them


class HangingConsumer:
    """Takes each request and holds it, unanswered, until released (or 30 s)."""

    def __init__(self) -> None:
        self.holding = threading.Event()
        self.release = threading.Event()
        self.requests = 0
        consumer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", "0")))
                consumer.requests += 1
                consumer.holding.set()
                consumer.release.wait(30)
                try:
                    self.send_response(200)
                    self.send_header("content-length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the sender gave up at its deadline

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def platform() -> Iterator[Platform]:
    with moto_stack() as env:
        yield Platform(env=env, admin_token=create_admin_key(env["API_KEYS_TABLE"]).token)


@pytest.fixture
def deployed_timeout_platform() -> Iterator[Platform]:
    """With the deployed attempt timeout: long enough that a busy machine still sees the batch's healthy groups
    settle, and be released, while the hanging attempt holds the batch."""
    with moto_stack(attempt_timeout_seconds=ATTEMPT_TIMEOUT_SECONDS) as env:
        yield Platform(env=env, admin_token=create_admin_key(env["API_KEYS_TABLE"]).token)


@pytest.fixture
def consumer() -> Iterator[ScriptedConsumer]:
    server = ScriptedConsumer()
    yield server
    server.close()


@pytest.fixture
def hanging() -> Iterator[HangingConsumer]:
    server = HangingConsumer()
    yield server
    server.close()


def endpoint_of(tenant_id: str, endpoint_id: str) -> Endpoint:
    found = EndpointTable(boto3.resource("dynamodb").Table(os.environ["ENDPOINTS_TABLE"])).get(tenant_id, endpoint_id)
    assert found is not None
    return found


def tails_of(endpoint_id: str) -> dict[str, str]:
    """The endpoint's groups' tails in the slow-tails table (a test's scan: nothing in the platform scans it)."""
    items = boto3.resource("dynamodb").Table(os.environ["SLOW_TAILS_TABLE"]).scan()["Items"]
    return {item["group_id"]: item["tail"] for item in items if item["group_id"].startswith(f"{endpoint_id}#")}


def deliveries() -> DeliveryTable:
    return DeliveryTable(
        boto3.resource("dynamodb").Table(os.environ["DELIVERIES_TABLE"]),
        boto3.resource("dynamodb").Table(os.environ["EVENT_LOG_TABLE"]),
    )


def publish(platform: Platform, producer: str, tenant_id: str, n: int = 0) -> dict[str, Any]:
    accepted = platform.call("POST", "/v1/events", producer, {"tenant_id": tenant_id, "type": "a.b", "data": {"n": n}})
    assert accepted.status == 202, accepted.body
    return accepted.json()


def message_count(platform: Platform, url: str) -> int:
    attributes = platform.sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def test_a_batch_s_healthy_endpoints_settle_while_a_hanging_one_holds_its_request_which_then_moves_it_to_the_slow_lane(
    deployed_timeout_platform: Platform, consumer: ScriptedConsumer, hanging: HangingConsumer
) -> None:
    platform = deployed_timeout_platform
    tenant_id, token = platform.new_tenant()
    healthy = [platform.new_endpoint(token, consumer.url)["id"] for _ in range(HEALTHY)]
    hung = platform.new_endpoint(token, hanging.url)
    producer = platform.new_key("producer")
    event = publish(platform, producer, tenant_id)
    ids = {
        d.endpoint_id: d.id for d in (deliveries().get(d, tenant_id) for d in event["delivery_ids"]) if d is not None
    }
    assert sorted(ids) == sorted([*healthy, hung["id"]])  # one delivery to each
    urls = delivery_queue_urls(platform.env)
    fast = [urls.url(shard) for shard in range(urls.shards)]

    # Each fast lane's batch (every message of the event, spread over the shards), polled at once.
    polls = [threading.Thread(target=poll_once, args=(platform.sqs, url)) for url in fast]
    for poll in polls:
        poll.start()
    assert hanging.holding.wait(30), "the hanging endpoint's request never came"

    def healthy_delivered() -> bool:
        found = [deliveries().get(ids[endpoint_id], tenant_id) for endpoint_id in healthy]
        return all(d is not None and d.status is DeliveryStatus.DELIVERED for d in found)

    # Recorded while the hanging request is still held: none of the nine waited for it.
    wait_until(healthy_delivered, "the nine healthy deliveries to be recorded delivered")
    # And released: their messages deleted by the function itself, so each group's next message is not held back
    # by the batch's hanging one (domain/lanes.py, `release_after`).
    wait_until(
        lambda: sum(message_count(platform, url) for url in fast) == 1, "only the hanging message left in flight"
    )
    assert any(poll.is_alive() for poll in polls)  # the batch is still waiting for the hanging attempt
    assert not hanging.release.is_set() and hanging.requests == 1
    for poll in polls:
        poll.join(timeout=60)

    held = deliveries().get(ids[hung["id"]], tenant_id)
    assert held is not None and held.status is DeliveryStatus.RETRYING and held.attempts[0].error == "timeout"
    assert endpoint_of(tenant_id, hung["id"]).lane is DeliveryLane.SLOW
    health = platform.call("GET", f"/v1/endpoints/{hung['id']}/health", token).json()
    assert health["lane"] == "slow"  # what the tenant sees of it
    assert all(endpoint_of(tenant_id, endpoint_id).lane is DeliveryLane.FAST for endpoint_id in healthy)

    # Its next message is forwarded out of the fast lane, unattempted there, into its shard's slow lane.
    hanging.release.set()
    publish(platform, producer, tenant_id, 1)
    for url in fast:
        poll_once(platform.sqs, url)
    slow = urls.url(endpoint_of(tenant_id, hung["id"]).queue_shard, DeliveryLane.SLOW)
    assert hanging.requests == 1 and message_count(platform, slow) == 1
    assert poll_once(platform.sqs, slow) == 1
    assert hanging.requests == 2


def test_an_endpoint_s_move_to_the_slow_lane_and_back_loses_duplicates_and_reorders_nothing(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    tenant_id, token = platform.new_tenant()
    endpoint_id = platform.new_endpoint(token, consumer.url, max_in_flight=1)["id"]  # one group: one order
    producer = platform.new_key("producer")
    with as_function("delivery"):  # a threshold the tests' 2 s attempt timeout leaves room above
        service = wiring.delivery_service()
        assert service.lanes is not None
        service.lanes = Lanes(queue=service.lanes.queue, tails=service.lanes.tails, slow_after_ms=300)
    # Quick, then slow (to the slow lane), slow again there, then quick (back to the fast lane).
    consumer.queue([Reply(200)] * 3 + [Reply(200, delay=0.5)] * 2)
    consumer.default = Reply(200)
    events = [publish(platform, producer, tenant_id, n)["event_id"] for n in range(8)]

    with QueuePump.delivery(platform.env):
        wait_until(lambda: endpoint_of(tenant_id, endpoint_id).lane is DeliveryLane.SLOW, "the move to the slow lane")
        events += [publish(platform, producer, tenant_id, n)["event_id"] for n in range(8, 14)]
        wait_until(lambda: len(consumer.received) >= len(events), "every event to be delivered")
        wait_until(lambda: tails_of(endpoint_id) == {}, "the slow lane to be settled")

    received = [request.headers["webhook-id"] for request in consumer.received]
    assert received == events  # each once, in the order they were published
    assert endpoint_of(tenant_id, endpoint_id).lane is DeliveryLane.FAST


def test_a_failed_message_comes_back_with_the_rest_of_its_group_in_order_while_the_batch_s_other_groups_settle(
    platform: Platform, consumer: ScriptedConsumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant_id, token = platform.new_tenant()
    ordered = platform.new_endpoint(token, consumer.url, ["a.*"], max_in_flight=1)  # one group
    other = platform.new_endpoint(token, consumer.url, ["b.*"], max_in_flight=1)
    producer = platform.new_key("producer")

    def send(event_type: str) -> str:
        body = {"tenant_id": tenant_id, "type": event_type, "data": {}}
        accepted = platform.call("POST", "/v1/events", producer, body)
        assert accepted.status == 202, accepted.body
        [delivery_id] = accepted.json()["delivery_ids"]
        return str(delivery_id)

    a1, b1, a2, b2, a3 = (send(t) for t in ("a.1", "b.1", "a.2", "b.2", "a.3"))
    broken = {a2}
    handle = DeliveryService._handle  # what `attempt` and `attempt_run` both hand each message to

    def fails_once(self: DeliveryService, message: Any, *args: Any, **options: Any) -> Any:
        if message.delivery_id in broken:
            broken.discard(message.delivery_id)
            raise ConnectionError("a processing error, not the consumer's answer")
        return handle(self, message, *args, **options)

    monkeypatch.setattr(DeliveryService, "_handle", fails_once)
    urls = delivery_queue_urls(platform.env)
    shards = {endpoint_of(tenant_id, e["id"]).queue_shard for e in (ordered, other)}
    received: list[dict[str, Any]] = []
    failed: set[str] = set()
    for url in sorted({urls.url(shard) for shard in shards}):  # each shard's fast lane: one batch each
        batch = [{**m, "_url": url} for m in receive(platform.sqs, url, batch_size=SQS_MAX_BATCH, wait_seconds=0)]
        received += batch
        failed |= invoke_batch_failures(platform.sqs, url, queue_arn_of(platform.sqs, url), batch, "delivery")

    failed_deliveries = {json.loads(m["Body"])["delivery_id"] for m in received if m["MessageId"] in failed}
    assert failed_deliveries == {a2, a3}  # a3 unprocessed behind a2: its group's order
    assert [d.status for d in (deliveries().get(d, tenant_id) for d in (a1, b1, b2))] == [DeliveryStatus.DELIVERED] * 3
    assert deliveries().get(a3, tenant_id).status is DeliveryStatus.QUEUED  # type: ignore[union-attr]

    for message in received:  # their visibility timeout passes: SQS hands them out again, in order
        if message["MessageId"] in failed:
            platform.sqs.change_message_visibility(
                QueueUrl=message["_url"], ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
            )
    platform.pump()
    ids_in_order = [deliveries().get(d, tenant_id).event_id for d in (a1, a2, a3)]  # type: ignore[union-attr]
    sent = [r.headers["webhook-id"] for r in consumer.received]
    assert [e for e in sent if e in ids_in_order] == ids_in_order


def test_a_slow_endpoint_s_messages_in_one_batch_are_forwarded_in_order_with_one_tail_write_and_one_send(
    platform: Platform, consumer: ScriptedConsumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant_id, token = platform.new_tenant()
    endpoint_id = platform.new_endpoint(token, consumer.url, max_in_flight=1)["id"]  # one group: one order
    table = EndpointTable(boto3.resource("dynamodb").Table(os.environ["ENDPOINTS_TABLE"]))
    assert table.switch_lane(tenant_id, endpoint_id, DeliveryLane.SLOW)  # as a slow attempt would have
    producer = platform.new_key("producer")
    delivery_ids = [publish(platform, producer, tenant_id, n)["delivery_ids"][0] for n in range(5)]
    tails: list[str] = []
    sends: list[int] = []
    name, send = SlowTailTable.name, SqsDeliveryQueue._send

    def recorded_tail(self: SlowTailTable, group: str, key: str) -> None:
        tails.append(key)
        name(self, group, key)

    def recorded_send(self: SqsDeliveryQueue, url: str, messages: Any, carried: Any) -> None:
        sends.append(len(messages))
        send(self, url, messages, carried)

    monkeypatch.setattr(SlowTailTable, "name", recorded_tail)
    monkeypatch.setattr(SqsDeliveryQueue, "_send", recorded_send)
    urls = delivery_queue_urls(platform.env)
    shard = endpoint_of(tenant_id, endpoint_id).queue_shard

    assert poll_once(platform.sqs, urls.url(shard)) == 5  # one batch of the group's five, through the real handler

    assert tails == [f"{delivery_ids[-1]}#1"] and sends == [5] and consumer.received == []
    slow = urls.url(shard, DeliveryLane.SLOW)
    in_slow_lane = [
        json.loads(m["Body"])["delivery_id"]
        for m in receive(platform.sqs, slow, batch_size=SQS_MAX_BATCH, wait_seconds=0)
    ]
    assert in_slow_lane == delivery_ids  # in order
    assert message_count(platform, urls.url(shard)) == 0


def test_a_forward_to_an_endpoint_whose_every_group_has_a_tail_writes_its_tail_and_not_the_endpoint(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    """What bench/capacity.py models (SLOW_TAIL_WRITES_PER_MESSAGE, `endpoint_read_units`), metered on moto through
    the real handler: an endpoint at its most groups, every one marked, reads in one unit; a forward of its message
    writes one unit, its group's tail, and nothing of the endpoint's item; the slow lane's settle, one more."""
    from bench.capacity import SLOW_TAIL_WRITES_PER_MESSAGE, endpoint_read_units
    from bench.metering import Meter
    from hookrelay.domain.lanes import MAX_IN_FLIGHT, tail_mark

    tenant_id, token = platform.new_tenant()
    endpoint_id = platform.new_endpoint(token, consumer.url, max_in_flight=MAX_IN_FLIGHT)["id"]
    endpoints = EndpointTable(boto3.resource("dynamodb").Table(os.environ["ENDPOINTS_TABLE"]))
    for slot in range(MAX_IN_FLIGHT):  # domain/envelope.message_group_id's form
        endpoints.mark_slow_tail(tenant_id, endpoint_id, tail_mark(endpoint_id, f"{endpoint_id}#{slot}"))
    assert endpoints.switch_lane(tenant_id, endpoint_id, DeliveryLane.SLOW)
    producer = platform.new_key("producer")
    [delivery_id] = publish(platform, producer, tenant_id)["delivery_ids"]
    urls = delivery_queue_urls(platform.env)
    shard = endpoint_of(tenant_id, endpoint_id).queue_shard
    tables = {os.environ["ENDPOINTS_TABLE"]: "endpoints", os.environ["SLOW_TAILS_TABLE"]: "tails"}

    meter = Meter()
    with meter.installed(capture_stdout=False), meter.recorded():
        assert poll_once(platform.sqs, urls.url(shard)) == 1  # the fast lane forwards it
    forwarded = [c for c in meter.calls if c.service == "dynamodb" and c.table in tables]
    assert {tables[c.table]: c.write_units for c in forwarded if c.write_units} == {"tails": 1}
    [endpoint_read] = [c.read_units for c in forwarded if tables[c.table] == "endpoints"]
    assert endpoint_read == endpoint_read_units(MAX_IN_FLIGHT) == 1

    meter = Meter()
    with meter.installed(capture_stdout=False), meter.recorded():
        assert poll_once(platform.sqs, urls.url(shard, DeliveryLane.SLOW)) == 1  # attempted, its tail deleted
    settled = [c for c in meter.calls if c.service == "dynamodb" and tables.get(c.table) == "tails"]
    assert sum(c.write_units for c in settled) == SLOW_TAIL_WRITES_PER_MESSAGE - 1
    assert deliveries().get(delivery_id, tenant_id).status is DeliveryStatus.DELIVERED  # type: ignore[union-attr]
    assert tails_of(endpoint_id) == {}


def test_a_tail_an_endpoint_kept_in_its_own_item_before_the_upgrade_still_holds_its_group_and_is_cleared(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    """An endpoint stored by a version that kept its tails in a map on its item: the map's group is still forwarded
    behind it, and the map's entry is cleared when its message settles in the slow lane."""
    tenant_id, token = platform.new_tenant()
    endpoint_id = platform.new_endpoint(token, consumer.url, max_in_flight=1)["id"]
    producer = platform.new_key("producer")
    [delivery_id] = publish(platform, producer, tenant_id)["delivery_ids"]
    group = f"{endpoint_id}#0"  # max_in_flight 1: the endpoint's one group
    boto3.resource("dynamodb").Table(os.environ["ENDPOINTS_TABLE"]).update_item(  # as that version wrote it
        Key={"tenant_id": tenant_id, "id": endpoint_id},
        UpdateExpression="SET slow_tails = :tails",
        ExpressionAttributeValues={":tails": {group: f"{delivery_id}#1"}},
    )
    urls = delivery_queue_urls(platform.env)
    shard = endpoint_of(tenant_id, endpoint_id).queue_shard

    assert poll_once(platform.sqs, urls.url(shard)) == 1  # the endpoint is fast, but its group waits on the map
    assert consumer.received == [] and tails_of(endpoint_id) == {group: f"{delivery_id}#1"}
    assert poll_once(platform.sqs, urls.url(shard, DeliveryLane.SLOW)) == 1

    assert len(consumer.received) == 1
    assert endpoint_of(tenant_id, endpoint_id).slow_tails == {} and tails_of(endpoint_id) == {}


# --- One endpoint read for a batch's groups' first messages (services/delivery.py, BatchReads) ---


def test_a_batch_of_one_endpoint_s_groups_reads_it_once_for_their_first_messages(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    from bench.metering import Meter

    tenant_id, token = platform.new_tenant()
    endpoint_id = platform.new_endpoint(token, consumer.url, max_in_flight=MAX_IN_FLIGHT_USED)["id"]
    producer = platform.new_key("producer")
    delivery_ids = [publish(platform, producer, tenant_id, n)["delivery_ids"][0] for n in range(SQS_MAX_BATCH)]
    groups = {deliveries().get(d, tenant_id).message_group_id for d in delivery_ids}  # type: ignore[union-attr]
    urls = delivery_queue_urls(platform.env)
    shard = endpoint_of(tenant_id, endpoint_id).queue_shard
    endpoints_table = os.environ["ENDPOINTS_TABLE"]

    meter = Meter()
    with meter.installed(capture_stdout=False), meter.recorded():
        assert poll_once(platform.sqs, urls.url(shard)) == SQS_MAX_BATCH  # one batch of the ten, the real handler

    reads = [c for c in meter.calls if c.operation == "GetItem" and c.table == endpoints_table]
    # One read for the groups' first messages; each group's later ones read afresh, after their group's first.
    assert len(reads) == 1 + SQS_MAX_BATCH - len(groups) < SQS_MAX_BATCH
    assert len(consumer.received) == SQS_MAX_BATCH
    assert all(deliveries().get(d, tenant_id).status is DeliveryStatus.DELIVERED for d in delivery_ids)  # type: ignore[union-attr]


def test_a_group_s_later_message_in_the_batch_reads_what_its_first_wrote(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    """The first message's slow answer moves the endpoint to the slow lane; the group's next one, in the same batch,
    reads the endpoint afresh and is forwarded there, not attempted in the fast lane from the batch's first read."""
    tenant_id, token = platform.new_tenant()
    endpoint_id = platform.new_endpoint(token, consumer.url, max_in_flight=1)["id"]  # one group
    with as_function("delivery"):
        service = wiring.delivery_service()
        assert service.lanes is not None
        service.lanes = Lanes(queue=service.lanes.queue, tails=service.lanes.tails, slow_after_ms=300)
    consumer.queue([Reply(200, delay=0.5)])
    consumer.default = Reply(200)
    producer = platform.new_key("producer")
    first, second = (publish(platform, producer, tenant_id, n)["delivery_ids"][0] for n in range(2))
    urls = delivery_queue_urls(platform.env)
    shard = endpoint_of(tenant_id, endpoint_id).queue_shard

    assert poll_once(platform.sqs, urls.url(shard)) == 2

    assert endpoint_of(tenant_id, endpoint_id).lane is DeliveryLane.SLOW and len(consumer.received) == 1
    assert deliveries().get(first, tenant_id).status is DeliveryStatus.DELIVERED  # type: ignore[union-attr]
    assert deliveries().get(second, tenant_id).status is DeliveryStatus.QUEUED  # type: ignore[union-attr]
    assert tails_of(endpoint_id) == {f"{endpoint_id}#0": f"{second}#1"}
    assert poll_once(platform.sqs, urls.url(shard, DeliveryLane.SLOW)) == 1
    assert deliveries().get(second, tenant_id).status is DeliveryStatus.DELIVERED  # type: ignore[union-attr]
