"""POST /v1/events through API Gateway's shape: validation, fan-out, ordering, idempotency."""

from __future__ import annotations

import json
import os
import time

import boto3
import pytest

from hookrelay.adapters.dynamodb import DeliveryTable, EventTable, event_of
from hookrelay.adapters.schema import IDEMPOTENCY
from hookrelay.functions import INGEST
from hookrelay.services.ports import BATCH_ITEMS_REFUSED, DELIVERIES_CREATED, EVENTS_ACCEPTED, INTAKE_METRICS
from tests.support.consumer import ScriptedConsumer
from tests.support.crash import Crash, injector
from tests.support.platform import Platform
from tests.support.records import stored_event


@pytest.fixture
def setup(platform: Platform, consumer: ScriptedConsumer) -> tuple[Platform, str, str, str]:
    tenant_id, tenant_token = platform.new_tenant()
    producer = platform.new_key("producer")
    return platform, tenant_id, tenant_token, producer


def events_table() -> EventTable:
    return EventTable(
        boto3.resource("dynamodb").Table(os.environ["EVENTS_TABLE"]),
        boto3.resource("dynamodb").Table(os.environ["EVENT_LOG_TABLE"]),
    )


def deliveries_table() -> DeliveryTable:
    return DeliveryTable(
        boto3.resource("dynamodb").Table(os.environ["DELIVERIES_TABLE"]),
        boto3.resource("dynamodb").Table(os.environ["EVENT_LOG_TABLE"]),
    )


def assert_problem(response, status: int) -> dict:
    assert response.status == status, response.body
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == status and problem["title"] and problem["type"]
    return problem


def test_fans_out_to_matching_enabled_endpoints_only(setup, consumer: ScriptedConsumer) -> None:
    platform, tenant_id, tenant_token, producer = setup
    orders = platform.new_endpoint(tenant_token, consumer.url, ["order.*"])
    everything = platform.new_endpoint(tenant_token, consumer.url, ["*"])
    platform.new_endpoint(tenant_token, consumer.url, ["invoice.paid"])

    accepted = platform.call("POST", "/v1/events", producer, {"tenant_id": tenant_id, "type": "order.paid", "data": {}})
    assert accepted.status == 202
    deliveries = [deliveries_table().get(d, tenant_id) for d in accepted.json()["delivery_ids"]]
    assert sorted(d.endpoint_id for d in deliveries) == sorted([orders["id"], everything["id"]])
    assert {d.status for d in deliveries} == {"queued"}
    assert all(d.event_id == accepted.json()["event_id"] for d in deliveries)


def test_an_event_matching_no_endpoint_is_stored_with_no_deliveries(setup) -> None:
    platform, tenant_id, _, producer = setup
    accepted = platform.call(
        "POST", "/v1/events", producer, {"tenant_id": tenant_id, "type": "user.created", "data": {}}
    )
    assert accepted.status == 202
    assert accepted.json()["delivery_ids"] == []
    stored = events_table().get(tenant_id, accepted.json()["event_id"])
    assert stored is not None and stored.type == "user.created"
    assert platform.pump() == 0


def test_ordering_key_gets_a_strictly_increasing_sequence_per_tenant_and_key(setup, consumer) -> None:
    platform, tenant_id, tenant_token, producer = setup
    platform.new_endpoint(tenant_token, consumer.url)
    other_tenant, _ = platform.new_tenant("globex")

    def publish(tenant: str, key: str) -> int:
        body = {"tenant_id": tenant, "type": "order.updated", "data": {}, "ordering_key": key}
        accepted = platform.call("POST", "/v1/events", producer, body)
        assert accepted.status == 202
        return accepted.json()["sequence"]

    assert [publish(tenant_id, "order-1") for _ in range(3)] == [1, 2, 3]
    assert publish(tenant_id, "order-2") == 1
    assert publish(other_tenant, "order-1") == 1
    assert publish(tenant_id, "order-1") == 4

    platform.pump()
    envelopes = [json.loads(r.body) for r in consumer.wait_for(5)]
    assert sorted((e["ordering_key"], e["sequence"]) for e in envelopes if e["ordering_key"] == "order-1") == [
        ("order-1", 1),
        ("order-1", 2),
        ("order-1", 3),
        ("order-1", 4),
    ]


