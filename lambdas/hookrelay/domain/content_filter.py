"""Content filters: which events of the types an endpoint subscribes to it wants, by what they carry.

A filter is a JSON object, evaluated against the envelope the endpoint would receive (`{"id", "type", "timestamp",
"data", …}`), so paths into the payload start with `data.`: `{"data.amount": {"$gte": 100}, "type": "order.paid"}`.

- Each key is a path (dot-separated keys; a segment of digits indexes an array) or a logical operator: `$and` and
  `$or` take a non-empty list of filters, `$not` one filter. The keys of one object must all hold (an implicit and).
- A path's value is a scalar (string, number, boolean, null: shorthand for `$eq`) or an object of operators, all of
  which must hold: `$eq`, `$neq`, `$in`, `$nin`, `$gt`, `$gte`, `$lt`, `$lte`, `$exists`, `$startsWith`.
- Arrays: a path reaches one value (each segment a key, or an index into an array: `data.items.0.sku`). When that
  value is an array, a test holds when it holds for any of its elements (nested arrays too): `{"data.tags": "vip"}`
  holds when `tags` contains "vip". A path does not go on through an array at a segment that is not an index: that
  would make one path's cost the size of the payload, and the tenant's filters' cost their number times it.
  `$exists` holds when the path reaches anything, null and empty arrays included.
- No coercion: `$eq`/`$in` compare type and value (`1` is not `"1"`, `true` is not `1`; `1` is `1.0`); `$gt`…`$lte`
  compare numbers with numbers and strings with strings (by code point, so RFC 3339 UTC times order as times), and a
  value of another type never satisfies them. `$neq` is exactly "not `$eq`" and `$nin` "not `$in`": both hold when
  the path reaches nothing.

Bounded work: a filter is checked and compiled once, when it is written (`compile_filter`, the caps in
domain/limits.py, each fault a problem naming its JSON pointer); the compiled form of a stored text is kept per
process (`compiled`). Evaluating never uses a regex and never backtracks. At fan-out every filter of the tenant reads
one event through one `EventView`: each distinct path is looked up once per event (one step per segment) and what it
reaches summarised once, each part when first asked (sets by kind, least and greatest, sorted strings), so
each test is then a set lookup, a comparison or a binary search, and a filter shared by endpoints is evaluated once.
One event costs O(distinct paths x segments + tests x log n + the scalars reached through arrays, each counted at most
MAX_FILTER_PATH_SEGMENTS times): linear in the filters and in the payload, never their product.
bench/content_filters.py measures a maximal filter against a large payload.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from hookrelay.domain.errors import InvalidDocument
from hookrelay.domain.limits import (
    MAX_FILTER_BYTES,
    MAX_FILTER_DEPTH,
    MAX_FILTER_IN_VALUES,
    MAX_FILTER_NODES,
    MAX_FILTER_PATH_LENGTH,
    MAX_FILTER_PATH_SEGMENTS,
)

AND, OR, NOT = "$and", "$or", "$not"
LOGICAL = (AND, OR, NOT)
EQ, NEQ, IN, NIN = "$eq", "$neq", "$in", "$nin"
GT, GTE, LT, LTE = "$gt", "$gte", "$lt", "$lte"
EXISTS, STARTS_WITH = "$exists", "$startsWith"
COMPARISONS = (EQ, NEQ, IN, NIN, GT, GTE, LT, LTE, EXISTS, STARTS_WITH)
OPERATORS = LOGICAL + COMPARISONS  # every operator, in the order the docs list them

# A scalar's kind, for comparisons without coercion: booleans are not numbers here, as they are not in JSON.
_STRING, _NUMBER, _BOOLEAN, _NULL = "string", "number", "boolean", "null"


def _kind(value: Any) -> str | None:
    """The JSON kind of a scalar; None for an object or array."""
    if isinstance(value, str):
        return _STRING
    if isinstance(value, bool):  # before int: bool is an int in Python, not a number in JSON
        return _BOOLEAN
    if isinstance(value, int | float):
        return _NUMBER
    if value is None:
        return _NULL
    return None


def _key(value: Any) -> tuple[str, Any] | None:
    """What equality compares: kind and value (so 1 == 1.0, but 1 != True and 1 != "1"); None for non-scalars."""
    kind = _kind(value)
    return None if kind is None else (kind, value)


# --- The compiled form ---


@dataclass(frozen=True, slots=True)
class _Segment:
    name: str
    index: int | None  # the segment as an array index, when it is one (digits, no leading zero)


Path = tuple[_Segment, ...]


@dataclass(frozen=True, slots=True)
class _Test:
    path: Path
    operator: str
    operand: Any  # a scalar; a frozenset of `_key`s for $in/$nin; a bool for $exists


@dataclass(frozen=True, slots=True)
class _Logic:
    operator: str  # $and, $or or $not (one child)
    children: tuple[Node, ...]


Node = _Test | _Logic


@dataclass(frozen=True)
class ContentFilter:
    """A checked filter: `text` is what is stored (compact JSON), `root` what is evaluated."""

    text: str
    root: Node = field(repr=False)
    nodes: int = field(repr=False)

    def matches(self, envelope: Mapping[str, Any]) -> bool:
        """Whether the event whose envelope (the JSON object the endpoint would receive) this is passes. Fan-out asks
        through one `EventView` per event instead, shared by every endpoint's filter."""
        return EventView(envelope).passes(self)

    @property
    def document(self) -> dict[str, Any]:
        """The filter as given (what the API shows)."""
        loaded: dict[str, Any] = json.loads(self.text)
        return loaded


