"""Ingest's endpoint lists, kept ENDPOINT_LIST_SECONDS per container (services/endpoint_lists.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from hookrelay.domain.models import Endpoint
from hookrelay.services.endpoint_lists import ENDPOINT_LIST_SECONDS, RecentEndpointLists
from tests.support.builders import an_endpoint


class Lists:
    """The tenants' stored endpoint lists, counting the reads of each."""

    def __init__(self) -> None:
        self.stored: dict[str, list[Endpoint]] = {}
        self.reads: Counter[str] = Counter()

    def list_for_tenant(self, tenant_id: str) -> list[Endpoint]:
        self.reads[tenant_id] += 1
        return list(self.stored.get(tenant_id, []))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def endpoints(tenant_id: str, count: int) -> list[Endpoint]:
    return [an_endpoint(f"ep_{tenant_id}_{n}", tenant_id=tenant_id) for n in range(count)]


def recent(lists: Lists, clock: Clock, **settings: int) -> RecentEndpointLists:
    return RecentEndpointLists(lists, clock=clock, **settings)  # type: ignore[arg-type]


def test_a_tenants_list_is_read_once_per_lifetime_however_many_events_ask() -> None:
    lists, clock = Lists(), Clock()
    lists.stored["tn_a"] = endpoints("tn_a", 2)
    kept = recent(lists, clock)
    for step in range(100):
        clock.now = 100.0 + step * ENDPOINT_LIST_SECONDS / 100
        assert [e.id for e in kept.list_for_tenant("tn_a")] == ["ep_tn_a_0", "ep_tn_a_1"]
    assert lists.reads["tn_a"] == 1


def test_a_change_applies_within_the_lifetime_and_not_before_it_is_read_again() -> None:
    lists, clock = Lists(), Clock()
    lists.stored["tn_a"] = endpoints("tn_a", 1)
    kept = recent(lists, clock)
    kept.list_for_tenant("tn_a")
    lists.stored["tn_a"] = endpoints("tn_a", 3)  # an endpoint created, another too
    clock.now += ENDPOINT_LIST_SECONDS - 0.001
    assert len(kept.list_for_tenant("tn_a")) == 1
    clock.now = 100.0 + ENDPOINT_LIST_SECONDS
    assert len(kept.list_for_tenant("tn_a")) == 3
    assert lists.reads["tn_a"] == 2


def test_tenants_are_kept_apart() -> None:
    lists, clock = Lists(), Clock()
    lists.stored |= {"tn_a": endpoints("tn_a", 1), "tn_b": endpoints("tn_b", 2)}
    kept = recent(lists, clock)
    assert [e.tenant_id for e in kept.list_for_tenant("tn_a")] == ["tn_a"]
    assert [e.tenant_id for e in kept.list_for_tenant("tn_b")] == ["tn_b", "tn_b"]
    assert [e.tenant_id for e in kept.list_for_tenant("tn_a")] == ["tn_a"]
    assert lists.reads == Counter({"tn_a": 1, "tn_b": 1})


def test_a_clock_that_went_back_reads_again() -> None:
    lists, clock = Lists(), Clock()
    kept = recent(lists, clock)
    kept.list_for_tenant("tn_a")
    clock.now -= 5
    kept.list_for_tenant("tn_a")
    assert lists.reads["tn_a"] == 2


def test_a_caller_changing_its_list_does_not_change_the_kept_one() -> None:
    lists, clock = Lists(), Clock()
    lists.stored["tn_a"] = endpoints("tn_a", 2)
    kept = recent(lists, clock)
    kept.list_for_tenant("tn_a").clear()
    assert len(kept.list_for_tenant("tn_a")) == 2


def test_the_least_recently_read_tenants_are_forgotten_past_the_endpoint_bound() -> None:
    lists, clock = Lists(), Clock()
    for tenant in ("tn_a", "tn_b", "tn_c"):
        lists.stored[tenant] = endpoints(tenant, 4)
    kept = recent(lists, clock, max_endpoints=8)
    kept.list_for_tenant("tn_a")
    kept.list_for_tenant("tn_b")
    kept.list_for_tenant("tn_a")  # a read more recently than b
    kept.list_for_tenant("tn_c")  # 12 kept: b goes
    for tenant in ("tn_a", "tn_b", "tn_c"):
        kept.list_for_tenant(tenant)
    assert lists.reads == Counter({"tn_a": 1, "tn_b": 2, "tn_c": 2})  # b read again, and that forgot c


def test_a_tenant_past_the_bound_on_its_own_is_kept_alone() -> None:
    lists, clock = Lists(), Clock()
    lists.stored |= {"tn_small": endpoints("tn_small", 1), "tn_large": endpoints("tn_large", 20)}
    kept = recent(lists, clock, max_endpoints=8)
    kept.list_for_tenant("tn_small")
    kept.list_for_tenant("tn_large")
    kept.list_for_tenant("tn_large")
    kept.list_for_tenant("tn_small")
    assert lists.reads == Counter({"tn_large": 1, "tn_small": 2})


def test_the_docs_state_the_lifetime_of_the_code() -> None:
    root = Path(__file__).resolve().parents[2]
    seconds = f"{ENDPOINT_LIST_SECONDS:g}"
    architecture = " ".join((root / "docs" / "architecture.md").read_text().split())
    guide = " ".join((root / "docs" / "consumer-guide.md").read_text().split())
    assert f"`ENDPOINT_LIST_SECONDS` ({seconds} s, `services/endpoint_lists.py`)" in architecture
    assert f"applies to the events accepted {seconds} s after it" in architecture
    assert f"A changed filter applies to the events accepted from {seconds} seconds after the change" in guide


def test_the_api_doc_states_the_lifetime_of_the_code() -> None:
    api = " ".join((Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text().split())
    assert f"none when its ingest container read them in the last {ENDPOINT_LIST_SECONDS:g} s" in api
