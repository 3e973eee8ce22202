"""The event-type catalogue's rules: which schemas run, where a failure points, ingest's cache, the filter rule."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from hookrelay.adapters.json_schema import FastJsonSchemas, _time_limit, _TooSlow, locate
from hookrelay.domain.errors import Conflict, InvalidCursor, InvalidDocument, InvalidRequest, NotFound
from hookrelay.domain.event_types import (
    CATALOGUE_CACHE_SECONDS,
    MAX_EVENT_TYPES,
    MAX_SCHEMA_BYTES,
    MAX_SCHEMA_DEPTH,
    json_pointer,
    schema_violations,
    unknown_type_detail,
    unregistered_filter,
)
from hookrelay.services.event_types import EventDataCheck, EventTypeCatalogue, enforce_from_config
from tests.support.fakes import FakeEventTypes

ORDER = {
    "type": "object",
    "required": ["id", "amount"],
    "properties": {"id": {"type": "string"}, "amount": {"type": "integer", "minimum": 0}},
}


def pointers(schema: Any) -> list[str]:
    return [v.pointer for v in schema_violations(schema)]


# --- Which schemas the platform runs ---


def test_an_ordinary_schema_is_accepted() -> None:
    assert schema_violations(ORDER) == []
    assert schema_violations({"$schema": "http://json-schema.org/draft-07/schema#", **ORDER}) == []


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ({"properties": {"code": {"type": "string", "pattern": "^(a+)+$"}}}, "/schema/properties/code/pattern"),
        ({"patternProperties": {"^x": {}}}, "/schema/patternProperties"),
        ({"items": [{"allOf": [{"pattern": "a"}]}]}, "/schema/items/0/allOf/0/pattern"),
        ({"$ref": "https://example.com/schema.json"}, "/schema/$ref"),
        ({"$ref": "other.json#/x"}, "/schema/$ref"),
        ({"properties": {"a": {"$id": "http://evil.example/"}}}, "/schema/properties/a/$id"),
        ({"definitions": {"a": {"id": "http://evil.example/"}}}, "/schema/definitions/a/id"),
        ({"$schema": "http://json-schema.org/draft-04/schema#"}, "/schema/$schema"),
    ],
)
def test_regexes_remote_references_and_base_uris_are_refused(schema: dict[str, Any], pointer: str) -> None:
    assert pointer in pointers(schema)


def test_a_property_named_like_a_refused_keyword_is_only_a_name() -> None:
    assert schema_violations({"properties": {"pattern": {"type": "string"}, "id": {"type": "string"}}}) == []


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {"allOf": [{"$ref": "#"}]},
        {
            "definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"anyOf": [{"$ref": "#/definitions/a"}]}},
            "not": {"$ref": "#/definitions/a"},
        },
        {"definitions": {"a b": {"not": {"$ref": "#/definitions/a%20b"}}}, "$ref": "#/definitions/a%20b"},
        {"dependencies": {"x": {"$ref": "#"}}},
    ],
)
def test_a_loop_that_consumes_no_data_is_refused(schema: dict[str, Any]) -> None:
    [violation] = schema_violations(schema)
    assert "without end" in violation.detail


def test_a_reference_reused_into_an_exponential_number_of_checks_is_refused() -> None:
    definitions: dict[str, Any] = {"d0": {"type": "null"}}
    for n in range(1, 20):  # each level checks the next twice: 2**19 checks of one value, in 1.4 KiB of schema
        definitions[f"d{n}"] = {"anyOf": [{"$ref": f"#/definitions/d{n - 1}"}, {"$ref": f"#/definitions/d{n - 1}"}]}
    [violation] = schema_violations({"definitions": definitions, "$ref": "#/definitions/d19"})
    assert "at most" in violation.detail
    small = {"definitions": dict(list(definitions.items())[:5]), "$ref": "#/definitions/d4"}
    assert schema_violations(small) == []


def test_recursion_through_properties_is_bounded_by_the_data_and_accepted() -> None:
    tree = {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}}}}
    assert schema_violations(tree) == []


def test_a_reference_to_nothing_is_refused() -> None:
    [violation] = schema_violations({"$ref": "#/definitions/missing"})
    assert violation.pointer == "/schema/$ref" and "no subschema" in violation.detail


def test_size_and_depth_are_capped() -> None:
    huge = {"enum": ["x" * 100] * (MAX_SCHEMA_BYTES // 100)}
    [violation] = schema_violations(huge)
    assert str(MAX_SCHEMA_BYTES) in violation.detail
    deep: dict[str, Any] = {}
    for _ in range(MAX_SCHEMA_DEPTH + 5):
        deep = {"not": deep}
    [violation] = schema_violations(deep)
    assert str(MAX_SCHEMA_DEPTH) in violation.detail
    assert schema_violations(["not", "an object"]) and schema_violations(True)


def test_json_pointers_escape_tilde_and_slash() -> None:
    assert json_pointer(["data", "a/b", "c~d", 0]) == "/data/a~1b/c~0d/0"


# --- The validator adapter ---


def test_a_failure_points_at_the_failing_value() -> None:
    check = FastJsonSchemas().compile(ORDER)
    assert check({"id": "o1", "amount": 5}) is None
    broken = check({"id": "o1", "amount": -1})
    assert broken is not None and broken.pointer == "/amount" and "0" in broken.detail
    missing = check({"id": "o1"})
    assert missing is not None and missing.pointer == "" and "amount" in missing.detail


def test_keys_with_dots_brackets_and_slashes_are_located_exactly() -> None:
    schema = {"properties": {"a.b": {"properties": {"[0]": {"type": "string"}}}, "a": {"type": "object"}}}
    broken = FastJsonSchemas().compile(schema)({"a": {}, "a.b": {"[0]": 1}})
    assert broken is not None and broken.pointer == "/a.b/[0]"
    assert locate({"x": [{"y/z": 1}]}, ".x[0].y/z") == ["x", 0, "y/z"]
    assert locate({"a": {"b": 1}, "a.b": {"c": 2}}, ".a.b.c") == ["a.b", "c"]


def test_the_data_is_never_changed_and_formats_are_annotations() -> None:
    schema = {"properties": {"n": {"default": 5}, "e": {"type": "string", "format": "email"}}}
    data: dict[str, Any] = {"e": "not an address"}
    assert FastJsonSchemas().compile(schema)(data) is None
    assert data == {"e": "not an address"}


@pytest.mark.parametrize(
    ("schema", "document"),
    [
        ({"multipleOf": 1e-300}, 10**400),  # overflows a float: the library raises OverflowError
        ({"properties": {"a": {"$ref": "#"}}}, "deep"),  # nested past the stack
    ],
)
def test_a_document_that_cannot_be_checked_is_a_violation_not_a_crash(schema: dict[str, Any], document: Any) -> None:
    if document == "deep":
        document = {}
        for _ in range(5000):
            document = {"a": document}
    broken = FastJsonSchemas().compile(schema)(document)
    assert broken is not None and "could not be checked" in broken.detail


def test_a_check_that_runs_too_long_is_stopped_and_refused() -> None:
    slow = FastJsonSchemas(check_seconds=0.001).compile({"type": "array", "uniqueItems": True})
    broken = slow([{"n": n} for n in range(100_000)])
    assert broken is not None and "took over 0.001 s" in broken.detail
    assert FastJsonSchemas().compile({"type": "array", "uniqueItems": True})([1, 2]) is None  # the timer was reset


def test_a_time_limit_whose_signal_was_swallowed_stops_the_check_all_the_same() -> None:
    """An exception raised in a garbage collector's callback or a `__del__` is only reported, never raised: a time
    limit's signal landing there must not let the check run on unlimited (it did once, under hypothesis's gc hook)."""
    with pytest.raises(_TooSlow), _time_limit(0.001):
        try:
            _spin(10.0)
        except _TooSlow:
            pass  # swallowed, as Python swallows it in a gc callback
        _spin(10.0)  # a generous bound: without the timer armed again, this ends and nothing is raised


def _spin(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pass


def test_invalid_json_schema_is_reported_with_a_pointer() -> None:
    schemas = FastJsonSchemas()
    assert schemas.schema_problems(ORDER) == []
    [problem] = schemas.schema_problems({"properties": {"a": {"minimum": "zero"}}})
    assert problem.pointer == "/properties/a/minimum"
    assert schemas.schema_problems({"required": "id"})[0].pointer == "/required"


def test_references_the_validator_would_confuse_are_refused() -> None:
    """fastjsonschema names a reference's compiled function after its target, lowercased and with punctuation as
    `_`: two such targets would share one function, and one property be checked against the other's schema."""
    schema = {
        "definitions": {"a-b": {"type": "string"}, "A_b": {"type": "integer"}},
        "properties": {"x": {"$ref": "#/definitions/a-b"}, "y": {"$ref": "#/definitions/A_b"}},
    }
    [problem] = FastJsonSchemas().schema_problems(schema)
    assert "#/definitions/a-b" in problem.detail and "#/definitions/A_b" in problem.detail
    same_target = {"definitions": {"a b": {"type": "string"}}, "properties": {"x": {"$ref": "#/definitions/a%20b"}}}
    assert FastJsonSchemas().schema_problems({**same_target, "items": {"$ref": "#/definitions/a b"}}) == []


