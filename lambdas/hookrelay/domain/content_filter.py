"""Content filters: which events of the types an endpoint subscribes to it wants, by what they carry.

A filter is a JSON object, evaluated against the envelope the endpoint would receive (`{"id", "type", "timestamp",
"data", …}`), so paths into the payload start with `data.`: `{"data.amount": {"$gte": 100}, "type": "order.paid"}`.

- Each key is a path (dot-separated keys; a segment of digits indexes an array) or a logical operator: `$and` and
  `$or` take a non-empty list of filters, `$not` one filter. The keys of one object must all hold (an implicit and).
- A path's value is a scalar (string, number, boolean, null: shorthand for `$eq`) or an object of operators, all of
  which must hold: `$eq`, `$neq`, `$in`, `$nin`, `$gt`, `$gte`, `$lt`, `$lte`, `$exists`, `$startsWith`.
- Arrays: a path that meets an array (at a segment that is not an index) goes on into every element, and a test
  holds when it holds for any value the path reaches; a reached array is tested by its elements
  (`{"data.tags": "vip"}` holds when `tags` contains "vip"). `$exists` holds when the path reaches anything, null
  and empty arrays included.
- No coercion: `$eq`/`$in` compare type and value (`1` is not `"1"`, `true` is not `1`; `1` is `1.0`); `$gt`…`$lte`
  compare numbers with numbers and strings with strings (by code point, so RFC 3339 UTC times order as times), and a
  value of another type never satisfies them. `$neq` is exactly "not `$eq`" and `$nin` "not `$in`": both hold when
  the path reaches nothing.

Bounded work: a filter is checked and compiled once, when it is written (`compile_filter`, the caps in
domain/limits.py, each fault a problem naming its JSON pointer); the compiled form of a stored text is kept per
process (`compiled`). Evaluating never uses a regex and never backtracks: each of the at most MAX_FILTER_NODES tests
resolves its path once per event (a path shared by several tests is resolved once, `_Evaluation`), visiting each
payload value under it at most once, and then tests each reached value in O(1) (`$in` is a set lookup;
`$startsWith` compares at most its operand's length). So one event costs O(distinct paths x payload values) at
worst, linear in the payload for any filter within the caps, and O(path segments) per test when no arrays are met.
bench/content_filters.py measures a maximal filter against a large payload.
"""

from __future__ import annotations

import json
import math
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
        """Whether the event whose envelope (the JSON object the endpoint would receive) this is passes."""
        return _Evaluation(envelope).holds(self.root)

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


@lru_cache(maxsize=4096)
def compiled(text: str) -> ContentFilter | None:
    """The compiled form of a stored filter, kept per process (fan-out compiles each endpoint's filter once, not once
    per event); None if it no longer passes the checks (a stored filter from a version with other caps): such an
    endpoint is then sent every event of its types, as if unfiltered, since refusing would drop what was accepted."""
    try:
        return compile_filter(json.loads(text))
    except (InvalidDocument, ValueError):
        return None


# --- Evaluating ---


class _Evaluation:
    """One event against one filter: each distinct path is resolved once, whatever number of tests share it."""

    __slots__ = ("_envelope", "_reached", "_values")

    def __init__(self, envelope: Mapping[str, Any]) -> None:
        self._envelope = envelope
        self._reached: dict[Path, list[Any]] = {}
        self._values: dict[Path, list[Any]] = {}

    def holds(self, node: Node) -> bool:
        if isinstance(node, _Test):
            return self._test(node)
        if node.operator == AND:
            return all(self.holds(child) for child in node.children)
        if node.operator == OR:
            return any(self.holds(child) for child in node.children)
        return not self.holds(node.children[0])

    def _test(self, test: _Test) -> bool:
        if test.operator == EXISTS:
            return bool(self.reached(test.path)) is test.operand
        return _COMPARE[test.operator](self.values(test.path), test.operand)

    def reached(self, path: Path) -> list[Any]:
        found = self._reached.get(path)
        if found is None:
            found = self._reached[path] = resolve(self._envelope, path)
        return found

    def values(self, path: Path) -> list[Any]:
        """The scalars tested: those reached, and the elements of arrays reached (nested arrays too)."""
        found = self._values.get(path)
        if found is None:
            found = self._values[path] = _scalars(self.reached(path))
        return found


def resolve(document: Any, path: Path) -> list[Any]:
    """Every value `path` reaches in `document`: an index segment indexes an array; another segment is a key, and an
    array met before it is gone through element by element (nested arrays too). Each value is visited at most once:
    a document is a tree, and each of its values is met at one segment of the path only."""
    current = [document]
    for segment in path:
        following: list[Any] = []
        for value in current:
            _step(value, segment, following)
        if not following:
            return following
        current = following
    return current


def _step(value: Any, segment: _Segment, into: list[Any]) -> None:
    pending = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            if segment.name in node:
                into.append(node[segment.name])
        elif isinstance(node, list):
            if segment.index is None:
                pending.extend(reversed(node))  # any element: in order, each once
            elif segment.index < len(node):
                into.append(node[segment.index])


def _scalars(reached: list[Any]) -> list[Any]:
    out: list[Any] = []
    pending = list(reversed(reached))
    while pending:
        node = pending.pop()
        if isinstance(node, list):
            pending.extend(reversed(node))
        elif not isinstance(node, dict):
            out.append(node)
    return out


def _equal(values: list[Any], operand: Any) -> bool:
    wanted = _key(operand)
    return any(_key(value) == wanted for value in values)


def _among(values: list[Any], operand: frozenset[tuple[str, Any]]) -> bool:
    return any(_key(value) in operand for value in values)


def _ordered(holds: Callable[[Any, Any], bool]) -> Callable[[list[Any], Any], bool]:
    def compare(values: list[Any], operand: Any) -> bool:
        kind = _kind(operand)
        return any(_kind(value) == kind and holds(value, operand) for value in values)

    return compare


def _starts_with(values: list[Any], operand: str) -> bool:
    return any(isinstance(value, str) and value.startswith(operand) for value in values)


_COMPARE: dict[str, Callable[[list[Any], Any], bool]] = {
    EQ: _equal,
    NEQ: lambda values, operand: not _equal(values, operand),
    IN: _among,
    NIN: lambda values, operand: not _among(values, operand),
    GT: _ordered(lambda value, operand: value > operand),
    GTE: _ordered(lambda value, operand: value >= operand),
    LT: _ordered(lambda value, operand: value < operand),
    LTE: _ordered(lambda value, operand: value <= operand),
    STARTS_WITH: _starts_with,
}
