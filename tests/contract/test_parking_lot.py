"""ParkingLot: deliveries parked behind an endpoint's circuit, read back in event order from the endpoint's lot; a
crash between a record's write and the lot's is repaired by the next write for that delivery; and the parking
protocol (services/parking.py) that keeps a closing circuit from leaving anything behind. Alike on the fake and
on DynamoDB."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hookrelay.domain.circuit import CircuitState, park_order
from hookrelay.domain.clock import to_rfc3339
from hookrelay.domain.models import Delivery, Endpoint, EndpointState
from hookrelay.domain.status import DeadReason, DeliveryStatus
from hookrelay.services.parking import Parking
from hookrelay.services.ports import ParkedDelivery, ParkOutcome
from tests.support.builders import TENANT, a_delivery, an_endpoint, at
from tests.support.stores import Stores, crash_before_next_lot_write


def open_circuit(stores: Stores, endpoint_id: str = "ep_1") -> None:
    stores.endpoints.put(an_endpoint(endpoint_id))
    for n in range(3):
        stores.circuits.count_failure(TENANT, endpoint_id, f"dlv_f{n}")
    assert stores.circuits.open(an_endpoint(endpoint_id), at(0), at(60), threshold=3)


def parked_count(stores: Stores, endpoint_id: str = "ep_1") -> int:
    return stores.parking.count(endpoint_id, up_to=100).counted


def stored(stores: Stores, delivery_id: str = "dlv_1") -> Delivery:
    found = stores.deliveries.get(delivery_id)
    assert found is not None
    return found


def parked_ids(stores: Stores, endpoint_id: str = "ep_1", limit: int = 100) -> list[str]:
    return [p.id for p in stores.parking.parked(endpoint_id, limit)]


def park(stores: Stores, delivery: Delivery, attempt: int | None = 1) -> ParkOutcome:
    stores.deliveries.put_many([delivery])
    return stores.parking.park(delivery.id, TENANT, delivery.endpoint_id, attempt, at(5))


# --- park ---


def test_a_delivery_parks_behind_an_open_circuit_and_is_counted(stores: Stores) -> None:
    open_circuit(stores)
    assert park(stores, a_delivery()) is ParkOutcome.PARKED
    assert stored(stores).parked_at == at(5) and stored(stores).status is DeliveryStatus.QUEUED
    assert parked_ids(stores) == ["dlv_1"] and parked_count(stores) == 1


def test_parking_twice_says_already_parked_and_counts_once(stores: Stores) -> None:
    open_circuit(stores)
    park(stores, a_delivery())
    assert stores.parking.park("dlv_1", TENANT, "ep_1", 1, at(6)) is ParkOutcome.ALREADY_PARKED
    assert stores.parking.park("dlv_1", TENANT, "ep_1", None, at(6)) is ParkOutcome.ALREADY_PARKED
    assert parked_count(stores) == 1 and stored(stores).parked_at == at(5)


def test_a_crash_between_the_mark_and_the_lot_entry_is_repaired_by_parking_again(stores: Stores) -> None:
    open_circuit(stores)
    stores.deliveries.put_many([a_delivery()])
    crash_before_next_lot_write(stores, "put")
    with pytest.raises(RuntimeError):
        stores.parking.park("dlv_1", TENANT, "ep_1", 1, at(5))
    assert stored(stores).parked_at == at(5) and parked_ids(stores) == []  # marked, not in the lot
    # The message comes back (its handler crashed): whichever attempt it carries, the entry is written.
    assert stores.parking.park("dlv_1", TENANT, "ep_1", 1, at(6)) is ParkOutcome.ALREADY_PARKED
    assert parked_ids(stores) == ["dlv_1"] and parked_count(stores) == 1


def test_a_delivery_read_with_no_record_is_stored_parked(stores: Stores) -> None:
    """A first message's delivery as its event made it (no record yet): the park stores it parked, and enters it."""
    open_circuit(stores)
    unstored = a_delivery()
    assert stores.parking.park("dlv_1", TENANT, "ep_1", 1, at(5), unstored) is ParkOutcome.PARKED
    assert stored(stores) == replace(unstored, parked_at=at(5))
    assert parked_ids(stores) == ["dlv_1"] and parked_count(stores) == 1


