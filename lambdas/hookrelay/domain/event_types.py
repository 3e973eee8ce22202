"""The event-type catalogue's rules: what a registered type is, which JSON Schemas the platform accepts, where a
failure points, and the "a filter must match a registered type" rule.

A type's schema (JSON Schema draft 7) is written by an admin and then run by ingest on every event of that type,
on data a producer sends. So a schema is accepted only if running it is bounded whatever the data is:

- **No regular expressions** (`pattern`, `patternProperties`): the validator matches them with Python's
  backtracking `re`, so one careless pattern (`^(a+)+$`) would let any producer's 256 KiB event hold ingest for
  minutes. A bounded-time engine (RE2) would be a compiled wheel in every function's asset for one keyword;
  `enum`, `const`, lengths and `format` (an annotation here, never asserted) cover what event data needs.
- **Only local references** (`$ref` starting with `#`), and no `$id`/`id`: a reference to anything else is a URL
  the validator would fetch, from inside the VPC-less ingest function, on an admin's say-so.
- **No loop that consumes no data**: `allOf`, `anyOf`, `oneOf`, `not`, `if`/`then`/`else`, `dependencies` and
  `$ref` apply a schema to the *same* value; a cycle through only those recurses until the stack runs out, on
  any event. Recursion through `properties` or `items` goes one level into the data each time, so the data's own
  (bounded) depth ends it.
- **Caps**: the schema's size and nesting, so that compiling it (once per warm container) stays cheap.

- **No blow-up on one value**: a reference reused through `anyOf` (and the other in-place applicators) can make
  a small schema check one value against exponentially many subschemas; at most `MAX_CHECKS_OF_ONE_VALUE`.

What remains costs time about linear in the data's size (`uniqueItems` the validator checks by hashing). As a last
guard for what this list did not foresee, ingest stops a check after `CHECK_SECONDS` (adapters/json_schema.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import unquote

from hookrelay.domain.matching import filter_matches

MAX_SCHEMA_BYTES = 16 * 1024  # a schema, written out compactly
MAX_SCHEMA_DEPTH = 32  # subschemas within subschemas
MAX_EXAMPLE_BYTES = 16 * 1024
MAX_DESCRIPTION = 1000
MAX_EVENT_TYPES = 1000  # in the catalogue: the filter rule reads every name
MAX_CHECKS_OF_ONE_VALUE = 1000  # subschemas one value is checked against, through in-place applicators
CHECK_SECONDS = 0.5  # a check that takes longer (a schema's blow-up this file did not foresee) is refused
# How long ingest keeps what it read of a type (per warm container): a change to the catalogue reaches every
# ingest container within this bound.
CATALOGUE_CACHE_SECONDS = 60

DRAFT_7 = "http://json-schema.org/draft-07/schema"
REFUSED_KEYWORDS: Mapping[str, str] = {
    "pattern": "regular expressions are not accepted (a backtracking match could hold ingest): use enum, const or "
    "lengths",
    "patternProperties": "regular expressions are not accepted (a backtracking match could hold ingest): name the "
    "properties",
    "$id": "schemas are anonymous: a base URI would make references remote",
    "id": "schemas are anonymous: a base URI would make references remote",
}
# Keywords whose value is one subschema, a list of them, or a map of names to them.
_ONE = ("additionalItems", "additionalProperties", "contains", "propertyNames", "not", "if", "then", "else")
_LIST = ("allOf", "anyOf", "oneOf")
_MAP = ("properties", "definitions", "$defs", "dependencies")
# Those that apply their subschemas to the value itself rather than to a part of it (and `$ref`).
_IN_PLACE = ("not", "if", "then", "else", *_LIST, "dependencies")


@dataclass(kw_only=True)
class EventType:
    """A registered event type. Its schema and example are kept as compact JSON text: stored as written (DynamoDB
    would nest at most 32 levels and turn floats into decimals), and compared as text (the compiled schema is
    reused while the text is the same)."""

    name: str
    description: str | None = None
    schema_text: str | None = None
    example_text: str | None = None
    deprecated: bool = False
    created_at: datetime
    updated_at: datetime

    @property
    def data_schema(self) -> dict[str, Any] | None:
        return None if self.schema_text is None else json.loads(self.schema_text)

    @property
    def example(self) -> dict[str, Any] | None:
        return None if self.example_text is None else json.loads(self.example_text)


@dataclass(frozen=True)
class Violation:
    """Where a document breaks a schema (an RFC 6901 JSON pointer into the request body) and why."""

    pointer: str
    detail: str

    def as_problem_error(self) -> dict[str, str]:
        return {"pointer": self.pointer, "detail": self.detail}


def json_pointer(parts: Iterable[str | int]) -> str:
    """RFC 6901: each reference token with `~` written `~0` and `/` written `~1`."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts)