def test_idempotency_key_answers_the_same_ids_and_stores_one_event(setup, consumer) -> None:
    platform, tenant_id, tenant_token, producer = setup
    platform.new_endpoint(tenant_token, consumer.url)
    body = {"tenant_id": tenant_id, "type": "order.paid", "data": {"n": 1}}
    first = platform.call("POST", "/v1/events", producer, body, {"idempotency-key": "pay-1"})
    again = platform.call("POST", "/v1/events", producer, body, {"idempotency-key": "pay-1"})
    assert first.status == again.status == 202
    assert first.json() == again.json()
    assert platform.pump() == 1
    assert len(consumer.received) == 1

    other = platform.call("POST", "/v1/events", producer, body, {"idempotency-key": "pay-2"})
    assert other.json()["event_id"] != first.json()["event_id"]


def test_idempotency_key_reused_with_another_body_is_refused(setup) -> None:
    platform, tenant_id, _, producer = setup
    headers = {"idempotency-key": "k-1"}
    platform.call("POST", "/v1/events", producer, {"tenant_id": tenant_id, "type": "a", "data": {}}, headers)
    reused = platform.call("POST", "/v1/events", producer, {"tenant_id": tenant_id, "type": "b", "data": {}}, headers)
    assert assert_problem(reused, 422)["type"].endswith("idempotency-mismatch")


def test_idempotency_keys_are_scoped_to_the_calling_key(setup) -> None:
    platform, tenant_id, _, producer = setup
    second_producer = platform.new_key("producer")
    body = {"tenant_id": tenant_id, "type": "a", "data": {}}
    first = platform.call("POST", "/v1/events", producer, body, {"idempotency-key": "same"})
    second = platform.call("POST", "/v1/events", second_producer, body, {"idempotency-key": "same"})
    assert first.json()["event_id"] != second.json()["event_id"]


def test_body_over_256_kib_is_413(setup) -> None:
    platform, tenant_id, _, producer = setup
    big = {"tenant_id": tenant_id, "type": "blob", "data": {"x": "a" * (256 * 1024)}}
    assert_problem(platform.call("POST", "/v1/events", producer, big), 413)


def test_malformed_json_is_400(setup) -> None:
    platform, _, _, producer = setup
    assert_problem(platform.call("POST", "/v1/events", producer, b'{"tenant_id": '), 400)


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity"])
def test_non_finite_numbers_are_400_not_stored(setup, consumer: ScriptedConsumer, constant: bytes) -> None:
    # Python's json accepts them, but they are not JSON: a consumer's parser would choke on the envelope.
    platform, tenant_id, tenant_token, producer = setup
    platform.new_endpoint(tenant_token, consumer.url, ["*"])
    body = b'{"tenant_id": "%s", "type": "reading", "data": {"value": %s}}' % (tenant_id.encode(), constant)
    problem = assert_problem(platform.call("POST", "/v1/events", producer, body), 400)
    assert constant.decode() in problem["detail"]
    platform.pump()
    assert consumer.received == []


def test_a_body_that_is_not_utf_8_is_400(setup) -> None:
    platform, tenant_id, _, producer = setup
    body = b'{"tenant_id": "%s", "type": "a", "data": {"name": "caf\xe9"}}' % tenant_id.encode()  # Latin-1
    problem = assert_problem(platform.call("POST", "/v1/events", producer, body), 400)
    assert "UTF-8" in problem["detail"]


def test_an_unpaired_surrogate_escape_is_400(setup) -> None:
    # Valid JSON grammar, but no Unicode text: the envelope could not be encoded as UTF-8 for consumers.
    platform, tenant_id, _, producer = setup
    body = b'{"tenant_id": "%s", "type": "a", "data": {"name": "\\ud800"}}' % tenant_id.encode()
    assert_problem(platform.call("POST", "/v1/events", producer, body), 400)


