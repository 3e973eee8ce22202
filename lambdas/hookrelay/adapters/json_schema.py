"""JSON Schema (draft 7) by `fastjsonschema`, imported on first use: ingest pays for it only once an event's type
has a schema.

Why fastjsonschema and not `jsonschema`: `bench/schema_validation.py` runs both side by side in fresh
interpreters (figures in bench/README.md). For a typical order schema, a cold container's first check costs
29 ms against 264 ms (import included), each later event 13 µs against 384 µs; it is pure Python (no compiled
wheel in the asset). Its cost is compiling, which grows with the schema (222 ms at the 16 KiB cap,
domain/event_types.MAX_SCHEMA_BYTES, about jsonschema's import alone), once per schema per warm container.
Its two faults met here are handled below: its failure names are ambiguous (`locate` reads them against the
document), and it compiles two references whose targets differ only in case or punctuation into one function
(such schemas are refused).

It is run with formats off (`format` is an annotation, as in JSON Schema 2020-12: no regex of ours or of the
producer's is matched), defaults off (it would write them into the event), and every remote reference refused
(domain/event_types.py refuses them before this is reached; the handlers below are the second lock).
"""

from __future__ import annotations

import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote

from hookrelay.domain.event_types import CHECK_SECONDS, DRAFT_7, Violation, json_pointer

Check = Callable[[Any], Violation | None]

# The draft 7 meta-schema (json-schema.org/draft-07/schema), less its `$id`, `$schema` and the `format`s it only
# annotates: what `schema_problems` holds a registered schema to.
_SCHEMA_ARRAY = {"type": "array", "minItems": 1, "items": {"$ref": "#"}}
_NON_NEGATIVE = {"type": "integer", "minimum": 0}
_STRING_ARRAY = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
_SIMPLE_TYPES = {"enum": ["array", "boolean", "integer", "null", "number", "object", "string"]}
META_SCHEMA: dict[str, Any] = {
    "definitions": {
        "schemaArray": _SCHEMA_ARRAY,
        "nonNegativeInteger": _NON_NEGATIVE,
        "stringArray": _STRING_ARRAY,
        "simpleTypes": _SIMPLE_TYPES,
    },
    "type": ["object", "boolean"],
    "properties": {
        "$schema": {"type": "string"},
        "$ref": {"type": "string"},
        "$comment": {"type": "string"},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "readOnly": {"type": "boolean"},
        "examples": {"type": "array"},
        "multipleOf": {"type": "number", "exclusiveMinimum": 0},
        "maximum": {"type": "number"},
        "exclusiveMaximum": {"type": "number"},
        "minimum": {"type": "number"},
        "exclusiveMinimum": {"type": "number"},
        "maxLength": {"$ref": "#/definitions/nonNegativeInteger"},
        "minLength": {"$ref": "#/definitions/nonNegativeInteger"},
        "additionalItems": {"$ref": "#"},
        "items": {"anyOf": [{"$ref": "#"}, {"$ref": "#/definitions/schemaArray"}]},
        "maxItems": {"$ref": "#/definitions/nonNegativeInteger"},
        "minItems": {"$ref": "#/definitions/nonNegativeInteger"},
        "uniqueItems": {"type": "boolean"},
        "contains": {"$ref": "#"},
        "maxProperties": {"$ref": "#/definitions/nonNegativeInteger"},
        "minProperties": {"$ref": "#/definitions/nonNegativeInteger"},
        "required": {"$ref": "#/definitions/stringArray"},
        "additionalProperties": {"$ref": "#"},
        "definitions": {"type": "object", "additionalProperties": {"$ref": "#"}},
        "properties": {"type": "object", "additionalProperties": {"$ref": "#"}},
        "dependencies": {
            "type": "object",
            "additionalProperties": {"anyOf": [{"$ref": "#"}, {"$ref": "#/definitions/stringArray"}]},
        },
        "propertyNames": {"$ref": "#"},
        "enum": {"type": "array"},
        "type": {
            "anyOf": [
                {"$ref": "#/definitions/simpleTypes"},
                {"type": "array", "items": {"$ref": "#/definitions/simpleTypes"}, "minItems": 1, "uniqueItems": True},
            ]
        },
        "format": {"type": "string"},
        "contentMediaType": {"type": "string"},
        "contentEncoding": {"type": "string"},
        "if": {"$ref": "#"},
        "then": {"$ref": "#"},
        "else": {"$ref": "#"},
        "allOf": {"$ref": "#/definitions/schemaArray"},
        "anyOf": {"$ref": "#/definitions/schemaArray"},
        "oneOf": {"$ref": "#/definitions/schemaArray"},
        "not": {"$ref": "#"},
    },
}
# A failure's location is recovered by walking the data along the validator's dotted name; a hostile document
# with many keys that are prefixes of one another gets at most this many steps, then the deepest part found.
_LOCATE_STEPS = 10_000


def _refuse_remote(uri: str) -> Any:
    raise ValueError(f"remote references are not resolved: {uri}")


_NO_REMOTE = dict.fromkeys(("http", "https", "file", "ftp", "data", "urn", ""), _refuse_remote)


class _TooSlow(Exception):
    pass