# --- The catalogue service ---


def catalogue() -> EventTypeCatalogue:
    return EventTypeCatalogue(FakeEventTypes(), FastJsonSchemas())


def test_register_replace_and_delete() -> None:
    service = catalogue()
    created, fresh = service.register("order.created", description="d", schema=ORDER, example={"id": "o", "amount": 1})
    assert fresh and created.data_schema == ORDER and created.example == {"id": "o", "amount": 1}
    replaced, fresh = service.register("order.created", description="e", schema=None, example=None)
    assert not fresh and replaced.created_at == created.created_at and replaced.data_schema is None
    service.delete("order.created")
    with pytest.raises(NotFound):
        service.get("order.created")
    with pytest.raises(NotFound):
        service.delete("order.created")


def test_the_example_must_satisfy_the_schema() -> None:
    with pytest.raises(InvalidDocument) as refused:
        catalogue().register("order.created", description=None, schema=ORDER, example={"id": "o", "amount": -1})
    assert refused.value.errors == [{"pointer": "/example/amount", "detail": "must be bigger than or equal to 0"}]


def test_an_unsafe_or_invalid_schema_is_refused_with_pointers() -> None:
    with pytest.raises(InvalidDocument) as unsafe:
        catalogue().register("a", description=None, schema={"properties": {"x": {"pattern": "a"}}}, example=None)
    assert [e["pointer"] for e in unsafe.value.errors] == ["/schema/properties/x/pattern"]
    with pytest.raises(InvalidDocument) as invalid:
        catalogue().register("a", description=None, schema={"type": "decimal"}, example=None)
    assert invalid.value.errors[0]["pointer"].startswith("/schema/type")


