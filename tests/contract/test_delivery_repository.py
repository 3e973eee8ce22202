"""DeliveryRepository: claims, attempts and status moves are conditional writes, alike on the fake and DynamoDB."""

from __future__ import annotations

import pytest

from hookrelay.domain.circuit import CircuitState
from hookrelay.domain.classification import Outcome
from hookrelay.domain.models import Attempt, Delivery
from hookrelay.domain.status import DeadReason, DeliveryStatus
from hookrelay.services.ports import AttemptRecord, ParkOutcome, Unclaimed
from tests.support.builders import TENANT, a_delivery, an_endpoint, at
from tests.support.stores import Stores

STALE_BEFORE = at(-60)  # claims older than a minute are abandoned


def stored(stores: Stores, delivery_id: str = "dlv_1") -> Delivery:
    found = stores.deliveries.get(delivery_id)
    assert found is not None
    return found


def claimed(stores: Stores, delivery: Delivery | None = None, attempt: int = 1, now_s: float = 0) -> Delivery:
    delivery = delivery or a_delivery()
    stores.deliveries.put_many([delivery])
    claim = stores.deliveries.claim(delivery.id, TENANT, attempt, at(now_s), STALE_BEFORE)
    assert claim is not None
    return claim


def an_attempt(number: int = 1, started_s: float = 0, outcome: Outcome = Outcome.DELIVERED) -> Attempt:
    code = 200 if outcome is Outcome.DELIVERED else 500
    return Attempt(number=number, started_at=at(started_s), latency_ms=5, status_code=code, outcome=outcome)


def failed_record(number: int = 1) -> AttemptRecord:
    return AttemptRecord(an_attempt(number, outcome=Outcome.RETRY), DeliveryStatus.RETRYING, at(10), None, None)


# --- put_many, get ---


def test_put_many_then_get_returns_each_delivery_as_written(stores: Stores) -> None:
    first, second = a_delivery("dlv_1"), a_delivery("dlv_2", status=DeliveryStatus.DEAD, attempt_count=3)
    stores.deliveries.put_many([first, second])
    assert stored(stores, "dlv_1") == first and stored(stores, "dlv_2") == second


def test_get_of_an_unknown_delivery_is_none(stores: Stores) -> None:
    assert stores.deliveries.get("dlv_missing") is None


# --- claim ---


def test_claiming_a_queued_delivery_marks_it_attempting_for_that_attempt(stores: Stores) -> None:
    claim = claimed(stores, now_s=5)
    assert claim.status is DeliveryStatus.ATTEMPTING and claim.attempt_count == 1
    assert claim.claimed_at == claim.updated_at == claim.first_attempt_at == at(5)
    assert stored(stores) == claim


def test_claiming_a_retrying_delivery_keeps_its_first_attempt_time(stores: Stores) -> None:
    retrying = a_delivery(status=DeliveryStatus.RETRYING, attempt_count=2, first_attempt_at=at(-100))
    claim = claimed(stores, retrying, attempt=3)
    assert claim.attempt_count == 3 and claim.first_attempt_at == at(-100)


@pytest.mark.parametrize(
    ("fields", "attempt", "tenant"),
    [
        ({}, 2, TENANT),  # attempt 1 not made yet
        ({"status": DeliveryStatus.RETRYING, "attempt_count": 2}, 2, TENANT),  # attempt 2 made already
        ({"status": DeliveryStatus.DELIVERED, "attempt_count": 1}, 2, TENANT),  # ended
        ({"status": DeliveryStatus.CANCELLED}, 1, TENANT),  # ended
        ({}, 1, "tn_other"),  # another tenant's
    ],
    ids=["early", "made", "delivered", "cancelled", "other-tenant"],
)
def test_a_claim_that_does_not_fit_the_delivery_is_refused_and_changes_nothing(
    stores: Stores, fields: dict[str, object], attempt: int, tenant: str
) -> None:
    delivery = a_delivery(**fields)
    stores.deliveries.put_many([delivery])
    assert stores.deliveries.claim(delivery.id, tenant, attempt, at(0), STALE_BEFORE) is None
    assert stored(stores) == delivery


def test_a_claim_of_an_unknown_delivery_is_refused(stores: Stores) -> None:
    assert stores.deliveries.claim("dlv_missing", TENANT, 1, at(0), STALE_BEFORE) is None
    assert stores.deliveries.get("dlv_missing") is None