_EXPIRE_AGAIN_SECONDS = 0.01  # after a time limit's signal, until the check is stopped


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Raise `_TooSlow` in the block after `seconds`: SIGALRM, so only in the main thread (where Lambda runs a
    handler); elsewhere (the local stack's server threads) no limit. A timer already set (pytest-timeout's) is
    put back afterwards, less the time spent. The checks are pure: stopping one midway leaves nothing behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    remaining, interval = signal.getitimer(signal.ITIMER_REAL)
    if remaining and remaining <= seconds:  # the timer already set fires first anyway
        yield
        return

    def expire(signum: int, frame: object) -> None:
        # Armed again first: an exception raised where Python only reports it (a garbage collector's callback, a
        # `__del__`) is swallowed, and the check would run on unlimited; the next one lands in the check itself.
        signal.setitimer(signal.ITIMER_REAL, _EXPIRE_AGAIN_SECONDS)
        raise _TooSlow

    started = time.monotonic()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
        if remaining:
            signal.setitimer(signal.ITIMER_REAL, max(remaining - (time.monotonic() - started), 0.001), interval)


class FastJsonSchemas:
    """The `JsonSchemas` port on fastjsonschema."""

    def __init__(self, check_seconds: float = CHECK_SECONDS) -> None:
        self._meta: Check | None = None
        self.check_seconds = check_seconds

    def schema_problems(self, schema: dict[str, Any]) -> list[Violation]:
        """Why `schema` is not valid JSON Schema draft 7 (pointers into the schema), or nothing."""
        if self._meta is None:
            self._meta = self._compile(META_SCHEMA)
        found = self._meta(schema) or _colliding_references(schema)
        if found is not None:
            return [found]
        try:
            self._compile(schema)
        except Exception as error:  # fastjsonschema's definition errors, and whatever else a schema can provoke
            return [Violation("", f"the schema cannot be compiled: {error}")]
        return []

    def compile(self, schema: dict[str, Any]) -> Check:
        return self._compile(schema)

    def _compile(self, schema: dict[str, Any]) -> Check:
        import fastjsonschema

        validate = fastjsonschema.compile(
            {**schema, "$schema": DRAFT_7 + "#"},
            handlers=_NO_REMOTE,
            use_default=False,
            use_formats=False,
        )

        def check(document: Any) -> Violation | None:
            try:
                with _time_limit(self.check_seconds):
                    validate(document)
            except _TooSlow:
                return Violation("", f"the document took over {self.check_seconds:g} s to check against the schema")
            except fastjsonschema.JsonSchemaValueException as failure:
                pointer = json_pointer(locate(document, (failure.name or "data")[len("data") :]))
                where, message = failure.name or "data", failure.message or "is invalid"
                return Violation(pointer, message.removeprefix(where + " "))
            except (RecursionError, ArithmeticError, ValueError, TypeError) as error:
                # Nested deeper than the stack, or a number the check cannot compute with (1e308 / 1e-300).
                reason = "it is nested too deeply" if isinstance(error, RecursionError) else type(error).__name__
                return Violation("", f"the document could not be checked against the schema: {reason}")
            return None

        return check


def _function_name(reference: str) -> str:
    """The name fastjsonschema gives the function it compiles a reference's target into (its RefResolver's
    `get_scope_name`, for a schema with no base URI)."""
    name = "validate_" + unquote(reference).replace("~1", "_").replace("~0", "_").replace('"', "")
    return re.sub(r"($[^a-zA-Z]|[^a-zA-Z0-9])", "_", name).lower().rstrip("_")


def _colliding_references(schema: dict[str, Any]) -> Violation | None:
    """Two references to different targets that fastjsonschema would compile into one function (`#/definitions/a-b`
    and `#/definitions/A_b`): the second would silently validate against the first. Refused instead."""
    targets: dict[str, str] = {}
    pending: list[Any] = [schema]
    while pending:  # iterative: an `enum` value may nest far deeper than the subschemas
        node = pending.pop()
        if isinstance(node, dict):
            reference = node.get("$ref")
            if isinstance(reference, str):
                name, target = _function_name(reference), unquote(reference)
                if targets.setdefault(name, target) != target:
                    return Violation(
                        "",
                        f"the references {targets[name]!r} and {target!r} differ only in case or punctuation, which "
                        "the validator cannot tell apart: rename one of their targets",
                    )
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return None


def locate(document: Any, name: str) -> list[str | int]:
    """The path the validator's `name` (`.key` and `[index]` segments after `data`) stands for in `document`.

    Its names are ambiguous (a key may hold `.` or `[`); the document itself disambiguates: a dict's segment is
    one of its keys, a list's an index. The longest key that fits is tried first, and others only if it leads
    nowhere, within `_LOCATE_STEPS`; failing that, the deepest part found.
    """
    steps = 0
    deepest: list[str | int] = []
    depth_limit = sys.getrecursionlimit() // 4

    def walk(value: Any, rest: str, path: list[str | int]) -> list[str | int] | None:
        nonlocal steps, deepest
        steps += 1
        if len(path) > len(deepest):
            deepest = path
        if not rest:
            return path
        if steps > _LOCATE_STEPS or len(path) > depth_limit:
            return None
        if isinstance(value, list) and rest.startswith("["):
            index, _, after = rest[1:].partition("]")
            if index.isdigit() and int(index) < len(value):
                return walk(value[int(index)], after, [*path, int(index)])
            return None
        if isinstance(value, dict) and rest.startswith("."):
            tail = rest[1:]
            fitting = [k for k in value if tail.startswith(k) and tail[len(k) : len(k) + 1] in ("", ".", "[")]
            for key in sorted(fitting, key=len, reverse=True):
                found = walk(value[key], tail[len(key) :], [*path, key])
                if found is not None:
                    return found
        return None

    found = walk(document, name, [])
    return found if found is not None else deepest
