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
- The event is written first, and it is what accepts the event: its fan-out's deliveries that are queued as ingest
  made them (`lifecycle.may_stay_unstored`: the happy path's every delivery) are not written at all. Each is
  written by the first write that changes it (the attempt's record, on the happy path), and until then read as
  `lifecycle.unstored_fan_out` of its event, with the message group and queue shard its row says (both fixed when
  the delivery was made; an endpoint's `max_in_flight` may change later). So a row whose delivery has no record
  reads as that delivery, queued: a crash after the event and before the rest of ingest's writes (deliveries
  written parked or cancelled, the messages) leaves deliveries the reconciler finds and sends, and the delivery
  function parks or cancels them as it would have, never one the log cannot find. The happy path's event and
  delivery are one write unit, and its delivery's record the settle's (issue 28).
- Rows written before that rule list endpoint ids alone (no group): their deliveries were all written after the
  event, so one of those rows with no record is a crash's leftover, skipped as a log page's row is.
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
from hookrelay.domain.models import Delivery, Event

assert schema.EVENT_LOG.sort_key is not None
PARTITION, SORT = schema.EVENT_LOG.partition_key, schema.EVENT_LOG.sort_key
# The deliveries the event fanned out to, space-separated, in the order given: each `<endpoint id>#<slot>#<queue
# shard>`, its message group (`<endpoint id>#<slot>`, domain/envelope.py) and its endpoint's queue shard; rows
# written before unstored deliveries name the endpoint alone.
FAN_OUT = "fan_out"
# What a row of an unstored-capable event carries beyond an index entry's attributes: the delivery's message group
# and queue shard, and the event's stored item (shared by its rows, not copied), read only for a row with no record.
GROUP, QUEUE_SHARD, EVENT_ITEM = "message_group_id", "queue_shard", "event_item"
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


def item(event_item: dict[str, Any], partition: str, fan_out: Sequence[Delivery]) -> dict[str, Any]:
    """The stored event (`event_item`, as the Events table stores it) in its place in the log, with its fan-out."""
    kept = {name: value for name, value in event_item.items() if name not in _IN_THE_KEY}
    listed = " ".join(_token(delivery) for delivery in fan_out)
    return {**kept, PARTITION: partition, SORT: sort_key(str(event_item["id"])), FAN_OUT: listed}


def _token(delivery: Delivery) -> str:
    endpoint_id, _, slot = delivery.message_group_id.partition("#")
    if endpoint_id != delivery.endpoint_id or not slot or "#" in slot:  # a fan-out's group is always its endpoint's
        raise ValueError(f"delivery {delivery.id} is not in one of its endpoint's message groups")
    return f"{delivery.message_group_id}#{delivery.queue_shard}"


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
    rows = []
    for token in str(stored.get(FAN_OUT, "")).split():
        endpoint_id, *unstored = token.split("#")
        row = {
            "id": fan_out_delivery_id(timestamp, event["id"], endpoint_id),
            "endpoint_id": endpoint_id,
            "event_id": event["id"],
            "tenant_id": event["tenant_id"],
            "created_at": event["timestamp"],
            PAGE: event["id"],
        }
        if unstored:
            slot, shard = unstored
            row |= {GROUP: f"{endpoint_id}#{slot}", QUEUE_SHARD: int(shard), EVENT_ITEM: event}
        rows.append(row)
    return iter(sorted(rows, key=lambda row: str(row["id"]), reverse=True))