def compact(document: Any) -> str:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def schema_violations(schema: Any, *, at: str = "/schema") -> list[Violation]:
    """Why the platform will not run this schema (pointers under `at`); empty when it is acceptable.

    Checks only what makes a schema unsafe to run; whether it is valid JSON Schema is the validator's question.
    """
    if not isinstance(schema, dict):
        return [Violation(at, "a schema is a JSON object")]
    size = len(compact(schema).encode())
    if size > MAX_SCHEMA_BYTES:
        return [Violation(at, f"a schema is at most {MAX_SCHEMA_BYTES} bytes written out compactly, not {size}")]
    declared = schema.get("$schema")
    if declared is not None and (not isinstance(declared, str) or declared.rstrip("#") != DRAFT_7):
        return [Violation(f"{at}/$schema", f"schemas are JSON Schema draft 7: leave $schema out or give {DRAFT_7}#")]
    subschemas: dict[str, Any] = {}
    found: list[Violation] = []
    for pointer, subschema, depth in _walk(schema, ""):
        subschemas[pointer] = subschema
        if depth > MAX_SCHEMA_DEPTH:
            return [Violation(at + pointer, f"a schema nests at most {MAX_SCHEMA_DEPTH} subschemas deep")]
        if isinstance(subschema, dict):
            found.extend(_keyword_violations(subschema, at + pointer))
    if found:
        return found
    return _loop_violations(subschemas, at)


def _walk(schema: Any, pointer: str, depth: int = 0) -> Iterator[tuple[str, Any, int]]:
    """Every subschema (objects and booleans) with its pointer and depth, the schema itself first."""
    yield pointer, schema, depth
    if not isinstance(schema, dict) or depth > MAX_SCHEMA_DEPTH:
        return
    for keyword, value in schema.items():
        for sub_pointer, subschema in _children(keyword, value, pointer):
            yield from _walk(subschema, sub_pointer, depth + 1)


def _children(keyword: str, value: Any, pointer: str) -> Iterator[tuple[str, Any]]:
    here = f"{pointer}{json_pointer([keyword])}"
    if keyword in _ONE or (keyword == "items" and not isinstance(value, list)):
        yield here, value
    elif keyword in _LIST or keyword == "items":
        if isinstance(value, list):
            yield from ((f"{here}/{index}", item) for index, item in enumerate(value))
    elif keyword in _MAP and isinstance(value, dict):
        for name, item in value.items():
            if keyword != "dependencies" or isinstance(item, dict | bool):  # a dependency may list property names
                yield f"{here}{json_pointer([name])}", item


def _keyword_violations(subschema: dict[str, Any], at: str) -> Iterator[Violation]:
    for keyword, reason in REFUSED_KEYWORDS.items():
        if keyword in subschema:
            yield Violation(f"{at}{json_pointer([keyword])}", reason)
    reference = subschema.get("$ref")
    if reference is not None and (not isinstance(reference, str) or not reference.startswith("#")):
        yield Violation(f"{at}/$ref", "only references within the schema (starting with #) are accepted")