# --- Checking and compiling ---


def _pointer(base: str, key: str | int) -> str:
    """`base` extended by one RFC 6901 reference token."""
    return f"{base}/{str(key).replace('~', '~0').replace('/', '~1')}"


def _problem(pointer: str, detail: str) -> InvalidDocument:
    return InvalidDocument(f"invalid filter: {detail}", [{"pointer": pointer, "detail": detail}])


@dataclass
class _Compiler:
    at: str  # the filter's own pointer in the request body
    nodes: int = 0

    def count(self, pointer: str) -> None:
        self.nodes += 1
        if self.nodes > MAX_FILTER_NODES:
            raise _problem(pointer, f"a filter has at most {MAX_FILTER_NODES} nodes (tests and $and/$or/$not)")

    def filter(self, raw: Any, pointer: str, depth: int) -> Node:
        """An object of paths and logical operators, all of which must hold."""
        if depth > MAX_FILTER_DEPTH:
            raise _problem(pointer, f"a filter nests at most {MAX_FILTER_DEPTH} levels ($and, $or and $not)")
        if not isinstance(raw, dict):
            raise _problem(pointer, "a filter is a JSON object")
        if not raw:
            raise _problem(pointer, "a filter has at least one path or operator")
        parts: list[Node] = []
        for key, value in raw.items():
            here = _pointer(pointer, key)
            if key in LOGICAL:
                parts.append(self.logic(key, value, here, depth))
            elif key.startswith("$"):
                raise _problem(here, f"unknown operator {key!r} here: use $and, $or, $not, or a path")
            else:
                parts.extend(self.tests(_path(key, here), value, here))
        return parts[0] if len(parts) == 1 else _Logic(AND, tuple(parts))

    def logic(self, operator: str, value: Any, pointer: str, depth: int) -> _Logic:
        self.count(pointer)
        if operator == NOT:
            return _Logic(NOT, (self.filter(value, pointer, depth + 1),))
        if not isinstance(value, list) or not value:
            raise _problem(pointer, f"{operator} takes a non-empty list of filters")
        if len(value) > MAX_FILTER_NODES:  # before compiling any: the node cap refuses it anyway
            raise _problem(pointer, f"a filter has at most {MAX_FILTER_NODES} nodes (tests and $and/$or/$not)")
        children = tuple(self.filter(item, _pointer(pointer, i), depth + 1) for i, item in enumerate(value))
        return _Logic(operator, children)

    def tests(self, path: Path, value: Any, pointer: str) -> list[Node]:
        if not isinstance(value, dict):
            self.count(pointer)
            return [_Test(path, EQ, _scalar(value, pointer, EQ))]
        if not value:
            raise _problem(pointer, "give a value, or an object of operators")
        tests: list[Node] = []
        for operator, operand in value.items():
            here = _pointer(pointer, operator)
            if operator not in COMPARISONS:
                raise _problem(here, _not_a_comparison(operator))
            self.count(here)
            tests.append(_Test(path, operator, _operand(operator, operand, here)))
        return tests