@pytest.mark.parametrize("name", ["order.*", "", "a b", "x" * 129])
def test_names_are_event_types_without_wildcards(name: str) -> None:
    with pytest.raises(InvalidRequest):
        catalogue().register(name, description=None, schema=None, example=None)


def test_the_catalogue_is_capped() -> None:
    service = catalogue()
    for n in range(MAX_EVENT_TYPES):
        service.types.put(service.register(f"t{n}", description=None, schema=None, example=None)[0])
    with pytest.raises(Conflict):
        service.register("one.more", description=None, schema=None, example=None)
    service.register("t0", description="replacing is not growing", schema=None, example=None)


def test_pages_by_name_with_an_opaque_cursor() -> None:
    service = catalogue()
    for name in ("c", "a", "b"):
        service.register(name, description=None, schema=None, example=None)
    first = service.page(limit=2)
    assert [t.name for t in first.types] == ["a", "b"] and first.next_cursor
    second = service.page(limit=2, cursor=first.next_cursor)
    assert [t.name for t in second.types] == ["c"] and second.next_cursor is None
    for forged in ("not base64!", "eyJhZnRlciI6IDF9", "bm90IGpzb24"):
        with pytest.raises(InvalidCursor):
            service.page(cursor=forged)


def test_a_filter_must_match_a_registered_type_unless_the_catalogue_is_empty() -> None:
    service = catalogue()
    service.check_filters(["anything.*"])  # empty catalogue: nothing to hold filters to
    service.register("order.created", description=None, schema=None, example=None)
    service.check_filters(["order.*", "*", "order.created", "*.created"])
    with pytest.raises(InvalidDocument) as refused:
        service.check_filters(["order.*", "invoice.*"])
    assert "'invoice.*'" in refused.value.detail and refused.value.errors[0]["pointer"] == "/event_types/1"
    assert unregistered_filter(["a*", "b"], ["a.x"]) == "b"


@pytest.mark.parametrize(
    ("raw", "expected"), [(None, False), ("", False), ("false", False), ("TRUE", True), (True, True)]
)
def test_the_enforcement_switch_reads_true_or_false(raw: object, expected: bool) -> None:
    assert enforce_from_config(raw) is expected


def test_the_enforcement_switch_refuses_anything_else() -> None:
    with pytest.raises(ValueError):
        enforce_from_config("yes")


# --- Ingest's check and its cache ---