def test_a_crash_after_storing_a_delivery_parked_is_repaired_by_parking_again(stores: Stores) -> None:
    open_circuit(stores)
    crash_before_next_lot_write(stores, "put")
    with pytest.raises(RuntimeError):
        stores.parking.park("dlv_1", TENANT, "ep_1", 1, at(5), a_delivery())
    assert stored(stores).parked_at == at(5) and parked_ids(stores) == []  # stored marked, not in the lot
    # The message comes back, and reads the delivery from its event again: the record found decides.
    assert stores.parking.park("dlv_1", TENANT, "ep_1", 1, at(6), a_delivery()) is ParkOutcome.ALREADY_PARKED
    assert parked_ids(stores) == ["dlv_1"] and stored(stores).parked_at == at(5)


def test_a_delivery_read_with_no_record_but_stored_since_parks_as_its_record_says(stores: Stores) -> None:
    """Stored since it was read (its first attempt made meanwhile): the record, not the read, decides."""
    open_circuit(stores)
    unstored = a_delivery()
    stores.deliveries.put_many([replace(unstored, status=DeliveryStatus.RETRYING, attempt_count=1)])
    assert stores.parking.park("dlv_1", TENANT, "ep_1", 1, at(5), unstored) is ParkOutcome.NOT_PARKABLE
    assert stored(stores).parked_at is None and parked_ids(stores) == []


@pytest.mark.parametrize(
    ("fields", "attempt"),
    [
        ({"status": DeliveryStatus.ATTEMPTING, "attempt_count": 1}, 1),  # taken
        ({"status": DeliveryStatus.RETRYING, "attempt_count": 1}, 1),  # attempt 1 made
        ({"status": DeliveryStatus.DELIVERED, "attempt_count": 1}, 2),  # ended
        ({"status": DeliveryStatus.DEAD, "attempt_count": 3}, None),  # ended, whichever attempt
        ({"endpoint_id": "ep_other"}, 1),  # another endpoint's delivery
    ],
    ids=["attempting", "made", "delivered", "dead", "other-endpoint"],
)
def test_a_delivery_that_moved_on_is_not_parkable(
    stores: Stores, fields: dict[str, object], attempt: int | None
) -> None:
    open_circuit(stores)
    delivery = a_delivery(**fields)
    stores.deliveries.put_many([delivery])
    assert stores.parking.park("dlv_1", TENANT, "ep_1", attempt, at(5)) is ParkOutcome.NOT_PARKABLE
    assert stored(stores) == delivery and parked_count(stores) == 0


def test_an_unknown_delivery_is_not_parkable(stores: Stores) -> None:
    open_circuit(stores)
    assert stores.parking.park("dlv_missing", TENANT, "ep_1", 1, at(5)) is ParkOutcome.NOT_PARKABLE
    assert stores.deliveries.get("dlv_missing") is None and parked_count(stores) == 0


def test_parking_whichever_attempt_parks_a_retrying_delivery(stores: Stores) -> None:
    open_circuit(stores)
    assert park(stores, a_delivery(status=DeliveryStatus.RETRYING, attempt_count=2), attempt=None) is (
        ParkOutcome.PARKED
    )
    assert parked_ids(stores) == ["dlv_1"]


def test_a_delivery_without_an_event_order_parks_in_the_order_it_parked(stores: Stores) -> None:
    open_circuit(stores)
    park(stores, a_delivery(event_order=None))
    assert stored(stores).event_order == f"{to_rfc3339(at(5))}#dlv_1"


# --- parked: the lot, oldest event first ---


def test_parked_lists_the_endpoints_parked_deliveries_oldest_event_first(stores: Stores) -> None:
    open_circuit(stores)
    open_circuit(stores, "ep_other")
    for n, seconds in [(1, 30), (2, 10), (3, 20)]:
        park(stores, a_delivery(f"dlv_{n}", event_order=park_order(at(seconds), f"evt_{n}")))
    park(stores, a_delivery("dlv_9", endpoint_id="ep_other"))
    assert parked_ids(stores) == ["dlv_2", "dlv_3", "dlv_1"]
    assert parked_ids(stores, limit=2) == ["dlv_2", "dlv_3"]
    assert parked_ids(stores, "ep_other") == ["dlv_9"]


def test_parked_shows_what_the_drain_needs_of_each_delivery(stores: Stores) -> None:
    open_circuit(stores)
    delivery = a_delivery(status=DeliveryStatus.RETRYING, attempt_count=2, first_attempt_at=at(-50))
    park(stores, delivery, attempt=3)
    assert stores.parking.parked("ep_1", 10) == [
        ParkedDelivery(
            id="dlv_1",
            tenant_id=TENANT,
            status=DeliveryStatus.RETRYING,
            attempt_count=2,
            created_at=delivery.created_at,
            first_attempt_at=at(-50),
            event_order=delivery.event_order or "",
            message_group_id=delivery.message_group_id,
        )
    ]