def _not_a_comparison(operator: str) -> str:
    if not operator.startswith("$"):
        return "a path's value is a scalar or an object of operators: reach into objects with a dotted path"
    return f"unknown operator {operator!r}: use one of {', '.join(COMPARISONS)}"


def _path(key: str, pointer: str) -> Path:
    if len(key) > MAX_FILTER_PATH_LENGTH:
        raise _problem(pointer, f"a path is at most {MAX_FILTER_PATH_LENGTH} characters, not {len(key)}")
    names = key.split(".")
    if len(names) > MAX_FILTER_PATH_SEGMENTS:
        raise _problem(pointer, f"a path has at most {MAX_FILTER_PATH_SEGMENTS} segments, not {len(names)}")
    if not all(names):
        raise _problem(pointer, f"a path is non-empty keys joined by single dots, not {key!r}")
    return tuple(_Segment(name, _index(name)) for name in names)


def _index(name: str) -> int | None:
    """The segment as an array index: ASCII digits with no leading zero (so "007" is always a key)."""
    if name.isascii() and name.isdigit() and (name == "0" or not name.startswith("0")):
        return int(name)
    return None


def _scalar(value: Any, pointer: str, operator: str) -> Any:
    if _kind(value) is None:
        where = "in a list" if operator in (IN, NIN) else f"for {operator}"
        hint = " (a list of values is $in)" if isinstance(value, list) and operator == EQ else ""
        raise _problem(pointer, f"a string, number, boolean or null {where}{hint}")
    if isinstance(value, float) and not math.isfinite(value):
        raise _problem(pointer, "numbers are finite")
    return value


def _operand(operator: str, operand: Any, pointer: str) -> Any:
    if operator in (EQ, NEQ):
        return _scalar(operand, pointer, operator)
    if operator in (IN, NIN):
        if not isinstance(operand, list) or not operand:
            raise _problem(pointer, f"{operator} takes a non-empty list of values")
        if len(operand) > MAX_FILTER_IN_VALUES:
            raise _problem(pointer, f"{operator} takes at most {MAX_FILTER_IN_VALUES} values, not {len(operand)}")
        return frozenset(_key(_scalar(item, _pointer(pointer, i), operator)) for i, item in enumerate(operand))
    if operator == EXISTS:
        if not isinstance(operand, bool):
            raise _problem(pointer, "$exists takes true or false")
        return operand
    if operator == STARTS_WITH:
        if not isinstance(operand, str):
            raise _problem(pointer, "$startsWith takes a string")
        return operand
    if _kind(operand) not in (_NUMBER, _STRING):  # $gt, $gte, $lt, $lte
        raise _problem(pointer, f"{operator} takes a number or a string")
    return _scalar(operand, pointer, operator)


