"""EventTypeRepository: the catalogue by name, alike on the in-memory fake and on DynamoDB."""

from __future__ import annotations

import json
from typing import Any

from hookrelay.domain.event_types import EventType, compact
from tests.support.builders import T0, at
from tests.support.stores import Stores

# What DynamoDB would mangle if it were stored as a map: floats, big integers, 40 levels of nesting.
AWKWARD = {"a": 0.1, "b": 10**30, "deep": json.loads("[" * 40 + "]" * 40)}


def a_type(name: str, **changes: Any) -> EventType:
    fields: dict[str, Any] = {"name": name, "description": "d", "created_at": T0, "updated_at": T0}
    return EventType(**(fields | changes))


def test_put_get_and_replace_keep_schema_and_example_text_exactly(stores: Stores) -> None:
    written = a_type("order.created", schema_text=compact({"type": "object"}), example_text=compact(AWKWARD))
    stores.event_types.put(written)
    assert stores.event_types.get("order.created") == written
    assert stores.event_types.get("order.created").example == AWKWARD  # type: ignore[union-attr]
    replaced = a_type("order.created", deprecated=True, updated_at=at(1))
    stores.event_types.put(replaced)
    assert stores.event_types.get("order.created") == replaced
    assert stores.event_types.get("order.missing") is None


def test_delete_says_whether_there_was_one(stores: Stores) -> None:
    stores.event_types.put(a_type("order.created"))
    assert stores.event_types.delete("order.created")
    assert not stores.event_types.delete("order.created")
    assert stores.event_types.names() == []


def test_pages_go_by_name_and_say_when_there_is_more(stores: Stores) -> None:
    for name in ("c", "a", "e", "b", "d"):
        stores.event_types.put(a_type(name))
    first, after = stores.event_types.page(2, None)
    assert [t.name for t in first] == ["a", "b"] and after == "b"
    second, after = stores.event_types.page(2, after)
    assert [t.name for t in second] == ["c", "d"] and after == "d"
    last, after = stores.event_types.page(2, after)
    assert [t.name for t in last] == ["e"] and after is None
    exact, after = stores.event_types.page(5, None)
    assert len(exact) == 5 and after is None
    assert stores.event_types.names() == ["a", "b", "c", "d", "e"]
