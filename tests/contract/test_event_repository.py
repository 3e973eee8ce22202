"""EventRepository: events, their expiry that only grows, and the per-(tenant, ordering key) sequence, alike on the
fake and on DynamoDB."""

from __future__ import annotations

from dataclasses import replace

from tests.support.builders import TENANT, an_event
from tests.support.stores import Stores


def test_put_then_get_returns_the_event_as_written(stores: Stores) -> None:
    event = an_event(ordering_key="order-1", sequence=7)
    stores.events.put(event)
    assert stores.events.get("evt_1") == event
    assert stores.events.get("evt_missing") is None


def test_put_stores_an_event_once_and_says_whether_it_did(stores: Stores) -> None:
    first = an_event()
    assert stores.events.put(first)
    assert not stores.events.put(replace(first, type="other.type"))  # a retry of the request
    assert stores.events.get("evt_1") == first


def test_next_sequence_counts_from_one_per_tenant_and_ordering_key(stores: Stores) -> None:
    drawn = [stores.events.next_sequence(TENANT, "order-1") for _ in range(3)]
    assert drawn == [1, 2, 3]
    assert stores.events.next_sequence(TENANT, "order-2") == 1
    assert stores.events.next_sequence("tn_other", "order-1") == 1
    assert stores.events.next_sequence(TENANT, "order-1") == 4


def test_a_sequence_counter_is_never_read_as_an_event(stores: Stores) -> None:
    stores.events.next_sequence(TENANT, "order-1")
    assert stores.events.get(f"seq#{TENANT}#order-1") is None


def test_extend_expiry_lengthens_an_event_and_never_shortens_it(stores: Stores) -> None:
    event = an_event()
    stores.events.put(event)
    stores.events.extend_expiry("evt_1", event.expires_at + 100)
    stores.events.extend_expiry("evt_1", event.expires_at + 50)
    stored = stores.events.get("evt_1")
    assert stored is not None and stored.expires_at == event.expires_at + 100


def test_extend_expiry_of_an_unknown_event_creates_nothing(stores: Stores) -> None:
    stores.events.extend_expiry("evt_missing", 10**10)
    assert stores.events.get("evt_missing") is None


def test_put_many_stores_new_events_and_next_sequence_draws_several_numbers_at_once(stores: Stores) -> None:
    batch = [an_event(f"evt_{n}") for n in range(30)]  # past one BatchWriteItem's 25 items
    stores.events.put_many(batch)
    assert [stores.events.get(f"evt_{n}") for n in range(30)] == batch
    assert stores.events.next_sequence(TENANT, "order-1", 3) == 3  # 1, 2 and 3 drawn
    assert stores.events.next_sequence(TENANT, "order-1") == 4
    assert stores.events.next_sequence(TENANT, "order-1", 10) == 14