def compile_filter(raw: Any, at: str = "/filter") -> ContentFilter:
    """The filter `raw` (as parsed from JSON) checked against the caps and compiled; else InvalidDocument (a 422)
    whose error names the JSON pointer of the fault, `at` being the filter's own place in the request body.

    The walk stops at the first fault, and is bounded before the size is measured: it never descends past
    MAX_FILTER_DEPTH nor compiles past MAX_FILTER_NODES, so a hostile filter costs no more than its caps."""
    compiler = _Compiler(at)
    root = compiler.filter(raw, at, 1)
    text = json.dumps(raw, separators=(",", ":"), ensure_ascii=False)
    size = len(text.encode())
    if size > MAX_FILTER_BYTES:
        raise _problem(at, f"a filter is at most {MAX_FILTER_BYTES} bytes as compact JSON, not {size}")
    return ContentFilter(text=text, root=root, nodes=compiler.nodes)


@lru_cache(maxsize=1024)  # at most ~1,024 x MAX_FILTER_BYTES of filters kept; a miss costs one compilation
def compiled(text: str) -> ContentFilter | None:
    """The compiled form of a stored filter, kept per process (fan-out compiles each endpoint's filter once, not once
    per event); None if it no longer passes the checks (a stored filter from a version with other caps): such an
    endpoint is then sent every event of its types, as if unfiltered, since refusing would drop what was accepted."""
    try:
        return compile_filter(json.loads(text))
    except (InvalidDocument, ValueError):
        return None


# --- Evaluating ---


_MISSING: Any = object()  # what a path that reaches nothing resolves to


def resolve(document: Any, path: Path) -> Any:
    """The one value `path` reaches in `document` (`_MISSING` when none): each segment a key of an object, or an index
    of an array. One lookup per segment, whatever the document's size."""
    node = document
    for segment in path:
        if isinstance(node, dict):
            if segment.name not in node:
                return _MISSING
            node = node[segment.name]
        elif isinstance(node, list) and segment.index is not None and segment.index < len(node):
            node = node[segment.index]
        else:
            return _MISSING
    return node


def _scalars(node: Any) -> list[Any]:
    """The scalars a reached value stands for: itself, or an array's elements (nested arrays too); an object none.
    Each array is split by comprehensions (in C), not element by element in Python."""
    if type(node) is not list:
        return [] if type(node) is dict or node is _MISSING else [node]
    out: list[Any] = []
    pending: list[list[Any]] = [node]
    while pending:
        array = pending.pop()
        out.extend([v for v in array if type(v) is not list and type(v) is not dict])
        pending.extend([v for v in array if type(v) is list])
    return out


class _Summary:
    """What tests ask of the values one path reaches, each part worked out once per event and only when first asked:
    `$eq`/`$in` are then set lookups, `$gt`…`$lte` compare with a least or greatest value, and `$startsWith` is one
    binary search in the sorted strings."""

    __slots__ = ("_number_bounds", "_numbers", "_others", "_sets", "_sorted", "_strings", "exists")

    def __init__(self, node: Any) -> None:
        self.exists = node is not _MISSING
        values = _scalars(node)
        # JSON's kinds, told apart by exact type: a bool is not a number here (nor 1 == True).
        self._strings: list[str] = [v for v in values if type(v) is str]
        self._numbers: list[Any] = [v for v in values if type(v) is int or type(v) is float]
        self._others: list[Any] = [v for v in values if v is None or type(v) is bool]
        self._sets: dict[str, frozenset[Any]] = {}
        self._sorted: list[str] | None = None
        self._number_bounds: tuple[Any, Any] | None = None

    def _of_kind(self, kind: str) -> list[Any]:
        if kind == _STRING:
            return self._strings
        if kind == _NUMBER:
            return self._numbers
        return [v for v in self._others if _kind(v) == kind]

    def _set(self, kind: str) -> frozenset[Any]:
        found = self._sets.get(kind)
        if found is None:
            found = self._sets[kind] = frozenset(self._of_kind(kind))
        return found

    def has(self, key: tuple[str, Any]) -> bool:
        """Whether some reached value is `key`'s value, of its kind."""
        return key[1] in self._set(key[0])

    def bounds(self, operand: Any) -> tuple[Any, Any] | None:
        """The least and greatest reached values of the operand's kind (number or string), if any."""
        if isinstance(operand, str):
            ordered = self.sorted_strings()
            return (ordered[0], ordered[-1]) if ordered else None
        if self._number_bounds is None and self._numbers:
            self._number_bounds = (min(self._numbers), max(self._numbers))
        return self._number_bounds

    def sorted_strings(self) -> list[str]:
        if self._sorted is None:
            self._sorted = sorted(self._strings)
        return self._sorted

    def starts_with(self, prefix: str) -> bool:
        # The strings starting with `prefix` sort together, from the first one not less than it.
        ordered = self.sorted_strings()
        at = bisect_left(ordered, prefix)
        return at < len(ordered) and ordered[at].startswith(prefix)


