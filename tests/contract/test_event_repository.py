"""EventRepository: events, their expiry that only grows, and the per-(tenant, ordering key) sequence, alike on the
fake and on DynamoDB."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hookrelay.domain import ids
from hookrelay.domain.clock import epoch_seconds, truncate_to_milliseconds, utcnow
from hookrelay.domain.lifecycle import new_delivery
from hookrelay.domain.models import Event
from tests.support.builders import TENANT, an_endpoint, an_event
from tests.support.stores import Stores


def test_put_then_get_returns_the_event_as_written(stores: Stores) -> None:
    event = an_event(ordering_key="order-1", sequence=7)
    stores.events.put(event)
    assert stores.events.get(TENANT, "evt_1") == event
    assert stores.events.get(TENANT, "evt_missing") is None


def test_put_stores_an_event_once_and_says_whether_it_did(stores: Stores) -> None:
    first = an_event()
    assert stores.events.put(first)
    assert not stores.events.put(replace(first, type="other.type"))  # a retry of the request
    assert stores.events.get(TENANT, "evt_1") == first


def test_next_sequence_counts_from_one_per_tenant_and_ordering_key(stores: Stores) -> None:
    drawn = [stores.events.next_sequence(TENANT, "order-1") for _ in range(3)]
    assert drawn == [1, 2, 3]
    assert stores.events.next_sequence(TENANT, "order-2") == 1
    assert stores.events.next_sequence("tn_other", "order-1") == 1
    assert stores.events.next_sequence(TENANT, "order-1") == 4


def test_a_sequence_counter_is_never_read_as_an_event(stores: Stores) -> None:
    stores.events.next_sequence(TENANT, "order-1")
    assert stores.events.get(TENANT, f"seq#{TENANT}#order-1") is None


def test_extend_expiry_lengthens_an_event_and_never_shortens_it(stores: Stores) -> None:
    event = an_event()
    stores.events.put(event)
    stores.events.extend_expiry(TENANT, "evt_1", event.expires_at + 100)
    stores.events.extend_expiry(TENANT, "evt_1", event.expires_at + 50)
    stored = stores.events.get(TENANT, "evt_1")
    assert stored is not None and stored.expires_at == event.expires_at + 100


def test_extend_expiry_of_an_unknown_event_creates_nothing(stores: Stores) -> None:
    stores.events.extend_expiry(TENANT, "evt_missing", 10**10)
    assert stores.events.get(TENANT, "evt_missing") is None


def test_next_sequence_draws_several_numbers_at_once(stores: Stores) -> None:
    assert stores.events.next_sequence(TENANT, "order-1", 3) == 3  # 1, 2 and 3 drawn
    assert stores.events.next_sequence(TENANT, "order-1") == 4
    assert stores.events.next_sequence(TENANT, "order-1", 10) == 14


def a_logged_event(offset_ms: int = 0, tenant_id: str = TENANT) -> Event:
    """An event as ingest makes one with no idempotency key: its id timed at its own millisecond, about now."""
    at = truncate_to_milliseconds(utcnow()) + timedelta(milliseconds=offset_ms)
    event_id = ids.id_at("evt", at)
    return an_event(event_id, tenant_id=tenant_id, timestamp=at, expires_at=epoch_seconds(at + timedelta(days=30)))


def test_appended_events_are_read_back_by_their_tenant_only(stores: Stores) -> None:
    batch = [a_logged_event(n) for n in range(30)]  # past one BatchWriteItem's 25 items
    endpoints = [an_endpoint("ep_1"), an_endpoint("ep_2")]
    stores.events.append([(event, [new_delivery(event, e, event.timestamp) for e in endpoints]) for event in batch])
    assert [stores.events.get(TENANT, event.id) for event in batch] == batch
    assert stores.events.get("tn_other", batch[0].id) is None


def test_an_appended_event_keeps_the_longest_expiry_asked_for(stores: Stores) -> None:
    event = a_logged_event()
    stores.events.append([(event, [])])
    stores.events.extend_expiry(TENANT, event.id, event.expires_at + 100)
    stores.events.extend_expiry(TENANT, event.id, event.expires_at + 50)
    stores.events.extend_expiry("tn_other", event.id, event.expires_at + 200)  # not theirs: nothing
    stored = stores.events.get(TENANT, event.id)
    assert stored is not None and stored.expires_at == event.expires_at + 100


def test_another_tenants_event_is_not_read_from_either_store(stores: Stores) -> None:
    stores.events.put(an_event())
    assert stores.events.get("tn_other", "evt_1") is None