# --- claim ---


def test_claiming_a_parked_delivery_takes_it_out_of_the_lot_for_its_attempt(stores: Stores) -> None:
    open_circuit(stores)
    park(stores, a_delivery())
    claimed = stores.parking.claim("dlv_1", TENANT, "ep_1", 1, at(10))
    assert claimed is not None and claimed == stored(stores)
    assert claimed.status is DeliveryStatus.ATTEMPTING and claimed.attempt_count == 1
    assert claimed.claimed_at == claimed.first_attempt_at == at(10) and claimed.parked_at is None
    assert parked_ids(stores) == [] and parked_count(stores) == 0


def test_a_parked_delivery_is_claimed_once(stores: Stores) -> None:
    open_circuit(stores)
    park(stores, a_delivery())
    assert stores.parking.claim("dlv_1", TENANT, "ep_1", 1, at(10)) is not None
    assert stores.parking.claim("dlv_1", TENANT, "ep_1", 1, at(11)) is None
    assert stored(stores).claimed_at == at(10) and parked_count(stores) == 0


@pytest.mark.parametrize(
    ("tenant", "endpoint", "attempt"), [(TENANT, "ep_1", 2), (TENANT, "ep_other", 1), ("tn_other", "ep_1", 1)]
)
def test_a_claim_that_does_not_fit_the_parked_delivery_is_refused(
    stores: Stores, tenant: str, endpoint: str, attempt: int
) -> None:
    open_circuit(stores)
    park(stores, a_delivery())
    assert stores.parking.claim("dlv_1", tenant, endpoint, attempt, at(10)) is None
    assert parked_ids(stores) == ["dlv_1"] and parked_count(stores) == 1


def test_a_probes_claim_keeps_the_lot_entry_until_the_attempt_is_settled(stores: Stores) -> None:
    """So that a probe whose worker dies before recording finds the delivery again, the oldest in the lot."""
    open_circuit(stores)
    park(stores, a_delivery())
    claimed = stores.parking.claim("dlv_1", TENANT, "ep_1", 1, at(10), keep_entry=True)
    assert claimed is not None and claimed.status is DeliveryStatus.ATTEMPTING and claimed.parked_at is None
    [entry] = stores.parking.parked("ep_1", 10)
    assert entry.id == "dlv_1"
    stores.parking.forget(entry, "ep_1")
    assert parked_ids(stores) == [] and parked_count(stores) == 0


def test_a_delivery_that_is_not_parked_is_not_claimed_by_the_drain(stores: Stores) -> None:
    open_circuit(stores)
    stores.deliveries.put_many([a_delivery()])
    assert stores.parking.claim("dlv_1", TENANT, "ep_1", 1, at(10)) is None
    assert stored(stores).status is DeliveryStatus.QUEUED and parked_count(stores) == 0


# --- end ---


def test_ending_a_parked_delivery_takes_it_out_of_the_lot(stores: Stores) -> None:
    open_circuit(stores)
    park(stores, a_delivery(status=DeliveryStatus.RETRYING, attempt_count=2, next_attempt_at=at(50)), attempt=None)
    [read] = stores.parking.parked("ep_1", 10)
    ended = stores.parking.end(read, "ep_1", DeliveryStatus.DEAD, at(20), 4242)
    assert ended is not None and ended == stored(stores)
    assert ended.status is DeliveryStatus.DEAD and ended.completed_at == ended.updated_at == at(20)
    assert ended.expires_at == 4242 and ended.next_attempt_at is None and ended.parked_at is None
    assert parked_ids(stores) == [] and parked_count(stores) == 0


def test_a_dead_ending_writes_its_reason_and_counted_mark_with_it(stores: Stores) -> None:
    open_circuit(stores)
    park(stores, a_delivery())
    [read] = stores.parking.parked("ep_1", 10)
    ended = stores.parking.end(read, "ep_1", DeliveryStatus.DEAD, at(20), 4242, dead_reason=DeadReason.HORIZON)
    assert ended is not None and ended == stored(stores)
    assert ended.dead_reason is DeadReason.HORIZON and ended.dead_lettered_at == at(20)