def _loop_violations(subschemas: Mapping[str, Any], at: str) -> list[Violation]:
    """A cycle of subschemas each applying the next to the same value: it would never end (see the module)."""
    edges: dict[str, list[str]] = {}
    for pointer, subschema in subschemas.items():
        if not isinstance(subschema, dict):
            continue
        targets = [sub for k, v in subschema.items() if k in _IN_PLACE for sub, _ in _children(k, v, pointer)]
        reference = subschema.get("$ref")
        if isinstance(reference, str):
            target = _reference_pointer(reference)
            if target not in subschemas:
                return [Violation(f"{at}{pointer}/$ref", f"{reference!r} refers to no subschema of this schema")]
            targets.append(target)
        edges[pointer] = targets
    looping = _on_a_cycle(edges)
    if looping is not None:
        return [Violation(at + looping, "this subschema applies itself to the same value again, without end")]
    heaviest, checks = _most_checks_of_one_value(edges)
    if checks > MAX_CHECKS_OF_ONE_VALUE:
        return [
            Violation(
                at + heaviest,
                f"this subschema checks one value against {checks} subschemas (references reused through allOf, "
                f"anyOf, oneOf…); at most {MAX_CHECKS_OF_ONE_VALUE}",
            )
        ]
    return []


def _most_checks_of_one_value(edges: Mapping[str, Sequence[str]]) -> tuple[str, int]:
    """The subschema that checks one value against the most subschemas, counting each path through the in-place
    graph (acyclic by now): `anyOf` of two references to a definition that is `anyOf` of two references to the
    next… doubles at each step, though the schema itself stays small."""
    checks: dict[str, int] = {}
    for start in edges:
        stack = [start]
        while stack:  # iterative post-order: a long chain of references must not exhaust the stack
            node = stack[-1]
            pending = [child for child in edges.get(node, ()) if child not in checks]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            if node not in checks:
                checks[node] = min(
                    1 + sum(checks[child] for child in edges.get(node, ())), 10 * MAX_CHECKS_OF_ONE_VALUE
                )
    heaviest = max(checks, key=lambda node: checks[node], default="")
    return heaviest, checks.get(heaviest, 0)


def _reference_pointer(reference: str) -> str:
    """`#/definitions/a%20b` -> `/definitions/a b` (as the validator resolves it: percent-decoded, then RFC 6901)."""
    return unquote(reference[1:])


def _on_a_cycle(edges: Mapping[str, Sequence[str]]) -> str | None:
    """A node on a cycle of the graph, or None: an iterative depth-first search (no recursion on hostile input)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in edges:
        if start in state:
            continue
        stack: list[tuple[str, Iterator[str]]] = [(start, iter(edges.get(start, ())))]
        state[start] = 1
        while stack:
            node, pending = stack[-1]
            following = next(pending, None)
            if following is None:
                state[node] = 2
                stack.pop()
            elif state.get(following) == 1:
                return following
            elif following not in state:
                state[following] = 1
                stack.append((following, iter(edges.get(following, ()))))
    return None


def unregistered_filter(filters: Iterable[str], names: Sequence[str]) -> str | None:
    """The first filter that matches none of the registered type names, or None (the linear glob matcher)."""
    for pattern in filters:
        if not any(filter_matches(pattern, name) for name in names):
            return pattern
    return None


UNKNOWN_EVENT_TYPE = "unknown_event_type"  # the code of ingest's warning (openapi: IngestWarning)


def unknown_type_detail(event_type: str, registered: Sequence[str]) -> str | None:
    """Why an accepted event that reached no endpoint may be a typo: its type is not in a catalogue that has types,
    with the closest registered name when one is close. None when the type is registered or nothing is."""
    if not registered or event_type in registered:
        return None
    import difflib  # here, not at the top: only the rare unmatched-and-unregistered event pays its import

    close = difflib.get_close_matches(event_type, sorted(registered), n=1)
    hint = f"; did you mean {close[0]}?" if close else " (GET /v1/event-types lists the registered types)"
    return f"no endpoint matched {event_type!r} and the event catalogue has no such type{hint}"