class Ticks:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_ingest_checks_data_against_the_registered_schema() -> None:
    types = FakeEventTypes()
    EventTypeCatalogue(types, FastJsonSchemas()).register("order.created", description=None, schema=ORDER, example=None)
    check = EventDataCheck(types, FastJsonSchemas())
    check.check("order.created", {"id": "o", "amount": 3})
    check.check("unregistered.type", {"anything": True})
    with pytest.raises(InvalidDocument) as refused:
        check.check("order.created", {"id": "o", "amount": "three"})
    assert refused.value.errors == [{"pointer": "/data/amount", "detail": "must be integer"}]


def test_ingest_reads_each_type_once_per_cache_period_and_sees_changes_after_it() -> None:
    types, clock = FakeEventTypes(), Ticks()
    service = EventTypeCatalogue(types, FastJsonSchemas())
    check = EventDataCheck(types, FastJsonSchemas(), clock=clock)
    for _ in range(5):
        check.check("order.created", {"amount": "x"})  # not registered: unchecked, and that is remembered
    assert types.reads == 1
    service.register("order.created", description=None, schema=ORDER, example=None)
    clock.now = CATALOGUE_CACHE_SECONDS - 0.001
    check.check("order.created", {"amount": "x"})  # still within the bound: the old answer
    clock.now = CATALOGUE_CACHE_SECONDS
    with pytest.raises(InvalidDocument):
        check.check("order.created", {"amount": "x"})


def test_ingest_remembers_a_bounded_number_of_types() -> None:
    types = FakeEventTypes()
    check = EventDataCheck(types, FastJsonSchemas(), max_entries=3)
    for n in range(10):
        check.check(f"type.{n}", {})
    assert len(check._known) == 3 and list(check._known) == ["type.7", "type.8", "type.9"]


def test_a_compiled_schema_is_reused_while_its_text_is_unchanged() -> None:
    compiled: list[str] = []

    class CountingSchemas(FastJsonSchemas):
        def compile(self, schema: dict[str, Any]) -> Any:
            compiled.append(json.dumps(schema))
            return super().compile(schema)

    types, clock = FakeEventTypes(), Ticks()
    EventTypeCatalogue(types, FastJsonSchemas()).register("t", description=None, schema=ORDER, example=None)
    check, types.reads = EventDataCheck(types, CountingSchemas(), clock=clock), 0
    for minute in range(3):
        clock.now = minute * CATALOGUE_CACHE_SECONDS
        check.check("t", {"id": "o", "amount": 1})
    assert types.reads == 3 and len(compiled) == 1


def test_a_crash_before_the_one_write_changes_nothing_and_a_retry_converges() -> None:
    """A registration is one write (the read before it only keeps `created_at`): dying before it leaves the
    catalogue as it was, and the admin's retry registers the type."""

    class CrashingOnce(FakeEventTypes):
        crashed = False

        def put(self, event_type: Any) -> None:
            if not self.crashed:
                self.crashed = True
                raise RuntimeError("the process died before its write")
            super().put(event_type)

    types = CrashingOnce()
    service = EventTypeCatalogue(types, FastJsonSchemas())
    with pytest.raises(RuntimeError):
        service.register("order.created", description=None, schema=ORDER, example=None)
    assert types.names() == []
    registered, created = service.register("order.created", description=None, schema=ORDER, example=None)
    assert created and types.names() == ["order.created"] and registered.data_schema == ORDER


# --- The warning of an accepted event that matched nothing and is not in the catalogue ---


def test_an_unknown_type_close_to_a_registered_one_is_suggested() -> None:
    detail = unknown_type_detail("oder.created", ["invoice.paid", "order.created", "order.shipped"])
    assert detail is not None and detail.endswith("did you mean order.created?")
    assert "'oder.created'" in detail


def test_an_unknown_type_close_to_nothing_points_at_the_catalogue() -> None:
    detail = unknown_type_detail("zzz", ["order.created"])
    assert detail is not None and "did you mean" not in detail and "GET /v1/event-types" in detail


@pytest.mark.parametrize("registered", [[], ["order.created"]])
def test_a_registered_type_or_an_empty_catalogue_has_no_warning(registered: list[str]) -> None:
    assert unknown_type_detail("order.created", registered) is None


def test_ingest_reads_the_catalogues_names_once_per_cache_period() -> None:
    types, clock = FakeEventTypes(), Ticks()
    catalogue = EventTypeCatalogue(types, FastJsonSchemas())
    check = EventDataCheck(types, FastJsonSchemas(), clock=clock)
    assert check.registered_names() == []
    catalogue.register("order.created", description=None, schema=None, example=None)
    assert check.registered_names() == []  # within the cache period: what was read
    clock.now = CATALOGUE_CACHE_SECONDS
    assert check.registered_names() == ["order.created"]
