"""Log pages: one entry in the tenant's delivery log for many deliveries written together.

A delivery is found in its tenant's log (and so its endpoint's, and by the reconciler) through an entry of the
`by_tenant` index: one write unit per delivery, on top of the delivery's own. Ingest writes an event's fan-out, and
a batch's, together, all created in one millisecond: those deliveries share one *page* instead, an item of the
deliveries table (`lpg_…`) that lists them and has the one index entry. Fan-out 10 writes 2 units for its log
instead of 10; a batch of 100 events, 4 instead of 100 in the cost benchmark (its deliveries fell in two
milliseconds: bench/results/cost.txt, issue 28).

The rules a page keeps, and why:

- A page lists deliveries created in the same millisecond: its index entry stands where each of theirs would have
  (the log's order is (created_at, id), and a reader expands the page into its rows before it orders them).
- Fewer than `MIN_ROWS` deliveries get their own entries: a page costs one write for itself and one for its entry.
- The page is written before its deliveries. A crash between the two leaves rows with no delivery, which readers
  skip (the request failed, and nothing of it was accepted); never a delivery that the log, and so the
  reconciler's sweep for deliveries never enqueued, cannot find.
- A row counts only while its delivery has no entry of its own and was created when the page says: a fan-out run
  again (a producer's retry under its idempotency key) writes a new page for deliveries it rewrites, and the old
  page's rows then stand for nothing. Rows listing one delivery twice are read once.
- The page outlives every delivery it lists: a delivery may wait in its queue for the queue's retention, retry for
  the longest horizon a schedule may have, and is kept for the redrive window after it ends.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from itertools import groupby
from typing import Any

from hookrelay.adapters import schema
from hookrelay.domain import ids
from hookrelay.domain.clock import RETENTION_DAYS, epoch_seconds, from_rfc3339, to_rfc3339
from hookrelay.domain.models import Delivery
from hookrelay.domain.schedule import MAX_HORIZON_SECONDS

PREFIX = "lpg"
MIN_ROWS = 3
# Rows are about 95 bytes before compression (three ids); this keeps a page's item far below DynamoDB's 400 KB.
MAX_ROWS = 1_000
ROWS = "rows_z"  # the page's rows, deflated: "<delivery id> <endpoint id> <event id>" a line
PAGE = "log_page"  # on a row read back as an entry: the page that listed it
LIFETIME = timedelta(seconds=schema.DELIVERY_QUEUE.retention_seconds + MAX_HORIZON_SECONDS, days=RETENTION_DAYS + 1)


@dataclass(frozen=True)
class Row:
    delivery_id: str
    endpoint_id: str
    event_id: str


@dataclass(frozen=True)
class LogPage:
    id: str
    tenant_id: str
    created_at: str  # as stored: to_rfc3339, the index's sort key
    rows: tuple[Row, ...]


def is_page(item_id: str) -> bool:
    return item_id.startswith(f"{PREFIX}_")


def paginate(deliveries: Sequence[Delivery]) -> list[LogPage]:
    """The pages for `deliveries` (written together): one per tenant and millisecond with `MIN_ROWS` or more, split
    at `MAX_ROWS`. The deliveries they list get no entry of their own; the others do."""

    def key(delivery: Delivery) -> tuple[str, str]:
        return delivery.tenant_id, to_rfc3339(delivery.created_at)

    pages = []
    for (tenant_id, created_at), group in groupby(sorted(deliveries, key=key), key=key):
        rows = sorted((Row(d.id, d.endpoint_id, d.event_id) for d in group), key=lambda row: row.delivery_id)
        if len(rows) < MIN_ROWS:
            continue
        for start in range(0, len(rows), MAX_ROWS):
            chunk = tuple(rows[start : start + MAX_ROWS])
            # Derived from what it lists: writing the same deliveries again writes the same page.
            page_id = ids.derived_id(PREFIX, from_rfc3339(created_at), *(row.delivery_id for row in chunk))
            pages.append(LogPage(page_id, tenant_id, created_at, chunk))
    return pages


def item(page: LogPage, log_partition: str) -> dict[str, Any]:
    """The page as stored: under `log_partition` (its shard of the tenant's log) in the `by_tenant` index."""
    text = "\n".join(f"{row.delivery_id} {row.endpoint_id} {row.event_id}" for row in page.rows)
    return {
        "id": page.id,
        "tenant_id": page.tenant_id,
        "created_at": page.created_at,
        schema.DELIVERY_LOG_INDEX.partition_key: log_partition,
        "expires_at": epoch_seconds(from_rfc3339(page.created_at) + LIFETIME),
        ROWS: zlib.compress(text.encode(), 9),
    }


def entries(page_item: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The page's rows as index entries of their deliveries (what their own entries would project), marked with the
    page that listed them."""
    text = zlib.decompress(bytes(page_item[ROWS])).decode()  # boto3's Binary, or bytes
    for line in text.splitlines():
        delivery_id, endpoint_id, event_id = line.split(" ")
        yield {
            "id": delivery_id,
            "endpoint_id": endpoint_id,
            "event_id": event_id,
            "tenant_id": page_item["tenant_id"],
            "created_at": page_item["created_at"],
            PAGE: page_item["id"],
        }


def stands_for(entry: dict[str, Any], delivery_item: dict[str, Any]) -> bool:
    """Whether an entry read from the log stands for the delivery read back: always for its own entry; for a page's
    row, while the delivery has no entry of its own and was created when the page says (else a later write of it,
    which listed it again or gave it its own entry, supersedes the row)."""
    if PAGE not in entry:
        return True
    own_entry = schema.DELIVERY_LOG_INDEX.partition_key in delivery_item
    return not own_entry and delivery_item.get("created_at") == entry["created_at"]


def is_page_item(stored: dict[str, Any]) -> bool:
    return is_page(str(stored["id"]))