def test_only_a_dead_ending_has_a_reason(stores: Stores) -> None:
    open_circuit(stores)
    park(stores, a_delivery())
    [read] = stores.parking.parked("ep_1", 10)
    with pytest.raises(ValueError, match="no dead reason"):
        stores.parking.end(read, "ep_1", DeliveryStatus.CANCELLED, at(20), 1, dead_reason=DeadReason.HORIZON)
    assert stored(stores).parked_at is not None and parked_count(stores) == 1


def test_a_parked_delivery_that_moved_on_since_it_was_read_is_not_ended(stores: Stores) -> None:
    open_circuit(stores)
    park(stores, a_delivery())
    [read] = stores.parking.parked("ep_1", 10)
    assert stores.parking.claim("dlv_1", TENANT, "ep_1", 1, at(10)) is not None  # the drain took it
    assert stores.parking.end(read, "ep_1", DeliveryStatus.DEAD, at(20), 1) is None
    assert stored(stores).status is DeliveryStatus.ATTEMPTING and parked_count(stores) == 0


def test_a_parked_delivery_read_at_another_attempt_is_not_ended(stores: Stores) -> None:
    open_circuit(stores)
    park(stores, a_delivery(status=DeliveryStatus.RETRYING, attempt_count=2), attempt=None)
    [read] = stores.parking.parked("ep_1", 10)
    stale = replace(read, attempt_count=1)
    assert stores.parking.end(stale, "ep_1", DeliveryStatus.DEAD, at(20), 1) is None
    assert stored(stores).status is DeliveryStatus.RETRYING and parked_count(stores) == 1


# --- a crash after the record left the lot, before its entry did ---


def test_a_stale_entry_left_by_a_crash_after_the_claim_goes_at_the_next_claim(stores: Stores) -> None:
    open_circuit(stores)
    park(stores, a_delivery())
    crash_before_next_lot_write(stores, "drop")
    with pytest.raises(RuntimeError):
        stores.parking.claim("dlv_1", TENANT, "ep_1", 1, at(10))
    assert stored(stores).status is DeliveryStatus.ATTEMPTING and parked_ids(stores) == ["dlv_1"]
    # The drain releases it again; its claim is refused (the attempt is taken) and drops the stale entry.
    assert stores.parking.claim("dlv_1", TENANT, "ep_1", 1, at(11)) is None
    assert parked_ids(stores) == [] and stored(stores).claimed_at == at(10)


def test_a_stale_entry_left_by_a_crash_after_an_end_goes_at_the_next_end(stores: Stores) -> None:
    open_circuit(stores)
    park(stores, a_delivery())
    [read] = stores.parking.parked("ep_1", 10)
    crash_before_next_lot_write(stores, "drop")
    with pytest.raises(RuntimeError):
        stores.parking.end(read, "ep_1", DeliveryStatus.DEAD, at(20), 1)
    assert stored(stores).status is DeliveryStatus.DEAD and parked_ids(stores) == ["dlv_1"]
    assert stores.parking.end(read, "ep_1", DeliveryStatus.DEAD, at(21), 1) is None
    assert parked_ids(stores) == [] and stored(stores).completed_at == at(20)


def test_a_claim_refused_for_another_attempt_keeps_the_entry_of_a_delivery_still_parked(stores: Stores) -> None:
    open_circuit(stores)
    park(stores, a_delivery())
    assert stores.parking.claim("dlv_1", TENANT, "ep_1", 2, at(10)) is None  # a duplicate of a later attempt
    assert parked_ids(stores) == ["dlv_1"]


# --- unpark ---


def test_unpark_takes_a_parked_delivery_back_out_unattempted(stores: Stores) -> None:
    open_circuit(stores)
    park(stores, a_delivery())
    assert stores.parking.unpark("dlv_1", "ep_other") is False
    assert stores.parking.unpark("dlv_1", "ep_1") is True
    assert stored(stores).parked_at is None and stored(stores).status is DeliveryStatus.QUEUED
    assert parked_ids(stores) == [] and stores.parking.unpark("dlv_1", "ep_1") is False
    claimed = stores.deliveries.claim("dlv_1", TENANT, 1, at(10), at(0))  # attempted as any queued delivery
    assert claimed is not None and claimed.status is DeliveryStatus.ATTEMPTING


# --- the parking protocol: a circuit that closes as a delivery parks ---


def park_behind(stores: Stores, delivery_id: str = "dlv_1", endpoint_id: str = "ep_1") -> ParkOutcome:
    return protocol(stores).park(delivery_id, TENANT, endpoint_id, 1, at(5))


