"""EndpointRepository and FailingEndpoints: the endpoint service's conditional replace, the failing spell the
delivery path keeps, and the sweeper's notices, the same on the fake and on DynamoDB."""

from __future__ import annotations

from dataclasses import replace

from hookrelay.domain.circuit import CircuitState
from hookrelay.domain.models import Endpoint, EndpointState, FailureNotice
from tests.support.builders import TENANT, an_endpoint, at
from tests.support.stores import Stores


def stored(stores: Stores, endpoint_id: str = "ep_1") -> Endpoint:
    found = stores.endpoints.get(TENANT, endpoint_id)
    assert found is not None
    return found


def failing_endpoint(stores: Stores, endpoint_id: str = "ep_1", since_s: float = 0) -> Endpoint:
    stores.endpoints.put(an_endpoint(endpoint_id))
    assert stores.endpoints.mark_failing(TENANT, endpoint_id, at(since_s))
    return stored(stores, endpoint_id)


# --- put, get, list_for_tenant ---


def test_put_then_get_and_list_return_the_tenants_endpoints_only(stores: Stores) -> None:
    mine, other = an_endpoint("ep_1"), an_endpoint("ep_2", tenant_id="tn_other")
    stores.endpoints.put(mine)
    stores.endpoints.put(other)
    assert stored(stores) == mine
    assert stores.endpoints.list_for_tenant(TENANT) == [mine]
    assert stores.endpoints.get(TENANT, "ep_2") is None and stores.endpoints.get(TENANT, "ep_missing") is None


# --- replace ---


def test_replace_writes_the_change_when_nobody_wrote_since_the_read(stores: Stores) -> None:
    read = an_endpoint()
    stores.endpoints.put(read)
    changed = replace(read, description="changed", max_in_flight=4, updated_at=at(1))
    assert stores.endpoints.replace(changed, expected_updated_at=read.updated_at)
    assert stored(stores) == changed


def test_a_content_filter_is_kept_as_written_then_changed_and_removed_by_replace(stores: Stores) -> None:
    """Stored as its compact JSON text (numbers stay JSON's: no Decimal on the way back); None removes it."""
    read = an_endpoint(content_filter='{"data.amount":{"$gte":1.5},"type":"a"}')
    stores.endpoints.put(read)
    assert stored(stores) == read
    changed = replace(read, content_filter='{"data.n":{"$in":[1,2]}}', updated_at=at(1))
    assert stores.endpoints.replace(changed, expected_updated_at=read.updated_at)
    assert stored(stores).content_filter == '{"data.n":{"$in":[1,2]}}'
    cleared = replace(changed, content_filter=None, updated_at=at(2))
    assert stores.endpoints.replace(cleared, expected_updated_at=changed.updated_at)
    assert stored(stores) == cleared and stored(stores).content_filter is None


def test_replace_is_refused_when_the_endpoint_was_written_since_the_read(stores: Stores) -> None:
    read = an_endpoint()
    stores.endpoints.put(read)
    first = replace(read, description="first", updated_at=at(1))
    second = replace(read, description="second", updated_at=at(2))
    assert stores.endpoints.replace(first, expected_updated_at=read.updated_at)
    assert not stores.endpoints.replace(second, expected_updated_at=read.updated_at)
    assert stored(stores) == first


def test_replace_is_refused_when_a_failing_spell_started_since_the_read(stores: Stores) -> None:
    read = an_endpoint()
    stores.endpoints.put(read)
    assert stores.endpoints.mark_failing(TENANT, "ep_1", at(1))
    changed = replace(read, description="changed", updated_at=at(2))
    assert not stores.endpoints.replace(changed, expected_updated_at=read.updated_at)
    assert stored(stores).description is None and stored(stores).failing_since == at(1)


def test_replace_compares_the_spell_with_the_record_read_when_the_change_ends_it(stores: Stores) -> None:
    read = failing_endpoint(stores)
    enabled_again = replace(read, failing_since=None, failure_notice=None, updated_at=at(5))
    assert stores.endpoints.replace(enabled_again, expected_updated_at=read.updated_at, read=read)
    assert stored(stores).failing_since is None
    assert list(stores.failing.failing(at(100))) == []


def test_replace_leaves_the_circuit_as_the_delivery_path_wrote_it(stores: Stores) -> None:
    read = an_endpoint()
    stores.endpoints.put(read)
    stores.circuits.count_failure(TENANT, "ep_1", "dlv_1")  # between the service's read and its write
    changed = replace(read, description="changed", updated_at=at(1))
    assert stores.endpoints.replace(changed, expected_updated_at=read.updated_at)
    after = stored(stores)
    assert after.description == "changed"
    assert after.circuit_failures == 1 and after.circuit_failed == ["dlv_1"]


