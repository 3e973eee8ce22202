"""A first attempt's message carries its event when the event is small (INLINE_EVENT_MAX_BYTES): the attempt signs
and sends the carried event and reads none; a large event, or a message without one, is read as before."""

from __future__ import annotations

from dataclasses import replace

from hookrelay.adapters.sqs import message_body, parse_message
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ports import INLINE_EVENT_MAX_BYTES, first_attempt_message
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
    other = world.event.model_copy(update={"id": "evt_other", "body": '{"other":true}'})
    world.script(OK)
    world.service.attempt(replace(world.message(1), event=other))
    assert world.events.reads == [world.event.id]
    assert world.sender.sent[0].body == world.event.body.encode()


def test_ingest_sends_small_events_along_and_large_ones_not() -> None:
    world = make_world()
    small = first_attempt_message(world.delivery, world.event)
    assert small.event == world.event
    large_body = '{"data":"' + "é" * (INLINE_EVENT_MAX_BYTES // 2) + '"}'  # under the limit in characters, not bytes
    large = first_attempt_message(world.delivery, world.event.model_copy(update={"body": large_body}))
    assert large.event is None
    assert first_attempt_message(world.delivery).event is None


def test_the_carried_event_survives_the_queue_exactly() -> None:
    world = make_world()
    message = first_attempt_message(world.delivery, world.event)
    parsed = parse_message(message_body(message), message.group_id, message.deduplication_id)
    assert parsed == message and parsed.event is not None and parsed.event.body == world.event.body


def test_a_message_whose_event_cannot_be_read_falls_back_to_the_stored_one() -> None:
    world = make_world()
    body = message_body(first_attempt_message(world.delivery)).replace("}", ',"event":{"id":1}}', 1)
    parsed = parse_message(body, "grp", "dedup")
    assert parsed.event is None and parsed.delivery_id == world.delivery.id
