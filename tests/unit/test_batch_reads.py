"""services/delivery.py's BatchReads: one endpoint read for a batch's groups' first messages, however many ask."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from hookrelay.domain.models import Endpoint
from hookrelay.services.delivery import BatchReads
from tests.support.builders import an_endpoint
from tests.support.delivery_world import OK, make_world


def test_the_groups_asking_at_once_share_one_read_per_endpoint() -> None:
    reads = BatchReads()
    made: list[str] = []
    asked = threading.Barrier(10)

    def read(endpoint_id: str) -> Endpoint:
        made.append(endpoint_id)
        return replace(an_endpoint(), id=endpoint_id)

    def group(n: int) -> Endpoint | None:
        asked.wait()  # every group's first message at once, as the batch's threads start together
        endpoint_id = f"ep_{n % 2}"
        return reads.read(("tn_1", endpoint_id), lambda: read(endpoint_id))

    with ThreadPoolExecutor(10) as pool:
        found = list(pool.map(group, range(10)))

    assert sorted(made) == ["ep_0", "ep_1"]
    assert {e.id for e in found if e is not None} == {"ep_0", "ep_1"}


def test_a_failed_read_fails_every_message_that_shares_it() -> None:
    reads = BatchReads()

    def fails() -> Endpoint | None:
        raise ConnectionError("throttled")

    with pytest.raises(ConnectionError):
        reads.read(("tn_1", "ep_1"), fails)
    with pytest.raises(ConnectionError):  # they come back with the batch's failures, and read again then
        reads.read(("tn_1", "ep_1"), lambda: an_endpoint())


def test_the_service_reads_the_endpoint_through_the_batch_s_reads_when_given_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = make_world()
    reads = BatchReads()
    shared = world.endpoints.items[("tn_1", "ep_1")]
    reads.read(("tn_1", "ep_1"), lambda: shared)  # another group's first message read it

    def unread(tenant_id: str, endpoint_id: str) -> Endpoint | None:
        raise AssertionError("read again")

    monkeypatch.setattr(world.endpoints, "get", unread)
    world.script(OK)
    message = replace(world.message(1), endpoint_id="ep_1")
    assert world.service.attempt(message, reads=reads).sent


def test_a_read_that_dies_leaves_no_group_waiting_on_it() -> None:
    class Died(BaseException):  # as the crash matrix's process death (tests/support/crash.py)
        pass

    reads = BatchReads()

    def dies() -> Endpoint | None:
        raise Died

    with pytest.raises(Died):
        reads.read(("tn_1", "ep_1"), dies)
    with ThreadPoolExecutor(1) as pool, pytest.raises(Died):
        pool.submit(reads.read, ("tn_1", "ep_1"), lambda: an_endpoint()).result(timeout=5)