def test_a_claim_held_by_another_worker_is_refused_until_it_is_stale(stores: Stores) -> None:
    first = claimed(stores, now_s=0)
    assert stores.deliveries.claim("dlv_1", TENANT, 1, at(1), STALE_BEFORE) is None
    assert stored(stores) == first
    retaken = stores.deliveries.claim("dlv_1", TENANT, 1, at(120), stale_before=at(30))
    assert retaken is not None and retaken.claimed_at == at(120) and retaken.first_attempt_at == at(0)


def test_a_parked_delivery_cannot_be_claimed_off_the_queue(stores: Stores) -> None:
    stores.endpoints.put(an_endpoint(circuit_failures=0))
    for n in range(3):
        stores.circuits.count_failure(TENANT, "ep_1", f"dlv_f{n}")
    assert stores.circuits.open(an_endpoint(), at(0), at(60), threshold=3)
    stores.deliveries.put_many([a_delivery()])
    assert stores.parking.park("dlv_1", TENANT, "ep_1", 1, at(1)) is ParkOutcome.PARKED
    assert stores.deliveries.claim("dlv_1", TENANT, 1, at(2), STALE_BEFORE) is None
    assert stored(stores).status is DeliveryStatus.QUEUED
    assert stores.endpoints.get(TENANT, "ep_1").circuit is CircuitState.OPEN  # type: ignore[union-attr]


# --- record_attempt ---


def test_recording_an_attempt_appends_it_and_moves_the_status_on(stores: Stores) -> None:
    claimed(stores)
    record = AttemptRecord(an_attempt(1, started_s=0), DeliveryStatus.DELIVERED, None, at(1), 123456)
    assert stores.deliveries.record_attempt("dlv_1", TENANT, 1, record)
    after = stored(stores)
    assert after.status is DeliveryStatus.DELIVERED and after.attempts == [record.attempt]
    assert after.completed_at == at(1) and after.expires_at == 123456 and after.next_attempt_at is None
    assert after.claimed_at is None and after.updated_at == at(1)


def test_a_retrying_attempt_notes_the_next_attempt_and_the_attempt_time(stores: Stores) -> None:
    claimed(stores, now_s=0)
    assert stores.deliveries.record_attempt("dlv_1", TENANT, 1, failed_record(1))
    after = stored(stores)
    assert after.status is DeliveryStatus.RETRYING and after.next_attempt_at == at(10)
    assert after.updated_at == at(0) and after.completed_at is None and after.claimed_at is None


def test_a_later_attempt_clears_what_the_earlier_one_set(stores: Stores) -> None:
    claimed(stores)
    stores.deliveries.record_attempt("dlv_1", TENANT, 1, failed_record(1))
    assert stores.deliveries.claim("dlv_1", TENANT, 2, at(10), STALE_BEFORE) is not None
    done = AttemptRecord(an_attempt(2, started_s=10), DeliveryStatus.DELIVERED, None, at(11), 99)
    assert stores.deliveries.record_attempt("dlv_1", TENANT, 2, done)
    after = stored(stores)
    assert after.next_attempt_at is None and [a.number for a in after.attempts] == [1, 2]


@pytest.mark.parametrize("attempt", [1, 2])
def test_an_attempt_without_the_claim_is_not_recorded(stores: Stores, attempt: int) -> None:
    delivery = a_delivery()
    stores.deliveries.put_many([delivery])
    if attempt == 2:  # the claim is for attempt 1, not 2
        delivery = claimed(stores)
    assert not stores.deliveries.record_attempt("dlv_1", TENANT, 2, failed_record(2))
    assert stored(stores) == delivery


def test_an_attempt_of_an_unknown_delivery_is_not_recorded(stores: Stores) -> None:
    assert not stores.deliveries.record_attempt("dlv_missing", TENANT, 1, failed_record(1))
    assert stores.deliveries.get("dlv_missing") is None


# --- record_attempt of an attempt made unclaimed (a first attempt off the queue: domain.lifecycle.claims_late) ---


def delivered_record(number: int = 1, started_s: float = 0) -> AttemptRecord:
    return AttemptRecord(an_attempt(number, started_s=started_s), DeliveryStatus.DELIVERED, None, at(1), 99)


def test_an_unclaimed_attempt_is_claimed_and_recorded_by_the_one_write(stores: Stores) -> None:
    stores.deliveries.put_many([a_delivery()])
    assert stores.deliveries.record_attempt("dlv_1", TENANT, 1, delivered_record(started_s=3), Unclaimed())
    after = stored(stores)
    assert (after.status, after.attempt_count, after.first_attempt_at) == (DeliveryStatus.DELIVERED, 1, at(3))
    assert after.attempts == [an_attempt(1, started_s=3)] and after.claimed_at is None


