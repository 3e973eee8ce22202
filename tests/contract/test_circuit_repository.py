"""CircuitRepository: every transition of an endpoint's circuit is a conditional update, alike on the fake and
DynamoDB; a worker holding a stale read (another state, another probe workflow's step) changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from hookrelay.domain.circuit import CircuitState
from hookrelay.domain.models import Endpoint, EndpointState
from hookrelay.services.ports import CircuitRepository
from tests.support.builders import TENANT, an_endpoint, at
from tests.support.stores import Stores

THRESHOLD = 3


def stored(stores: Stores, endpoint_id: str = "ep_1") -> Endpoint:
    found = stores.endpoints.get(TENANT, endpoint_id)
    assert found is not None
    return found


def failed(stores: Stores, times: int, endpoint_id: str = "ep_1") -> Endpoint:
    stores.endpoints.put(an_endpoint(endpoint_id))
    for n in range(times):
        stores.circuits.count_failure(TENANT, endpoint_id, f"dlv_f{n}")
    return stored(stores, endpoint_id)


def opened(stores: Stores, endpoint_id: str = "ep_1") -> Endpoint:
    assert stores.circuits.open(failed(stores, THRESHOLD, endpoint_id), at(0), at(60), THRESHOLD)
    return stored(stores, endpoint_id)


def draining(stores: Stores) -> Endpoint:
    endpoint = opened(stores)
    assert stores.circuits.start_drain(endpoint, endpoint.circuit_step)
    return stored(stores)


# --- counting failures while closed ---


def test_count_failure_counts_in_a_row_and_notes_the_delivery(stores: Stores) -> None:
    stores.endpoints.put(an_endpoint())
    first = stores.circuits.count_failure(TENANT, "ep_1", "dlv_a")
    second = stores.circuits.count_failure(TENANT, "ep_1", "dlv_b")
    assert first is not None and first.circuit_failures == 1
    assert second is not None and second.circuit_failures == 2 and second.circuit_failed == ["dlv_a", "dlv_b"]
    assert stored(stores) == second


def test_count_failure_counts_nothing_unless_closed_and_enabled(stores: Stores) -> None:
    endpoint = opened(stores)
    assert stores.circuits.count_failure(TENANT, "ep_1", "dlv_x") is None
    assert stored(stores) == endpoint
    stores.endpoints.put(an_endpoint("ep_off", state=EndpointState.DISABLED))
    assert stores.circuits.count_failure(TENANT, "ep_off", "dlv_x") is None
    assert stored(stores, "ep_off").circuit_failures == 0
    assert stores.circuits.count_failure(TENANT, "ep_missing", "dlv_x") is None
    assert stores.endpoints.get(TENANT, "ep_missing") is None


def test_reset_failures_starts_the_count_again(stores: Stores) -> None:
    failed(stores, 2)
    stores.circuits.reset_failures(TENANT, "ep_1")
    assert stored(stores).circuit_failures == 0 and stored(stores).circuit_failed == []
    stores.circuits.reset_failures(TENANT, "ep_missing")
    assert stores.endpoints.get(TENANT, "ep_missing") is None


# --- open ---


def test_open_needs_the_threshold_of_failures(stores: Stores) -> None:
    endpoint = failed(stores, THRESHOLD - 1)
    assert not stores.circuits.open(endpoint, at(0), at(60), THRESHOLD)
    assert stored(stores).circuit is CircuitState.CLOSED and list(stores.circuits.open_circuits()) == []


def test_open_starts_a_new_probe_step_and_lists_the_circuit(stores: Stores) -> None:
    before = failed(stores, THRESHOLD)
    assert stores.circuits.open(before, at(5), at(65), THRESHOLD)
    after = stored(stores)
    assert after.circuit is CircuitState.OPEN and after.circuit_opened_at == at(5) and after.next_probe_at == at(65)
    assert after.circuit_step == before.circuit_step + 1 and after.probes_made == 0 and after.drained_count == 0
    assert after.circuit_failures == 0 and after.circuit_failed == []
    assert [e.id for e in stores.circuits.open_circuits()] == ["ep_1"]


def test_open_applies_once_when_workers_race(stores: Stores) -> None:
    read = failed(stores, THRESHOLD)
    assert stores.circuits.open(read, at(0), at(60), THRESHOLD)
    assert not stores.circuits.open(read, at(1), at(61), THRESHOLD)
    assert stored(stores).circuit_opened_at == at(0) and stored(stores).circuit_step == read.circuit_step + 1


def test_open_is_refused_for_an_endpoint_not_enabled(stores: Stores) -> None:
    read = failed(stores, THRESHOLD)
    disabled = replace(read, state=EndpointState.DISABLED, updated_at=at(1))
    assert stores.endpoints.replace(disabled, expected_updated_at=read.updated_at)
    assert not stores.circuits.open(read, at(2), at(60), THRESHOLD)
    assert stored(stores).circuit is CircuitState.CLOSED


# --- the probe workflow's steps ---


def test_probed_counts_a_failed_probe_while_open_and_owned_by_the_step(stores: Stores) -> None:
    endpoint = opened(stores)
    assert stores.circuits.probed(endpoint, endpoint.circuit_step, at(120))
    assert not stores.circuits.probed(endpoint, endpoint.circuit_step - 1, at(999))  # a stale workflow
    after = stored(stores)
    assert after.probes_made == 1 and after.next_probe_at == at(120)


def test_start_drain_moves_open_to_draining_for_the_owning_step_only(stores: Stores) -> None:
    endpoint = opened(stores)
    assert not stores.circuits.start_drain(endpoint, endpoint.circuit_step + 1)
    assert stored(stores).circuit is CircuitState.OPEN
    assert stores.circuits.start_drain(endpoint, endpoint.circuit_step)
    assert not stores.circuits.start_drain(endpoint, endpoint.circuit_step)  # already draining
    after = stored(stores)
    assert after.circuit is CircuitState.DRAINING and after.drained_count == 0 and after.drain_paused_until is None
    assert [e.id for e in stores.circuits.open_circuits()] == ["ep_1"]


def test_probed_is_refused_once_draining(stores: Stores) -> None:
    endpoint = draining(stores)
    assert not stores.circuits.probed(endpoint, endpoint.circuit_step, at(120))
    assert stored(stores) == endpoint


def test_drained_adds_the_released_deliveries_while_draining(stores: Stores) -> None:
    endpoint = draining(stores)
    assert stores.circuits.drained(endpoint, endpoint.circuit_step, 4, at(70))
    assert stores.circuits.drained(endpoint, endpoint.circuit_step, 3, at(80))
    assert not stores.circuits.drained(endpoint, endpoint.circuit_step + 1, 100, at(90))
    after = stored(stores)
    assert after.drained_count == 7 and after.next_probe_at == at(80)


def test_drained_is_refused_while_open(stores: Stores) -> None:
    endpoint = opened(stores)
    assert not stores.circuits.drained(endpoint, endpoint.circuit_step, 4, at(70))
    assert stored(stores).drained_count == 0


def test_pause_drain_holds_a_draining_circuit_only(stores: Stores) -> None:
    opened(stores)
    assert not stores.circuits.pause_drain(TENANT, "ep_1", at(30))
    assert stored(stores).drain_paused_until is None
    endpoint = stored(stores)
    stores.circuits.start_drain(endpoint, endpoint.circuit_step)
    assert stores.circuits.pause_drain(TENANT, "ep_1", at(30))
    assert stored(stores).drain_paused_until == at(30)
    assert not stores.circuits.pause_drain(TENANT, "ep_missing", at(30))


def test_reopen_moves_draining_back_to_open_and_clears_the_pause(stores: Stores) -> None:
    endpoint = opened(stores)
    assert stores.circuits.probed(endpoint, endpoint.circuit_step, at(20))
    assert stores.circuits.start_drain(endpoint, endpoint.circuit_step)
    stores.circuits.pause_drain(TENANT, "ep_1", at(30))
    opened_at = stored(stores).circuit_opened_at
    assert stores.circuits.reopen(endpoint, at(100))
    after = stored(stores)
    assert after.circuit is CircuitState.OPEN and after.next_probe_at == at(100)
    # The same outage: the schedule's anchor stays, and the failed release counts as a probe.
    assert after.circuit_opened_at == opened_at and after.probes_made == 2
    assert after.drain_paused_until is None
    assert after.circuit_step == endpoint.circuit_step  # the running probe workflow carries on
    assert not stores.circuits.reopen(endpoint, at(101))  # open, not draining
    assert stored(stores).next_probe_at == at(100)


# --- close, take_over, reset ---


def test_close_ends_the_drain_once_the_close_began(stores: Stores) -> None:
    endpoint = draining(stores)
    stores.circuits.pause_drain(TENANT, "ep_1", at(30))
    assert not stores.circuits.close(endpoint, endpoint.circuit_step)  # not begun
    assert not stores.circuits.begin_close(endpoint, endpoint.circuit_step - 1)  # a stale workflow
    assert stores.circuits.begin_close(endpoint, endpoint.circuit_step)
    assert stored(stores).circuit_closing
    assert not stores.circuits.close(endpoint, endpoint.circuit_step - 1)  # a stale workflow
    assert stores.circuits.close(endpoint, endpoint.circuit_step)
    after = stored(stores)
    assert after.circuit is CircuitState.CLOSED and after.next_probe_at is None and after.drain_paused_until is None
    assert after.circuit_failures == 0 and not after.circuit_closing and list(stores.circuits.open_circuits()) == []


def test_hold_open_makes_a_close_that_began_fail(stores: Stores) -> None:
    endpoint = draining(stores)
    assert not stores.circuits.hold_open(endpoint)  # nothing to hold: no close began
    assert stores.circuits.begin_close(endpoint, endpoint.circuit_step)
    assert stores.circuits.hold_open(endpoint)
    assert not stores.circuits.close(endpoint, endpoint.circuit_step)
    assert stored(stores).circuit is CircuitState.DRAINING and not stored(stores).circuit_closing


def test_hold_open_is_refused_once_closed(stores: Stores) -> None:
    endpoint = draining(stores)
    assert stores.circuits.begin_close(endpoint, endpoint.circuit_step)
    assert stores.circuits.close(endpoint, endpoint.circuit_step)
    assert not stores.circuits.hold_open(endpoint)
    assert stored(stores).circuit is CircuitState.CLOSED


def test_close_is_refused_while_open(stores: Stores) -> None:
    endpoint = opened(stores)
    assert not stores.circuits.begin_close(endpoint, endpoint.circuit_step)
    assert not stores.circuits.close(endpoint, endpoint.circuit_step)
    assert stored(stores).circuit is CircuitState.OPEN


def test_take_over_hands_the_circuit_to_the_next_step_once(stores: Stores) -> None:
    endpoint = opened(stores)
    step = endpoint.circuit_step
    assert stores.circuits.take_over(endpoint, step, at(90))
    assert not stores.circuits.take_over(endpoint, step, at(95))  # the step moved on
    after = stored(stores)
    assert after.circuit_step == step + 1 and after.next_probe_at == at(90) and after.circuit is CircuitState.OPEN


def test_take_over_is_refused_for_a_closed_circuit(stores: Stores) -> None:
    stores.endpoints.put(an_endpoint())
    endpoint = stored(stores)
    assert not stores.circuits.take_over(endpoint, endpoint.circuit_step, at(90))
    assert stored(stores) == endpoint


def disable(stores: Stores) -> Endpoint:
    read = stored(stores)
    off = replace(read, state=EndpointState.DISABLED, updated_at=at(2))
    assert stores.endpoints.replace(off, expected_updated_at=read.updated_at)
    return stored(stores)


def test_reset_closes_the_circuit_of_a_disabled_endpoint_with_nothing_parked(stores: Stores) -> None:
    draining(stores)
    stores.circuits.pause_drain(TENANT, "ep_1", at(30))
    endpoint = disable(stores)
    assert stores.circuits.reset(endpoint)
    after = stored(stores)
    assert after.circuit is CircuitState.CLOSED and after.next_probe_at is None and after.drain_paused_until is None
    assert list(stores.circuits.open_circuits()) == []


def test_reset_is_refused_for_an_enabled_endpoint(stores: Stores) -> None:
    endpoint = opened(stores)
    assert not stores.circuits.reset(endpoint)
    assert stored(stores).circuit is CircuitState.OPEN


TRANSITIONS: dict[str, Callable[[CircuitRepository, Endpoint], bool]] = {
    "open": lambda c, e: c.open(e, at(0), at(1), 0),
    "reopen": lambda c, e: c.reopen(e, at(1)),
    "probed": lambda c, e: c.probed(e, 0, at(1)),
    "start_drain": lambda c, e: c.start_drain(e, 0),
    "drained": lambda c, e: c.drained(e, 0, 1, at(1)),
    "begin_close": lambda c, e: c.begin_close(e, 0),
    "hold_open": lambda c, e: c.hold_open(e),
    "close": lambda c, e: c.close(e, 0),
    "take_over": lambda c, e: c.take_over(e, 0, at(1)),
    "reset": lambda c, e: c.reset(e),
}


@pytest.mark.parametrize("transition", TRANSITIONS)
def test_a_transition_of_an_unknown_endpoint_is_refused_and_creates_nothing(stores: Stores, transition: str) -> None:
    ghost = an_endpoint("ep_ghost")
    assert not TRANSITIONS[transition](stores.circuits, ghost)
    assert stores.endpoints.get(TENANT, "ep_ghost") is None


def test_open_circuits_lists_open_and_draining_not_closed(stores: Stores) -> None:
    opened(stores, "ep_open")
    opened(stores, "ep_draining")
    endpoint = stored(stores, "ep_draining")
    stores.circuits.start_drain(endpoint, endpoint.circuit_step)
    stores.endpoints.put(an_endpoint("ep_closed"))
    assert sorted(e.id for e in stores.circuits.open_circuits()) == ["ep_draining", "ep_open"]