class EventView:
    """One event's envelope as every filter of a fan-out reads it: each distinct path is resolved and summarised once
    per event, whatever number of tests and endpoints ask for it, and each distinct filter is evaluated once per event
    (endpoints sharing a filter share its answer). So one event costs, over all the tenant's filters, one summary per
    distinct path (a path's lookups plus, when it reaches an array, a sort of its scalars: each scalar of the payload is
    in at most MAX_FILTER_PATH_SEGMENTS summaries, one per path through an array holding it) and O(log n) per test."""

    __slots__ = ("_envelope", "_outcomes", "_summaries")

    def __init__(self, envelope: Mapping[str, Any]) -> None:
        self._envelope = envelope
        self._summaries: dict[Path, _Summary] = {}
        self._outcomes: dict[str, bool] = {}

    def passes(self, content_filter: ContentFilter) -> bool:
        outcome = self._outcomes.get(content_filter.text)
        if outcome is None:
            outcome = self._outcomes[content_filter.text] = self._holds(content_filter.root)
        return outcome

    def summary(self, path: Path) -> _Summary:
        found = self._summaries.get(path)
        if found is None:
            found = self._summaries[path] = _Summary(resolve(self._envelope, path))
        return found

    def _holds(self, node: Node) -> bool:
        if isinstance(node, _Test):
            return _COMPARE[node.operator](self.summary(node.path), node.operand)
        if node.operator == AND:
            return all(self._holds(child) for child in node.children)
        if node.operator == OR:
            return any(self._holds(child) for child in node.children)
        return not self._holds(node.children[0])


def _equal(summary: _Summary, operand: Any) -> bool:
    key = _key(operand)
    return key is not None and summary.has(key)


def _among(summary: _Summary, operand: frozenset[tuple[str, Any]]) -> bool:
    return any(summary.has(key) for key in operand)  # at most MAX_FILTER_IN_VALUES lookups


def _greatest(holds: Callable[[Any, Any], bool]) -> Callable[[_Summary, Any], bool]:
    """`$gt`/`$gte`: some value exceeds the operand exactly when the greatest of its kind does."""

    def compare(summary: _Summary, operand: Any) -> bool:
        bounds = summary.bounds(operand)
        return bounds is not None and holds(bounds[1], operand)

    return compare


def _least(holds: Callable[[Any, Any], bool]) -> Callable[[_Summary, Any], bool]:
    """`$lt`/`$lte`: some value is below the operand exactly when the least of its kind is."""

    def compare(summary: _Summary, operand: Any) -> bool:
        bounds = summary.bounds(operand)
        return bounds is not None and holds(bounds[0], operand)

    return compare


_COMPARE: dict[str, Callable[[_Summary, Any], bool]] = {
    EQ: _equal,
    NEQ: lambda summary, operand: not _equal(summary, operand),
    IN: _among,
    NIN: lambda summary, operand: not _among(summary, operand),
    GT: _greatest(lambda value, operand: value > operand),
    GTE: _greatest(lambda value, operand: value >= operand),
    LT: _least(lambda value, operand: value < operand),
    LTE: _least(lambda value, operand: value <= operand),
    EXISTS: lambda summary, operand: summary.exists is operand,
    STARTS_WITH: lambda summary, operand: summary.starts_with(operand),
}