def test_an_unclaimed_attempt_is_recorded_under_its_own_late_claim(stores: Stores) -> None:
    claimed(stores, now_s=1)  # the late claim, at 1 s
    assert stores.deliveries.record_attempt("dlv_1", TENANT, 1, delivered_record(), Unclaimed(late_claim_at=at(1)))
    assert stored(stores).status is DeliveryStatus.DELIVERED


@pytest.mark.parametrize(
    ("why", "late_claim_at"),
    [("claimed by another", None), ("claimed by another", at(2)), ("made already", None), ("parked", None)],
)
def test_an_unclaimed_attempt_is_not_recorded_over_what_changed_the_delivery(
    stores: Stores, why: str, late_claim_at: object
) -> None:
    if why == "claimed by another":
        claimed(stores, now_s=1)
    elif why == "made already":
        stores.deliveries.put_many([a_delivery()])
        assert stores.deliveries.record_attempt("dlv_1", TENANT, 1, failed_record(1), Unclaimed())
    else:
        stores.deliveries.put_many([a_delivery(parked_at=at(0))])
    before = stored(stores)
    unclaimed = Unclaimed(late_claim_at)  # type: ignore[arg-type]
    assert not stores.deliveries.record_attempt("dlv_1", TENANT, 1, delivered_record(), unclaimed)
    assert stored(stores) == before


def test_an_unclaimed_attempt_of_another_tenant_is_not_recorded(stores: Stores) -> None:
    stores.deliveries.put_many([a_delivery()])
    assert not stores.deliveries.record_attempt("dlv_1", "tn_other", 1, delivered_record(), Unclaimed())
    assert stored(stores).status is DeliveryStatus.QUEUED


def test_an_unstored_deliverys_unclaimed_attempt_creates_its_record_settled(stores: Stores) -> None:
    """Read with no record (its event's log entry stands for it), the happy path's one write stores it settled."""
    unstored = a_delivery()
    record = delivered_record(started_s=3)
    assert stores.deliveries.record_attempt("dlv_1", TENANT, 1, record, Unclaimed(unstored=unstored))
    assert stored(stores) == record.applied_to(unstored, 1)


@pytest.mark.parametrize("since", ["stored as read", "cancelled"])
def test_an_unstored_deliverys_attempt_finding_a_record_is_recorded_as_that_record_allows(
    stores: Stores, since: str
) -> None:
    """Stored since it was read (by a park, a cancel, another function's first write), the record decides: as
    read, the attempt is recorded on it; moved on, it is not, and nothing changes."""
    unstored = a_delivery()
    stores.deliveries.put_many([unstored])
    if since == "cancelled":
        assert stores.deliveries.set_status("dlv_1", TENANT, DeliveryStatus.CANCELLED, at(1), 99)
    before = stored(stores)
    record = delivered_record(started_s=3)
    applied = stores.deliveries.record_attempt("dlv_1", TENANT, 1, record, Unclaimed(unstored=unstored))
    assert applied is (since == "stored as read")
    assert stored(stores) == (record.applied_to(before, 1) if applied else before)


# --- set_status ---


def test_set_status_moves_the_delivery_and_clears_the_claim_and_the_next_attempt(stores: Stores) -> None:
    claimed(stores)
    stores.deliveries.record_attempt("dlv_1", TENANT, 1, failed_record(1))
    assert stores.deliveries.set_status("dlv_1", TENANT, DeliveryStatus.DEAD, at(20), 777)
    after = stored(stores)
    assert after.status is DeliveryStatus.DEAD and after.updated_at == after.completed_at == at(20)
    assert after.expires_at == 777 and after.next_attempt_at is None and after.claimed_at is None


def test_set_status_to_a_live_status_leaves_completed_at_and_expiry_alone(stores: Stores) -> None:
    stores.deliveries.put_many([a_delivery(status=DeliveryStatus.DEAD, completed_at=at(-5), expires_at=5)])
    assert stores.deliveries.set_status("dlv_1", TENANT, DeliveryStatus.QUEUED, at(0), None)
    after = stored(stores)
    assert after.status is DeliveryStatus.QUEUED and after.completed_at == at(-5) and after.expires_at == 5


