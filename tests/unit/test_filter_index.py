"""Ingest's matching (issue 27): once per distinct event type of a request, exact filters looked up in a dict, each
distinct wildcard pattern evaluated once; and the same answers as the plain glob (`match_steps`) for any filters."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from hookrelay.domain import matching
from hookrelay.domain.matching import FilterIndex, match_steps
from hookrelay.domain.schedule import DEFAULT_SCHEDULE
from hookrelay.services.ingest import BatchAccepted, BatchItem, IngestService
from tests.support.builders import T0, TENANT, an_endpoint
from tests.support.fakes import FakeDeliveries, FakeEndpoints, FakeEvents, KnownTenants, RecordingQueue

# The worst pattern shape of the finding: stars between long runs of one letter, the last part never found.
HOSTILE = "a*aaaaaaaac*aaaaaaaac*aaaaaaaac*aaaaaaaac*aaaaaaaac*aaaaaaaac*aaaaaaaac*b"


class Counting:
    """Counts FilterIndex's matchings (one per distinct type asked) and its wildcard evaluations."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.matchings: list[str] = []
        self.evaluations = 0
        original_match, original_evaluate = FilterIndex._match, matching.parts_match

        def match(index: FilterIndex[object], event_type: str) -> list[object]:
            self.matchings.append(event_type)
            return original_match(index, event_type)

        def evaluate(parts: tuple[str, ...], event_type: str) -> bool:
            self.evaluations += 1
            return original_evaluate(parts, event_type)

        monkeypatch.setattr(FilterIndex, "_match", match)
        monkeypatch.setattr(matching, "parts_match", evaluate)


def ingest(*endpoints: object) -> IngestService:
    return IngestService(
        tenants=KnownTenants(TENANT, created_at=T0),
        endpoints=FakeEndpoints(*endpoints),  # type: ignore[arg-type]
        events=FakeEvents(),
        deliveries=FakeDeliveries(),  # type: ignore[arg-type]
        queue=RecordingQueue(),
        schedule=DEFAULT_SCHEDULE,
        writer_window=timedelta(minutes=1),
        clock=lambda: T0,
    )


def test_a_batch_of_100_events_of_3_types_is_matched_3_times(monkeypatch: pytest.MonkeyPatch) -> None:
    counting = Counting(monkeypatch)
    endpoints = [an_endpoint(f"ep_{i:03}", event_types=["order.created", HOSTILE, f"user.*.{i}"]) for i in range(1, 41)]
    service = ingest(*endpoints)
    types = ["order.created", "order.paid", "user.signed_up"]
    items = [BatchItem(types[n % 3], {"n": n}) for n in range(100)]

    outcomes = service.publish_batch(tenant_id=TENANT, items=items)

    assert sorted(counting.matchings) == sorted(types)  # once per distinct type, not once per event
    # HOSTILE is shared by all 40 endpoints: evaluated once per type it is asked about, not 40 times; the 40
    # `user.*.{i}` patterns once each per type. `order.created` reaches every endpoint by the dict alone, so no
    # pattern is evaluated for it: 2 types x (1 + 40) evaluations for the whole batch (the old path: 100 x 40 x 3).
    assert counting.evaluations == 2 * (1 + 40)
    delivered = [o for o in outcomes if isinstance(o, BatchAccepted)]
    assert len(delivered) == 100
    assert [len(o.delivery_ids) for o in delivered[:3]] == [40, 0, 0]


def test_exact_filters_are_looked_up_never_evaluated(monkeypatch: pytest.MonkeyPatch) -> None:
    counting = Counting(monkeypatch)
    endpoints = [an_endpoint(f"ep_{i:03}", event_types=[f"t.{i}.{j}" for j in range(20)]) for i in range(50)]
    index = FilterIndex([(e, e.event_types) for e in endpoints])

    assert [e.id for e in index.matching("t.7.3")] == ["ep_007"]
    assert index.matching("t.none") == []
    assert counting.evaluations == 0


def test_the_index_answers_as_the_plain_glob_does() -> None:
    """For random filters over a small alphabet (so that parts overlap and repeat), the index reaches exactly the
    subscribers some filter of which matches by `match_steps` (the leftmost glob), in the order given."""
    rng = random.Random(27)
    alphabet = "ab.*"
    for _ in range(300):
        subscribers = [
            (n, ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 7))) for _ in range(rng.randint(1, 3))])
            for n in range(rng.randint(1, 6))
        ]
        index = FilterIndex(subscribers)
        for _ in range(5):
            event_type = "".join(rng.choice("ab.") for _ in range(rng.randint(1, 8)))
            expected = [n for n, filters in subscribers if any(match_steps(f, event_type)[0] for f in filters)]
            assert index.matching(event_type) == expected, (subscribers, event_type)


def test_the_hostile_shape_is_refused_past_the_limit_and_cheap_within_it() -> None:
    """The finding's filter is valid (128 characters at most, 8 stars); a match against it is a handful of `find`s
    whatever the type, and never a match when the type does not end in `b`."""
    assert matching.filter_problem(HOSTILE) is None
    index = FilterIndex([(1, [HOSTILE])])
    assert index.matching("a" * 127) == []
    assert index.matching("a" + "aaaaaaaac" * 7 + "b") == [1]