def test_a_surrogate_pair_escape_is_accepted(setup) -> None:
    platform, tenant_id, _, producer = setup
    body = b'{"tenant_id": "%s", "type": "a", "data": {"name": "\\ud83d\\ude00"}}' % tenant_id.encode()
    accepted = platform.call("POST", "/v1/events", producer, body)
    assert accepted.status == 202, accepted.body
    assert events_table().get(tenant_id, accepted.json()["event_id"]).data == {"name": "\U0001f600"}


@pytest.mark.parametrize(
    "body",
    [
        {"type": "a", "data": {}},  # no tenant
        {"tenant_id": "t", "data": {}},  # no type
        {"tenant_id": "t", "type": "a"},  # no data
        {"tenant_id": "t", "type": "a", "data": []},  # data not an object
        {"tenant_id": "t", "type": "has space", "data": {}},
        {"tenant_id": "t", "type": "a", "data": {}, "surprise": 1},
        ["not", "an", "object"],
    ],
)
def test_invalid_fields_are_422_with_the_offending_fields(setup, body) -> None:
    platform, _, _, producer = setup
    problem = assert_problem(platform.call("POST", "/v1/events", producer, body), 422)
    assert problem["errors"]


def test_unknown_tenant_is_422(setup) -> None:
    platform, _, _, producer = setup
    response = platform.call("POST", "/v1/events", producer, {"tenant_id": "ten_nope", "type": "a", "data": {}})
    assert_problem(response, 422)


@pytest.mark.parametrize(
    "number",
    [
        pytest.param(b"1e400", id="beyond-a-double"),
        pytest.param(b"-1e400", id="beyond-a-negative-double"),
        pytest.param(b"1" * 5000, id="5000-digit-integer"),  # past Python's integer conversion limit
    ],
)
def test_numbers_that_cannot_be_carried_are_400(setup, number: bytes) -> None:
    platform, tenant_id, _, producer = setup
    body = b'{"tenant_id": "%s", "type": "a", "data": {"value": %s}}' % (tenant_id.encode(), number)
    assert_problem(platform.call("POST", "/v1/events", producer, body), 400)


def test_nesting_too_deep_to_read_is_400(setup) -> None:
    platform, tenant_id, _, producer = setup
    depth = 50_000
    body = b'{"tenant_id": "%s", "type": "a", "data": {"x": %s}}' % (tenant_id.encode(), b"[" * depth + b"]" * depth)
    assert_problem(platform.call("POST", "/v1/events", producer, body), 400)


def test_a_body_that_grows_past_the_limit_when_written_out_is_413(setup) -> None:
    # 1e15 is read as a double and written back as 1000000000000000.0: four bytes become eighteen.
    platform, tenant_id, _, producer = setup
    numbers = b",".join([b"1e15"] * 40_000)
    body = b'{"tenant_id": "%s", "type": "a", "data": {"x": [%s]}}' % (tenant_id.encode(), numbers)
    assert len(body) < 256 * 1024
    assert_problem(platform.call("POST", "/v1/events", producer, body), 413)


# --- The stored event: the signed body only, whatever `data` holds within the request limit ---


def test_a_250_kib_payload_is_stored_once_and_delivered_byte_identical(setup, consumer: ScriptedConsumer) -> None:
    platform, tenant_id, tenant_token, producer = setup
    platform.new_endpoint(tenant_token, consumer.url)
    data = {"blob": "a" * (250 * 1024)}
    accepted = platform.call("POST", "/v1/events", producer, {"tenant_id": tenant_id, "type": "blob", "data": data})
    assert accepted.status == 202, accepted.body

    item = {"Item": stored_event(tenant_id, accepted.json()["event_id"])[2]}
    assert "data" not in item["Item"]  # the payload is stored once, inside the signed body (deflated: it pays)
    assert "body" not in item["Item"] and len(bytes(item["Item"]["body_z"])) < 250 * 1024
    assert platform.pump() == 1
    [received] = consumer.received
    assert received.body == event_of(item["Item"]).body.encode()
    assert json.loads(received.body)["data"] == data