def test_replace_of_an_unknown_endpoint_is_refused_and_creates_nothing(stores: Stores) -> None:
    ghost = an_endpoint("ep_ghost")
    assert not stores.endpoints.replace(ghost, expected_updated_at=ghost.updated_at)
    assert stores.endpoints.get(TENANT, "ep_ghost") is None


# --- the failing spell ---


def test_mark_failing_starts_a_spell_once(stores: Stores) -> None:
    failing_endpoint(stores, since_s=1)
    assert not stores.endpoints.mark_failing(TENANT, "ep_1", at(2))
    assert stored(stores).failing_since == at(1) and stored(stores).failure_notice is None


def test_mark_failing_is_refused_for_an_endpoint_not_enabled_or_unknown(stores: Stores) -> None:
    stores.endpoints.put(an_endpoint(state=EndpointState.DISABLED))
    assert not stores.endpoints.mark_failing(TENANT, "ep_1", at(1))
    assert stored(stores).failing_since is None
    assert not stores.endpoints.mark_failing(TENANT, "ep_missing", at(1))
    assert stores.endpoints.get(TENANT, "ep_missing") is None


def test_mark_recovered_ends_the_spell_and_its_notices_once(stores: Stores) -> None:
    read = failing_endpoint(stores)
    assert stores.failing.record_notice(read, FailureNotice.FAILING_1D)
    assert stores.endpoints.mark_recovered(TENANT, "ep_1")
    assert not stores.endpoints.mark_recovered(TENANT, "ep_1")
    after = stored(stores)
    assert after.failing_since is None and after.failure_notice is None
    assert not stores.endpoints.mark_recovered(TENANT, "ep_missing")


# --- FailingEndpoints: the sweeper's side ---


def test_failing_lists_enabled_endpoints_failing_since_before_then_longest_first(stores: Stores) -> None:
    failing_endpoint(stores, "ep_late", since_s=30)
    failing_endpoint(stores, "ep_early", since_s=10)
    failing_endpoint(stores, "ep_too_recent", since_s=100)
    stores.endpoints.put(an_endpoint("ep_healthy"))
    off = failing_endpoint(stores, "ep_off", since_s=0)
    disabled = replace(off, state=EndpointState.DISABLED, updated_at=at(1))
    assert stores.endpoints.replace(disabled, expected_updated_at=off.updated_at)
    assert [e.id for e in stores.failing.failing(at(30))] == ["ep_early", "ep_late"]


def test_a_notice_is_recorded_by_the_first_sweeper_only(stores: Stores) -> None:
    read = failing_endpoint(stores)
    assert stores.failing.record_notice(read, FailureNotice.FAILING_1D)
    assert not stores.failing.record_notice(read, FailureNotice.FAILING_1D)  # a racing sweeper read the same
    assert stored(stores).failure_notice is FailureNotice.FAILING_1D
    assert stores.failing.record_notice(stored(stores), FailureNotice.FAILING_3D)
    assert stored(stores).failure_notice is FailureNotice.FAILING_3D


def test_a_notice_of_an_ended_spell_or_a_disabled_endpoint_is_refused(stores: Stores) -> None:
    read = failing_endpoint(stores)
    stores.endpoints.mark_recovered(TENANT, "ep_1")
    assert stores.endpoints.mark_failing(TENANT, "ep_1", at(50))  # a new spell
    assert not stores.failing.record_notice(read, FailureNotice.FAILING_1D)
    current = stored(stores)
    disabled = replace(current, state=EndpointState.DISABLED, updated_at=at(60))
    assert stores.endpoints.replace(disabled, expected_updated_at=current.updated_at)
    assert not stores.failing.record_notice(current, FailureNotice.FAILING_1D)
    assert stored(stores).failure_notice is None


def test_a_withdrawn_notice_is_owed_again(stores: Stores) -> None:
    read = failing_endpoint(stores)
    stores.failing.record_notice(read, FailureNotice.FAILING_1D)
    stores.failing.withdraw_notice(read, FailureNotice.FAILING_1D)
    assert stored(stores).failure_notice is None
    assert stores.failing.record_notice(read, FailureNotice.FAILING_1D)


def test_withdrawing_a_notice_another_sweep_replaced_leaves_it(stores: Stores) -> None:
    read = failing_endpoint(stores)
    stores.failing.record_notice(read, FailureNotice.FAILING_1D)
    stores.failing.record_notice(stored(stores), FailureNotice.FAILING_3D)
    stores.failing.withdraw_notice(read, FailureNotice.FAILING_1D)
    assert stored(stores).failure_notice is FailureNotice.FAILING_3D
    assert stored(stores).circuit is CircuitState.CLOSED
