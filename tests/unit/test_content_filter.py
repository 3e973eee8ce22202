"""Content filters (issue 29 item 4): checking against the caps with the pointer of each fault, and evaluation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookrelay.domain import content_filter
from hookrelay.domain.content_filter import COMPARISONS, OPERATORS, compile_filter, compiled
from hookrelay.domain.errors import InvalidDocument
from hookrelay.domain.limits import (
    MAX_FILTER_BYTES,
    MAX_FILTER_DEPTH,
    MAX_FILTER_IN_VALUES,
    MAX_FILTER_NODES,
    MAX_FILTER_PATH_LENGTH,
    MAX_FILTER_PATH_SEGMENTS,
)

ENVELOPE: dict[str, Any] = {
    "id": "evt_1",
    "type": "order.paid",
    "timestamp": "2026-12-03T12:00:00.000Z",
    "data": {
        "amount": 150,
        "price": 9.5,
        "currency": "EUR",
        "paid": True,
        "note": None,
        "customer": {"id": "cus_42", "tier": "gold", "address": {"country": "FR"}},
        "tags": ["vip", "b2b"],
        "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1, "extra": [{"code": "x"}]}],
        "matrix": [[1, 2], [3, [4]]],
        "empty": [],
        "007": "key, not index",
    },
}


def matches(raw: dict[str, Any], envelope: dict[str, Any] = ENVELOPE) -> bool:
    return compile_filter(raw).matches(envelope)


def pointer_of(raw: Any) -> str:
    with pytest.raises(InvalidDocument) as refused:
        compile_filter(raw)
    (error,) = refused.value.errors
    return error["pointer"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"data.amount": 150}, True),  # a scalar is $eq
        ({"data.amount": 150.0}, True),  # 150 is 150.0
        ({"data.amount": "150"}, False),  # no coercion
        ({"data.paid": 1}, False),  # true is not 1
        ({"data.paid": True}, True),
        ({"data.note": None}, True),  # null is a value
        ({"data.missing": None}, False),  # absent is not null
        ({"type": "order.paid"}, True),  # the envelope's own fields
        ({"data.amount": {"$eq": 150}}, True),
        ({"data.amount": {"$neq": 150}}, False),
        ({"data.missing": {"$neq": 1}}, True),  # not $eq: holds when nothing is reached
        ({"data.currency": {"$in": ["USD", "EUR"]}}, True),
        ({"data.currency": {"$in": ["USD", 1]}}, False),
        ({"data.currency": {"$nin": ["USD", "GBP"]}}, True),
        ({"data.currency": {"$nin": ["EUR"]}}, False),
        ({"data.amount": {"$gt": 149}}, True),
        ({"data.amount": {"$gt": 150}}, False),
        ({"data.amount": {"$gte": 150, "$lte": 150}}, True),  # operators of one path all hold
        ({"data.amount": {"$gte": 100, "$lt": 150}}, False),
        ({"data.price": {"$lt": 10}}, True),
        ({"data.amount": {"$gt": "1"}}, False),  # a number never compares with a string
        ({"data.paid": {"$gt": 0}}, False),  # nor a boolean with a number
        ({"timestamp": {"$gte": "2026-12-03T00:00:00Z"}}, True),  # strings by code point: RFC 3339 orders
        ({"data.customer.id": {"$startsWith": "cus_"}}, True),
        ({"data.customer.id": {"$startsWith": "usr_"}}, False),
        ({"data.amount": {"$startsWith": "1"}}, False),
        ({"data.customer.address.country": "FR"}, True),
        ({"data.customer": {"$exists": True}}, True),
        ({"data.customer.phone": {"$exists": False}}, True),
        ({"data.note": {"$exists": True}}, True),  # null exists
        ({"data.empty": {"$exists": True}}, True),  # an empty array exists
        ({"data.tags": "vip"}, True),  # any element of a reached array
        ({"data.tags": "retail"}, False),
        ({"data.items.sku": "B-7"}, False),  # a path does not go on through an array: index it
        ({"data.items.sku": {"$exists": False}}, True),
        ({"data.items.1.extra.0.code": "x"}, True),
        ({"data.items.1.qty": {"$lt": 2}}, True),
        ({"data.items.0.sku": "A-1"}, True),  # an index segment
        ({"data.items.0.sku": "B-7"}, False),
        ({"data.items.5.sku": {"$exists": False}}, True),
        ({"data.matrix": 4}, True),  # nested arrays, element by element
        ({"data.matrix": {"$gt": 3}}, True),
        ({"data.matrix": {"$lt": 1}}, False),
        ({"data.matrix.1.0": 3}, True),
        ({"data.matrix.1": 1}, False),
        ({"data.tags": {"$startsWith": "b2"}}, True),  # any element
        ({"data.tags": {"$startsWith": "c"}}, False),
        ({"data.tags": {"$gt": "vip"}}, False),
        ({"data.tags": {"$gte": "vip"}}, True),
        ({"data.tags": {"$in": ["b2b", "x"]}}, True),
        ({"data.tags": {"$nin": ["b2b"]}}, False),
        ({"data.007": "key, not index"}, True),  # a leading zero is a key
        ({"data.customer": "gold"}, False),  # an object is no scalar
        ({"$and": [{"data.amount": {"$gt": 100}}, {"data.currency": "EUR"}]}, True),
        ({"$and": [{"data.amount": {"$gt": 100}}, {"data.currency": "USD"}]}, False),
        ({"$or": [{"data.currency": "USD"}, {"data.customer.tier": "gold"}]}, True),
        ({"$or": [{"data.currency": "USD"}, {"data.customer.tier": "silver"}]}, False),
        ({"$not": {"data.currency": "USD"}}, True),
        ({"$not": {"data.currency": "EUR"}}, False),
        ({"type": "order.paid", "data.amount": {"$lt": 100}}, False),  # keys of one object: an implicit and
    ],
)
def test_each_operator_means_what_the_guide_says(raw: dict[str, Any], expected: bool) -> None:
    assert matches(raw) is expected


def test_every_operator_is_covered_above() -> None:
    assert set(OPERATORS) == {"$and", "$or", "$not", *COMPARISONS}
    assert len(COMPARISONS) == 10


def test_the_stored_text_is_the_filter_as_compact_json() -> None:
    raw = {"data.amount": {"$gte": 100}, "$or": [{"type": "a"}, {"type": "b"}]}
    compiled_filter = compile_filter(raw)
    assert compiled_filter.text == json.dumps(raw, separators=(",", ":"))
    assert compiled_filter.document == raw
    assert compiled_filter.nodes == 4  # $gte, $or, and the two tests under it


@pytest.mark.parametrize(
    ("raw", "pointer"),
    [
        ([], "/filter"),
        ({}, "/filter"),
        ({"$where": "1"}, "/filter/$where"),
        ({"data.amount": {"$regex": "^1"}}, "/filter/data.amount/$regex"),
        ({"data": {"amount": 1}}, "/filter/data/amount"),  # nested objects are dotted paths
        ({"data.amount": {}}, "/filter/data.amount"),
        ({"data.tags": ["vip"]}, "/filter/data.tags"),  # a list is $in
        ({"data..amount": 1}, "/filter/data..amount"),
        ({".data": 1}, "/filter/.data"),
        ({"a/b~c": {"$eq": []}}, "/filter/a~1b~0c/$eq"),  # RFC 6901 escapes
        ({"data.x": {"$in": []}}, "/filter/data.x/$in"),
        ({"data.x": {"$in": "a"}}, "/filter/data.x/$in"),
        ({"data.x": {"$nin": ["a", {"b": 1}]}}, "/filter/data.x/$nin/1"),
        ({"data.x": {"$gt": True}}, "/filter/data.x/$gt"),
        ({"data.x": {"$lte": None}}, "/filter/data.x/$lte"),
        ({"data.x": {"$exists": 1}}, "/filter/data.x/$exists"),
        ({"data.x": {"$startsWith": 1}}, "/filter/data.x/$startsWith"),
        ({"data.x": {"$neq": {"a": 1}}}, "/filter/data.x/$neq"),
        ({"$and": []}, "/filter/$and"),
        ({"$or": {"a": 1}}, "/filter/$or"),
        ({"$or": [{"a": 1}, "b"]}, "/filter/$or/1"),
        ({"$not": []}, "/filter/$not"),
        ({"$and": [{"$not": {"a": {"$in": [1, [2]]}}}]}, "/filter/$and/0/$not/a/$in/1"),
        ({"data.x": float("inf")}, "/filter/data.x"),
    ],
)
def test_a_bad_filter_is_refused_with_the_pointer_of_the_fault(raw: Any, pointer: str) -> None:
    assert pointer_of(raw) == pointer


def _nested(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {"data.a": 1}
    for _ in range(levels - 1):
        node = {"$not": node}
    return node


def test_depth_is_capped_and_the_pointer_names_the_level_past_it() -> None:
    compile_filter(_nested(MAX_FILTER_DEPTH))
    assert pointer_of(_nested(MAX_FILTER_DEPTH + 1)) == "/filter" + "/$not" * MAX_FILTER_DEPTH


def test_a_filter_nested_far_past_the_cap_is_refused_without_walking_it() -> None:
    # 900 levels: near the interpreter's recursion limit, which a walk without the cap would reach.
    assert pointer_of(_nested(900)) == "/filter" + "/$not" * MAX_FILTER_DEPTH


def test_nodes_are_capped() -> None:
    compile_filter({f"data.k{i}": i for i in range(MAX_FILTER_NODES)})
    assert pointer_of({f"data.k{i}": i for i in range(MAX_FILTER_NODES + 1)}) == f"/filter/data.k{MAX_FILTER_NODES}"
    many = {"$or": [{"a": i} for i in range(MAX_FILTER_NODES + 1)]}
    assert pointer_of(many) == "/filter/$or"  # refused before compiling its branches
    wide = {"data.k": {"$gt": 0, "$lt": 9}, "$or": [{"a": i} for i in range(MAX_FILTER_NODES - 2)]}
    assert pointer_of(wide) == f"/filter/$or/{MAX_FILTER_NODES - 3}/a"  # 2 tests, $or, 61 branches: the 62nd is 65th


def test_in_lists_are_capped() -> None:
    compile_filter({"data.x": {"$in": list(range(MAX_FILTER_IN_VALUES))}})
    assert pointer_of({"data.x": {"$nin": list(range(MAX_FILTER_IN_VALUES + 1))}}) == "/filter/data.x/$nin"


def test_paths_are_capped_in_segments_and_length() -> None:
    segments = ".".join(["a"] * MAX_FILTER_PATH_SEGMENTS)
    compile_filter({segments: 1})
    assert pointer_of({segments + ".a": 1}) == f"/filter/{segments}.a"
    long_path = "data." + "k" * (MAX_FILTER_PATH_LENGTH - 5)
    compile_filter({long_path: 1})
    assert pointer_of({long_path + "k": 1}) == f"/filter/{long_path}k"


def test_size_is_capped() -> None:
    fits = {"data.x": "v" * (MAX_FILTER_BYTES - len('{"data.x":""}'))}
    compile_filter(fits)
    assert pointer_of({"data.x": "v" * MAX_FILTER_BYTES}) == "/filter"
    # Size is measured as UTF-8: a 3-byte character counts three.
    assert pointer_of({"data.x": "€" * (MAX_FILTER_BYTES // 3)}) == "/filter"


def test_the_pointer_is_placed_where_the_filter_is_in_the_body() -> None:
    with pytest.raises(InvalidDocument) as refused:
        compile_filter({"$x": 1}, at="/endpoints/3/filter")
    assert refused.value.errors[0]["pointer"] == "/endpoints/3/filter/$x"


def test_a_stored_filter_is_compiled_once_per_process() -> None:
    compiled.cache_clear()
    text = '{"data.amount":{"$gt":1}}'
    first = compiled(text)
    assert first is not None and compiled(text) is first
    assert compiled.cache_info().hits == 1


def test_one_event_view_resolves_each_path_once_and_evaluates_each_filter_once() -> None:
    view = content_filter.EventView(ENVELOPE)
    first = compile_filter({"data.amount": {"$gt": 1, "$lt": 1000}, "$not": {"data.amount": 3}})
    again = compile_filter({"data.amount": {"$gt": 1, "$lt": 1000}, "$not": {"data.amount": 3}})
    assert view.passes(first) and view.passes(again)
    assert list(view._summaries) == [first.root.children[0].path]  # type: ignore[union-attr]
    assert view._outcomes == {first.text: True}


def test_a_stored_filter_that_no_longer_passes_lets_everything_through() -> None:
    # Caps only tighten with a new version; nothing accepted is dropped for it: the caller sends as if unfiltered.
    assert compiled('{"data.x":{"$regex":"a"}}') is None
    assert compiled("not json") is None


# --- Properties ---

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(-5, 5, allow_nan=False), st.sampled_from(["a", "b", ""])
)
documents = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
    max_leaves=25,
)
paths = st.lists(st.sampled_from(["a", "b", "c", "0", "1"]), min_size=1, max_size=3).map(".".join)


def _reference_values(document: Any, path: list[str]) -> list[Any]:
    """What a path reaches (none or one value), written the obvious recursive way."""
    if not path:
        return [document]
    if isinstance(document, dict) and path[0] in document:
        return _reference_values(document[path[0]], path[1:])
    index = content_filter._index(path[0])
    if isinstance(document, list) and index is not None and index < len(document):
        return _reference_values(document[index], path[1:])
    return []


def _flat(values: list[Any]) -> list[Any]:
    """The scalars the reached values stand for: arrays element by element, recursively; objects none."""
    out: list[Any] = []
    for value in values:
        if isinstance(value, list):
            out += _flat(value)
        elif not isinstance(value, dict):
            out.append(value)
    return out


@settings(max_examples=300, deadline=None)
@given(document=documents, path=paths, value=scalars)
def test_eq_holds_exactly_when_some_reached_value_equals(document: Any, path: str, value: Any) -> None:
    envelope = {"data": document}
    reached = _reference_values(document, path.split("."))
    flat = _flat(reached)
    expected = any(_same(v, value) and v == value for v in flat)
    assert compile_filter({f"data.{path}": {"$eq": value}}).matches(envelope) is expected
    assert compile_filter({f"data.{path}": {"$neq": value}}).matches(envelope) is not expected
    assert compile_filter({"$not": {f"data.{path}": value}}).matches(envelope) is not expected


def _num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _same(a: Any, b: Any) -> bool:
    return (_num(a) and _num(b)) or type(a) is type(b)


@settings(max_examples=300, deadline=None)
@given(document=documents, path=paths, values=st.lists(scalars, min_size=1, max_size=5))
def test_in_is_the_or_of_eq(document: Any, path: str, values: list[Any]) -> None:
    envelope = {"data": document}
    either = {"$or": [{f"data.{path}": {"$eq": v}} for v in values]}
    assert compile_filter({f"data.{path}": {"$in": values}}).matches(envelope) is compile_filter(either).matches(
        envelope
    )


@settings(max_examples=300, deadline=None)
@given(document=documents, path=paths, operand=st.one_of(st.integers(-5, 5), st.sampled_from(["", "a", "b", "ab"])))
def test_ordered_comparisons_and_prefixes_hold_when_some_value_of_the_operands_kind_does(
    document: Any, path: str, operand: Any
) -> None:
    """The summaries (least, greatest, sorted strings) answer as a scan of every reached value would."""
    envelope = {"data": document}
    flat = [v for v in _flat(_reference_values(document, path.split("."))) if _same(v, operand)]
    for operator, holds in (
        ("$gt", lambda v: v > operand),
        ("$gte", lambda v: v >= operand),
        ("$lt", lambda v: v < operand),
        ("$lte", lambda v: v <= operand),
    ):
        expected = any(holds(v) for v in flat)
        assert compile_filter({f"data.{path}": {operator: operand}}).matches(envelope) is expected, operator
    if isinstance(operand, str):
        expected = any(v.startswith(operand) for v in flat)
        assert compile_filter({f"data.{path}": {"$startsWith": operand}}).matches(envelope) is expected


@settings(max_examples=300, deadline=None)
@given(document=documents, path=paths)
def test_exists_is_whether_the_path_reaches_anything(document: Any, path: str) -> None:
    reached = bool(_reference_values(document, path.split(".")))
    assert compile_filter({f"data.{path}": {"$exists": True}}).matches({"data": document}) is reached


def test_the_consumer_guides_example_is_a_valid_filter_that_means_what_it_says() -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "consumer-guide.md").read_text()
    section = guide.split("### Only some events of a type: content filters", 1)[1]
    example = json.loads(section.split("```json", 1)[1].split("```", 1)[0])
    guide_filter = compile_filter(example)
    assert guide_filter.matches(ENVELOPE)  # 150 EUR from a gold customer cus_42
    test_customer = {**ENVELOPE, "data": {**ENVELOPE["data"], "customer": {"id": "test_1", "tier": "gold"}}}
    assert not guide_filter.matches(test_customer)


def test_the_benchs_maximal_filter_is_at_the_caps_and_its_work_is_bounded_by_paths_not_tests_or_endpoints(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worst case bench/content_filters.py times, counted instead of timed: 1,000 maximal filters reading one
    event resolve and summarise each of its 18 distinct paths once, each summary splitting one list of scalars."""
    from bench import content_filters as bench

    worst = compile_filter(bench.maximal_filter())
    assert worst.nodes == MAX_FILTER_NODES
    assert pointer_of({"$or": [bench.maximal_filter()]}).startswith("/filter/$or/0")  # one more level is refused
    event = bench.envelope(2_000)
    summaries: list[Any] = []
    real = content_filter._scalars
    monkeypatch.setattr(content_filter, "_scalars", lambda node: summaries.append(node) or real(node))
    view = content_filter.EventView(event)

    outcomes = [view.passes(compile_filter(bench.maximal_filter(variant))) for variant in range(1_000)]

    assert not any(outcomes)  # nothing held, so nothing short-circuited
    assert len(summaries) == 2 * bench.NESTING  # one per distinct path, not per test or endpoint
    assert sum(len(real(node)) for node in summaries) == 2 * bench.NESTING * 2_000  # each list split once per path
