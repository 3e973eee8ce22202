"""The event log: an ingested event, stored where its deliveries' log entries would be (schema.EVENT_LOG).

A delivery is found in its tenant's log (and so its endpoint's, and by the reconciler) through an entry of the
`by_tenant` index: a write unit per entry on top of the items' own. An event published without an idempotency key
is stored instead in its tenant's log shard, keyed by its time, with the ids of the endpoints it fanned out to: the
event *is* its fan-out's log entry, and those deliveries get no entry of their own. The happy path's event and
its delivery's place in the log are one write unit instead of two (issue 28).

The rules it keeps, and why:

- Its key is `<tenant>#<shard>` (the delivery log's shards, by a stable hash of the event id) and
  `<timestamp>#<event id>`. Its fan-out's deliveries are created at the event's timestamp, so the log's order,
  (created_at, delivery id), is the table's within a shard once each event's rows are sorted by id.
- Only an event whose id is timed at its own millisecond (`ids.id_at`) is logged: its key then follows from the
  tenant and the id, and `get` reads it by key. An event keyed by its request (`ids.keyed_id`, not time-ordered),
  a replay's, and each stored before this table, stay in the Events table, read after a miss here.
- The event is written before its deliveries. A crash between the two leaves rows with no delivery, which readers
  skip (the request failed, and nothing of it was accepted); never a delivery that the log cannot find.
- A row stands for its delivery while the delivery has no entry of its own and was created when the row says
  (`log_pages.stands_for`, as a log page's rows).
- The event outlives every delivery of it (its expiry only grows: `extend_expiry`), so its rows do too.
- A shard count raised since the event was stored moves its key: `get` then finds it by its sort key in each of the
  current count's shards, which include every shard of a smaller count.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from hookrelay.adapters import schema
from hookrelay.adapters.log_pages import PAGE
from hookrelay.domain import ids
from hookrelay.domain.clock import RETENTION_DAYS, from_rfc3339, to_rfc3339, truncate_to_milliseconds
from hookrelay.domain.lifecycle import fan_out_delivery_id
from hookrelay.domain.models import Event

assert schema.EVENT_LOG.sort_key is not None
PARTITION, SORT = schema.EVENT_LOG.partition_key, schema.EVENT_LOG.sort_key
FAN_OUT = "fan_out"  # the endpoints the event fanned out to: their ids, space-separated, in the order given
# How far an event's timestamp may lie from its id's moment for the id to be looked up here: a logged event's id is
# timed at the event's own millisecond; a keyed id reads as a moment anywhere in nine thousand years, so only about
# one in ten thousand falls within a lifetime of now and costs a lookup that misses.
_LOGGED_WITHIN = timedelta(days=2 * RETENTION_DAYS + 30)
_AFTER_EVERY_ID = "$"  # sorts after "#" and so after every `<timestamp>#<id>` of one timestamp


def is_loggable(event: Event) -> bool:
    """Whether the event's key in the log follows from its id: its id is timed at its own millisecond."""
    return ids.moment_of(event.id) == truncate_to_milliseconds(event.timestamp)


def may_be_logged(event_id: str, now: datetime) -> bool:
    """Whether an event of this id can be in the log (else it is not looked up there)."""
    moment = ids.moment_of(event_id)
    return moment is not None and abs(moment - now) <= _LOGGED_WITHIN


def sort_key(event_id: str) -> str:
    """The event's sort key, from its id alone (see `is_loggable`)."""
    moment = ids.moment_of(event_id)
    assert moment is not None, event_id
    return f"{to_rfc3339(moment)}#{event_id}"


def lower_bound(created_at: str) -> str:
    """The least sort key of events created at or after `created_at` (the log's stored form)."""
    return created_at


def upper_bound(created_at: str) -> str:
    """A sort key above every event created at or before `created_at`, below every one after it."""
    return created_at + _AFTER_EVERY_ID


# What the key says already: the tenant (the partition's owner), the timestamp and the id (the sort key's halves).
# Not stored again: about 100 bytes of an item that is near 1 KB, the size past which each write is billed twice.
_IN_THE_KEY = ("tenant_id", "timestamp", "id")


def item(event_item: dict[str, Any], partition: str, endpoint_ids: Sequence[str]) -> dict[str, Any]:
    """The stored event (`event_item`, as the Events table stores it) in its place in the log, with its fan-out."""
    kept = {name: value for name, value in event_item.items() if name not in _IN_THE_KEY}
    return {**kept, PARTITION: partition, SORT: sort_key(str(event_item["id"])), FAN_OUT: " ".join(endpoint_ids)}


def event_item_of(stored: dict[str, Any]) -> dict[str, Any]:
    """The event as the Events table stores it (what `dynamodb.event_of` reads) from its item in the log."""
    at, _, event_id = str(stored[SORT]).partition("#")
    tenant_id = str(stored[PARTITION]).rpartition("#")[0]
    stored = {name: value for name, value in stored.items() if name not in (PARTITION, SORT, FAN_OUT)}
    return {**stored, "tenant_id": tenant_id, "timestamp": at, "id": event_id}


def entries(stored: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The event's fan-out as the log's entries of its deliveries (what their own entries would project), marked
    with the event that listed them, in the log's order within their millisecond (descending id, as a shard reads)."""
    event = event_item_of(stored)
    timestamp = from_rfc3339(event["timestamp"])
    rows = [
        {
            "id": fan_out_delivery_id(timestamp, event["id"], endpoint_id),
            "endpoint_id": endpoint_id,
            "event_id": event["id"],
            "tenant_id": event["tenant_id"],
            "created_at": event["timestamp"],
            PAGE: event["id"],
        }
        for endpoint_id in str(stored.get(FAN_OUT, "")).split()
    ]
    return iter(sorted(rows, key=lambda row: str(row["id"]), reverse=True))
