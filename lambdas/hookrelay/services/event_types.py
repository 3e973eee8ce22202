"""The event-type catalogue: admins register types (a description, a JSON Schema of `data`, an example); every
principal reads them; ingest holds events to their type's schema; endpoint filters may be held to the names.

Each change is one write (a PutItem or a DeleteItem): a process that dies before it changed nothing, after it
changed everything. A replace reads the stored type first only to keep its `created_at`; a concurrent replace
between the read and the write wins or loses whole (last writer wins), never mixes two requests.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hookrelay.domain.clock import utcnow
from hookrelay.domain.errors import Conflict, InvalidCursor, InvalidDocument, InvalidRequest, NotFound
from hookrelay.domain.event_types import (
    CATALOGUE_CACHE_SECONDS,
    MAX_EVENT_TYPES,
    MAX_EXAMPLE_BYTES,
    EventType,
    Violation,
    compact,
    schema_violations,
    unregistered_filter,
)
from hookrelay.domain.matching import EVENT_TYPE_PATTERN, MAX_LENGTH
from hookrelay.services.ports import EventTypeRepository, JsonSchemas, SchemaCheck

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
ENFORCE_VALUES = {"true": True, "false": False}


def enforce_from_config(raw: object) -> bool:
    """The "filters must match a registered type" switch (CDK context, function environment): true or false."""
    if raw is None or raw == "":
        return False
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.lower() in ENFORCE_VALUES:
        return ENFORCE_VALUES[raw.lower()]
    raise ValueError(f"{raw!r} is neither true nor false")


def _problems(detail: str, violations: list[Violation]) -> InvalidDocument:
    return InvalidDocument(detail, [v.as_problem_error() for v in violations])


@dataclass(frozen=True)
class TypePage:
    types: list[EventType]
    next_cursor: str | None


@dataclass
class EventTypeCatalogue:
    """The catalogue as the API serves it: admins change it, everyone reads it."""

    types: EventTypeRepository
    schemas: JsonSchemas

    def register(
        self,
        name: str,
        *,
        description: str | None,
        schema: dict[str, Any] | None,
        example: dict[str, Any] | None,
        deprecated: bool = False,
    ) -> tuple[EventType, bool]:
        """Create or replace the type; True when it was created. The schema must be one the platform runs (see
        domain/event_types.py) and valid draft 7, and the example must satisfy it."""
        _valid_name(name)
        if schema is not None:
            violations = schema_violations(schema) or [
                Violation(f"/schema{v.pointer}", v.detail) for v in self.schemas.schema_problems(schema)
            ]
            if violations:
                raise _problems("the schema is not one the platform accepts", violations)
        if example is not None:
            size = len(compact(example).encode())
            if size > MAX_EXAMPLE_BYTES:
                raise InvalidRequest(f"the example is at most {MAX_EXAMPLE_BYTES} bytes written out, not {size}")
            broken = self.schemas.compile(schema)(example) if schema is not None else None
            if broken is not None:
                raise _problems("the example does not satisfy the schema", [_under("/example", broken)])
        existing = self.types.get(name)
        if existing is None and len(self.types.names()) >= MAX_EVENT_TYPES:
            raise Conflict(f"the catalogue holds at most {MAX_EVENT_TYPES} event types: delete one first")
        now = utcnow()
        event_type = EventType(
            name=name,
            description=description,
            schema_text=None if schema is None else compact(schema),
            example_text=None if example is None else compact(example),
            deprecated=deprecated,
            created_at=existing.created_at if existing else now,
            updated_at=now,
        )
        self.types.put(event_type)
        return event_type, existing is None

    def get(self, name: str) -> EventType:
        found = self.types.get(name)
        if found is None:
            raise NotFound(f"no event type {name!r}")
        return found

    def page(self, *, limit: int = DEFAULT_LIMIT, cursor: str | None = None) -> TypePage:
        """By name, `limit` at a time; `next_cursor` resumes after the last one returned."""
        after = _decode_cursor(cursor) if cursor else None
        found, last = self.types.page(limit, after)
        return TypePage(found, _encode_cursor(last) if last else None)

    def delete(self, name: str) -> None:
        """Unregister it. Events of that type are accepted unchecked from then on (within ingest's cache bound);
        endpoints keep their filters."""
        if not self.types.delete(name):
            raise NotFound(f"no event type {name!r}")

    def check_filters(self, filters: list[str]) -> None:
        """Unless the catalogue is empty, every filter must match at least one registered type (the endpoint service
        asks only where the deployment enforces it: `enforce_event_catalogue`)."""
        names = self.types.names()
        if not names:
            return
        unmatched = unregistered_filter(filters, names)
        if unmatched is not None:
            raise InvalidDocument(
                f"the event type filter {unmatched!r} matches no registered event type (GET /v1/event-types)",
                [{"pointer": f"/event_types/{filters.index(unmatched)}", "detail": "matches no registered event type"}],
            )


def _valid_name(name: str) -> None:
    if not EVENT_TYPE_PATTERN.fullmatch(name):
        raise InvalidRequest(
            f"an event type name is 1 to {MAX_LENGTH} of A-Z a-z 0-9 _ . : - (no wildcards), not {name!r}"
        )


def _under(prefix: str, violation: Violation) -> Violation:
    return Violation(prefix + violation.pointer, violation.detail)


def _encode_cursor(name: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": name}).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> str:
    try:
        document = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError):
        raise InvalidCursor("the cursor is not one this API issued") from None
    after = document.get("after") if isinstance(document, dict) else None
    if not isinstance(after, str) or not EVENT_TYPE_PATTERN.fullmatch(after):
        raise InvalidCursor("the cursor is not one this API issued")
    return after


@dataclass
class _Known:
    read_at: float
    schema_text: str | None
    check: SchemaCheck | None


@dataclass
class EventDataCheck:
    """Ingest's side: an event's `data` against its type's schema, when its type is registered with one.

    What was read of a type (its schema, or that there is none) is kept `ttl_seconds` per warm container, so the
    catalogue costs ingest one read per type a minute, and a change reaches every container within that bound. A
    compiled schema is kept while its text is unchanged. At most `max_entries` types are remembered (producers
    choose type names), the least recently read forgotten first.
    """

    types: EventTypeRepository
    schemas: JsonSchemas
    ttl_seconds: float = CATALOGUE_CACHE_SECONDS
    max_entries: int = MAX_EVENT_TYPES
    clock: Callable[[], float] = time.monotonic
    _known: OrderedDict[str, _Known] = field(default_factory=OrderedDict)
    _names: tuple[float, list[str]] | None = None  # when the catalogue's names were read, and them

    def registered_names(self) -> list[str]:
        """The catalogue's type names, read at most once per `ttl_seconds` (only for events that matched no
        endpoint: the warning of an unknown type)."""
        now = self.clock()
        if self._names is None or now - self._names[0] >= self.ttl_seconds:
            self._names = (now, self.types.names())
        return self._names[1]

    def check(self, event_type: str, data: dict[str, Any]) -> None:
        check = self._check_for(event_type)
        broken = check(data) if check is not None else None
        if broken is not None:
            raise _problems(
                f"data does not satisfy the schema of event type {event_type!r} (GET /v1/event-types/{event_type})",
                [_under("/data", broken)],
            )

    def _check_for(self, event_type: str) -> SchemaCheck | None:
        now = self.clock()
        known = self._known.get(event_type)
        if known is None or now - known.read_at >= self.ttl_seconds:
            stored = self.types.get(event_type)
            text = stored.schema_text if stored else None
            if known is not None and known.schema_text == text:
                check = known.check
            else:
                check = self._compiled(event_type, stored.data_schema if stored else None)
            known = _Known(read_at=now, schema_text=text, check=check)
            self._known[event_type] = known
            while len(self._known) > self.max_entries:
                self._known.popitem(last=False)
        self._known.move_to_end(event_type)
        return known.check

    def _compiled(self, event_type: str, schema: dict[str, Any] | None) -> SchemaCheck | None:
        if schema is None:
            return None
        try:
            return self.schemas.compile(schema)
        except Exception:  # registration compiled it; a stored schema that no longer compiles is the platform's fault
            raise InvalidRequest(
                f"the registered schema of event type {event_type!r} cannot be run: an admin must register it again"
            ) from None
