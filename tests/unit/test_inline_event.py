"""A first attempt's message carries its event when the event is small (adapters/sqs.py: CARRIED_EVENT_MAX_BYTES):
the attempt signs and sends the carried event and reads none; a larger event, or a message without one, is read."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from bench.metering import SQS_CHUNK_BYTES
from hookrelay.adapters import schema, sqs
from hookrelay.adapters.records import to_data
from hookrelay.adapters.schema import SQS_MAX_BATCH
from hookrelay.adapters.sqs import CARRIED_EVENT_MAX_BYTES, message_body, parse_message
from hookrelay.domain.models import Event
from hookrelay.domain.queues import DeliveryLane
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ports import first_attempt_message
from tests.support.delivery_world import OK, make_world


def test_the_carried_event_is_sent_and_none_is_read() -> None:
    world = make_world()
    message = replace(world.message(1), event=world.event)
    world.script(OK)
    assert world.service.attempt(message).status is DeliveryStatus.DELIVERED
    assert world.events.reads == []
    assert world.sender.sent[0].body == world.event.body.encode()


def test_without_a_carried_event_the_stored_one_is_read() -> None:
    world = make_world()
    world.script(OK)
    assert world.service.attempt(world.message(1)).status is DeliveryStatus.DELIVERED
    assert world.events.reads == [world.event.id]


def test_a_carried_event_of_another_delivery_is_not_used() -> None:
    world = make_world()
    other = replace(world.event, id="evt_other", body='{"other":true}')
    world.script(OK)
    world.service.attempt(replace(world.message(1), event=other))
    assert world.events.reads == [world.event.id]
    assert world.sender.sent[0].body == world.event.body.encode()


def test_a_first_attempt_message_takes_its_own_event_only() -> None:
    world = make_world()
    assert first_attempt_message(world.delivery, world.event).event == world.event
    assert first_attempt_message(world.delivery, replace(world.event, id="evt_other")).event is None
    assert first_attempt_message(world.delivery).event is None


def test_the_carried_event_survives_the_queue_exactly() -> None:
    world = make_world()
    message = first_attempt_message(world.delivery, world.event)
    parsed = parse_message(message_body(message), message.group_id, message.deduplication_id)
    assert parsed == message and parsed.event is not None and parsed.event.body == world.event.body


def test_an_event_too_large_encoded_stays_out_of_the_message() -> None:
    """The limit is on the encoded event: characters escaped as JSON count as what they take in the message."""
    world = make_world()
    body = json.dumps({"data": "é" * (CARRIED_EVENT_MAX_BYTES // 3)}, ensure_ascii=False)  # under it in characters
    message = first_attempt_message(world.delivery, replace(world.event, body=body))
    assert len(body) < CARRIED_EVENT_MAX_BYTES and message.event is not None
    parsed = parse_message(message_body(message), message.group_id, message.deduplication_id)
    assert parsed.event is None and "event" not in json.loads(message_body(message))


def test_ten_messages_carrying_the_largest_events_fit_one_billed_chunk() -> None:
    world = make_world()
    event = replace(world.event, ordering_key="k" * 256, sequence=10**12)
    overhead = len(json.dumps(to_data(event), separators=(",", ":"))) - len(event.body)
    largest = replace(event, body="x" * (CARRIED_EVENT_MAX_BYTES - overhead))
    delivery = replace(world.delivery, id="dlv_" + "d" * 60, tenant_id="tn_" + "t" * 61)
    bodies = [message_body(first_attempt_message(delivery, largest)) for _ in range(SQS_MAX_BATCH)]
    assert all('"event"' in body for body in bodies)
    assert sum(len(body.encode()) for body in bodies) <= SQS_CHUNK_BYTES


def test_a_message_whose_event_cannot_be_read_falls_back_to_the_stored_one() -> None:
    world = make_world()
    body = message_body(first_attempt_message(world.delivery)).replace("}", ',"event":{"id":1}}', 1)
    parsed = parse_message(body, "grp", "dedup")
    assert parsed.event is None and parsed.delivery_id == world.delivery.id


def test_a_fan_outs_event_is_encoded_once_for_all_its_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    world = make_world()
    encoded: list[str] = []
    carried = sqs._carried

    def counting(event: Event) -> str | None:
        encoded.append(event.id)
        return carried(event)

    class Recording:
        def __init__(self) -> None:
            self.bodies: list[str] = []

        def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, str]]) -> dict[str, object]:
            self.bodies += [entry["MessageBody"] for entry in Entries]
            return {}

    monkeypatch.setattr(sqs, "_carried", counting)
    client = Recording()
    fan_out = [replace(first_attempt_message(world.delivery, world.event), delivery_id=f"dlv_{n}") for n in range(12)]
    one_shard = schema.DeliveryQueueUrls(({DeliveryLane.FAST: "fast-url", DeliveryLane.SLOW: "slow-url"},))
    sqs.SqsDeliveryQueue(client, one_shard).enqueue(fan_out)
    assert encoded == [world.event.id]
    assert len(client.bodies) == 12 and all(json.loads(body)["event"]["id"] == world.event.id for body in client.bodies)