def nested(depth: int) -> dict:
    document: dict = {"leaf": True}
    for level in range(depth):
        document = {f"level{level}": document}
    return document


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(nested(40), id="40-levels"),  # DynamoDB maps stop at 32
        pytest.param({"tiny": 1e-200, "huge": 1.5e300}, id="beyond-dynamodb-numbers"),
        pytest.param({"digits": 123456789012345678901234567890123456789012345}, id="45-digit-integer"),
    ],
)
def test_data_dynamodb_could_not_hold_as_a_map_round_trips_exactly(setup, data: dict) -> None:
    platform, tenant_id, tenant_token, producer = setup
    accepted = platform.call("POST", "/v1/events", producer, {"tenant_id": tenant_id, "type": "a", "data": data})
    assert accepted.status == 202, accepted.body

    fetched = platform.call("GET", f"/v1/events/{accepted.json()['event_id']}", tenant_token)
    assert fetched.status == 200, fetched.body
    assert fetched.json()["data"] == data
    assert json.loads(fetched.json()["body"])["data"] == data
    assert events_table().get(tenant_id, accepted.json()["event_id"]).data == data


def test_a_keyed_requests_in_progress_record_expires_with_its_invocation(setup) -> None:
    """So a producer retrying after a crashed invocation waits the invocation's time, not the key's 24 hours."""
    platform, tenant_id, _, producer = setup
    before = time.time()
    platform.call(
        "POST", "/v1/events", producer, {"tenant_id": tenant_id, "type": "a", "data": {}}, {"idempotency-key": "k"}
    )
    (record,) = boto3.resource("dynamodb").Table(os.environ[IDEMPOTENCY.env_var]).scan()["Items"]
    expires_ms = int(record["in_progress_expiration"])
    assert before * 1000 < expires_ms <= (time.time() + INGEST.timeout_seconds) * 1000


def test_a_retry_while_its_keys_request_may_still_run_is_409_with_retry_after(setup) -> None:
    """A producer retrying under the key of a request that died mid-way is told when to come back, in the header as
    every HTTP client reads it, and in the problem document as a batch item's is."""
    platform, tenant_id, _, producer = setup
    body, key = {"tenant_id": tenant_id, "type": "a", "data": {}}, {"idempotency-key": "k"}
    with injector() as hook:
        hook.arm(frozenset({"ingest"}), "ingest: DynamoDB.Query [Endpoints]")  # after the key's in-progress record
        with pytest.raises(Crash):
            platform.call("POST", "/v1/events", producer, body, key)
    assert hook.crashed == "ingest: DynamoDB.Query [Endpoints]"

    again = platform.call("POST", "/v1/events", producer, body, key)
    problem = assert_problem(again, 409)
    assert problem["type"].endswith("/idempotency-in-flight")
    assert again.headers["retry-after"] == str(problem["retry_after"]) == "1"


def test_ingest_counts_its_intake_for_the_dashboard(
    setup, consumer: ScriptedConsumer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The intake the dashboard graphs (stacks/constructs/observability.py), in ingest's own EMF records: one record
    per request, counting its events accepted, their deliveries and a batch's refused items."""
    platform, tenant_id, tenant_token, producer = setup
    platform.new_endpoint(tenant_token, consumer.url, ["order.*"])
    platform.new_endpoint(tenant_token, consumer.url, ["*"])
    capsys.readouterr()
    one = {"tenant_id": tenant_id, "type": "order.paid", "data": {}}
    assert platform.call("POST", "/v1/events", producer, one).status == 202
    items = [{"type": "order.paid", "data": {}}, {"type": "user.created", "data": {}}, {"type": "", "data": {}}]
    batch = platform.call("POST", "/v1/events/batch", producer, {"tenant_id": tenant_id, "events": items})
    assert batch.status == 200 and batch.json()["refused"] == 1

    records = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    intake = [
        {name: record[name] for name in INTAKE_METRICS if name in record}
        for record in records
        if record.get("service") == INGEST.name and EVENTS_ACCEPTED in record
    ]
    assert intake == [
        {EVENTS_ACCEPTED: [1.0], DELIVERIES_CREATED: [2.0]},
        {EVENTS_ACCEPTED: [2.0], DELIVERIES_CREATED: [3.0], BATCH_ITEMS_REFUSED: [1.0]},
    ]