def test_set_status_with_an_expected_status_applies_only_from_it(stores: Stores) -> None:
    stores.deliveries.put_many([a_delivery()])
    assert not stores.deliveries.set_status(
        "dlv_1", TENANT, DeliveryStatus.CANCELLED, at(1), 9, expected=DeliveryStatus.RETRYING
    )
    assert stored(stores) == a_delivery()
    assert stores.deliveries.set_status(
        "dlv_1", TENANT, DeliveryStatus.CANCELLED, at(1), 9, expected=DeliveryStatus.QUEUED
    )
    assert stored(stores).status is DeliveryStatus.CANCELLED


@pytest.mark.parametrize("expected", [None, DeliveryStatus.QUEUED])
def test_set_status_of_an_unknown_delivery_is_refused_and_creates_nothing(
    stores: Stores, expected: DeliveryStatus | None
) -> None:
    assert not stores.deliveries.set_status("dlv_missing", TENANT, DeliveryStatus.DEAD, at(0), 1, expected=expected)
    assert stores.deliveries.get("dlv_missing") is None


# --- mark_dead_lettered ---


def test_a_dead_delivery_is_marked_dead_lettered_once_with_its_first_reason(stores: Stores) -> None:
    stores.deliveries.put_many([a_delivery(status=DeliveryStatus.DEAD)])
    assert stores.deliveries.mark_dead_lettered("dlv_1", at(1), DeadReason.POISON)
    assert not stores.deliveries.mark_dead_lettered("dlv_1", at(2), DeadReason.EXHAUSTED)
    assert stored(stores).dead_lettered_at == at(1)
    assert stored(stores).dead_reason is DeadReason.POISON


@pytest.mark.parametrize("status", [DeliveryStatus.RETRYING, DeliveryStatus.DELIVERED, DeliveryStatus.CANCELLED])
def test_only_a_dead_delivery_is_marked_dead_lettered(stores: Stores, status: DeliveryStatus) -> None:
    stores.deliveries.put_many([a_delivery(status=status)])
    assert not stores.deliveries.mark_dead_lettered("dlv_1", at(1), DeadReason.EXHAUSTED)
    assert stored(stores).dead_lettered_at is None and stored(stores).dead_reason is None


def test_an_unknown_delivery_is_not_marked_dead_lettered(stores: Stores) -> None:
    assert not stores.deliveries.mark_dead_lettered("dlv_missing", at(1), DeadReason.EXHAUSTED)
    assert stores.deliveries.get("dlv_missing") is None


# --- mark_recovered ---


@pytest.mark.parametrize("status", [DeliveryStatus.DEAD, DeliveryStatus.CANCELLED])
def test_a_dead_or_cancelled_delivery_is_marked_recovered_once_by_its_first_replay(
    stores: Stores, status: DeliveryStatus
) -> None:
    stores.deliveries.put_many([a_delivery(status=status)])
    assert stores.deliveries.mark_recovered("dlv_1", TENANT, "dlv_replay_1", at(1))
    assert not stores.deliveries.mark_recovered("dlv_1", TENANT, "dlv_replay_2", at(2))
    assert not stores.deliveries.mark_recovered("dlv_1", TENANT, "dlv_replay_1", at(3))  # a message come back
    recovered = stored(stores)
    assert (recovered.status, recovered.recovered_by, recovered.recovered_at) == (status, "dlv_replay_1", at(1))


@pytest.mark.parametrize("status", [DeliveryStatus.QUEUED, DeliveryStatus.RETRYING, DeliveryStatus.DELIVERED])
def test_only_a_dead_or_cancelled_delivery_is_marked_recovered(stores: Stores, status: DeliveryStatus) -> None:
    stores.deliveries.put_many([a_delivery(status=status)])
    assert not stores.deliveries.mark_recovered("dlv_1", TENANT, "dlv_replay_1", at(1))
    assert stored(stores).recovered_by is None


def test_another_tenants_or_an_unknown_delivery_is_not_marked_recovered(stores: Stores) -> None:
    stores.deliveries.put_many([a_delivery(status=DeliveryStatus.DEAD)])
    assert not stores.deliveries.mark_recovered("dlv_1", "ten_other", "dlv_replay_1", at(1))
    assert not stores.deliveries.mark_recovered("dlv_missing", TENANT, "dlv_replay_1", at(1))
    assert stored(stores).recovered_by is None and stores.deliveries.get("dlv_missing") is None


# --- put_new: idempotent creation ---


def test_put_new_creates_a_delivery_once(stores: Stores) -> None:
    assert stores.deliveries.put_new(a_delivery())
    assert not stores.deliveries.put_new(a_delivery(status=DeliveryStatus.DEAD))
    assert stored(stores).status is DeliveryStatus.QUEUED