def protocol(stores: Stores) -> Parking:
    return Parking(stores.parking, stores.circuits, stores.endpoints)


def draining(stores: Stores) -> Endpoint:
    open_circuit(stores)
    endpoint = stores.endpoints.get(TENANT, "ep_1")
    assert endpoint is not None and stores.circuits.start_drain(endpoint, endpoint.circuit_step)
    return endpoint


def test_behind_a_closed_circuit_a_delivery_is_taken_back_out(stores: Stores) -> None:
    stores.endpoints.put(an_endpoint())
    stores.deliveries.put_many([a_delivery()])
    assert park_behind(stores) is ParkOutcome.CIRCUIT_CLOSED
    assert stored(stores).parked_at is None and parked_ids(stores) == [] and parked_count(stores) == 0


def test_behind_a_disabled_endpoint_or_an_unknown_one_nothing_stays_parked(stores: Stores) -> None:
    open_circuit(stores)
    read = stores.endpoints.get(TENANT, "ep_1")
    assert read is not None
    off = replace(read, state=EndpointState.DISABLED, updated_at=at(1))
    assert stores.endpoints.replace(off, expected_updated_at=read.updated_at)
    stores.deliveries.put_many([a_delivery(), a_delivery("dlv_2", endpoint_id="ep_missing")])
    assert park_behind(stores) is ParkOutcome.CIRCUIT_CLOSED
    assert park_behind(stores, "dlv_2", "ep_missing") is ParkOutcome.CIRCUIT_CLOSED
    assert parked_ids(stores) == [] and parked_ids(stores, "ep_missing") == []


def test_a_delivery_parked_while_the_circuit_closes_holds_it_open(stores: Stores) -> None:
    endpoint = draining(stores)
    assert stores.circuits.begin_close(endpoint, endpoint.circuit_step)  # the closer marks, then reads the lot
    stores.deliveries.put_many([a_delivery()])
    assert park_behind(stores) is ParkOutcome.PARKED  # parked after the closer's read: it clears the mark
    assert not stores.circuits.close(endpoint, endpoint.circuit_step)  # so the close fails
    after = stores.endpoints.get(TENANT, "ep_1")
    assert after is not None and after.circuit is CircuitState.DRAINING and parked_ids(stores) == ["dlv_1"]


def test_the_drain_closes_only_an_empty_lot(stores: Stores) -> None:
    endpoint = draining(stores)
    park(stores, a_delivery())
    assert not protocol(stores).close_if_empty(endpoint, endpoint.circuit_step)
    stores.parking.claim("dlv_1", TENANT, "ep_1", 1, at(10))
    assert protocol(stores).close_if_empty(endpoint, endpoint.circuit_step)
    after = stores.endpoints.get(TENANT, "ep_1")
    assert after is not None and after.circuit is CircuitState.CLOSED


# --- get_many, and the count ---


def test_get_many_reads_those_that_exist_once_each(stores: Stores) -> None:
    deliveries = [a_delivery(f"dlv_{n:03}") for n in range(120)]  # past one DynamoDB batch of 100
    stores.deliveries.put_many(deliveries)
    wanted = [d.id for d in deliveries] + ["dlv_000", "dlv_missing"]
    found = stores.parking.get_many(wanted)
    assert sorted(found, key=lambda d: d.id) == deliveries


def test_the_parked_count_says_what_the_lot_holds(stores: Stores) -> None:
    open_circuit(stores)
    for n in range(1, 5):
        park(stores, a_delivery(f"dlv_{n}", event_order=park_order(at(n), f"evt_{n}")))
    assert stores.parking.park("dlv_1", TENANT, "ep_1", 1, at(6)) is ParkOutcome.ALREADY_PARKED
    stores.parking.claim("dlv_1", TENANT, "ep_1", 1, at(10))
    [second, *_] = stores.parking.parked("ep_1", 1)
    stores.parking.end(second, "ep_1", DeliveryStatus.CANCELLED, at(11), 1)
    assert parked_ids(stores) == ["dlv_3", "dlv_4"] and parked_count(stores) == 2


def test_the_parked_count_stops_at_what_it_may_read(stores: Stores) -> None:
    open_circuit(stores)
    for n in range(1, 6):
        park(stores, a_delivery(f"dlv_{n}", event_order=park_order(at(n), f"evt_{n}")))
    counts = [stores.parking.count("ep_1", up_to).counted for up_to in (1, 3, 5, 6, 100)]
    assert counts == [1, 3, 5, 5, 5]
