"""Writing deliveries straight through the repositories, with the timestamps and statuses a test needs.

The delivery log, replay and redrive read exactly what the ingest and delivery paths write (the same
`DeliveryTable.put_many` and `set_status`); going through them directly lets a test lay out a few
hundred deliveries over days in a moment, instead of waiting for retry schedules to run out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from hookrelay import wiring
from hookrelay.adapters import event_log, log_pages, schema
from hookrelay.adapters.dynamodb import shards, to_item
from hookrelay.domain import ids
from hookrelay.domain.clock import epoch_seconds, utcnow
from hookrelay.domain.envelope import envelope_body, message_group_id
from hookrelay.domain.models import Delivery, Event
from hookrelay.domain.paging import Position
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ports import DeliveryFilter


@dataclass(frozen=True)
class Seeded:
    event: Event
    delivery: Delivery


def seed(
    tenant_id: str,
    endpoint_id: str,
    created_at: datetime,
    status: DeliveryStatus = DeliveryStatus.DEAD,
    *,
    expired: bool = False,
    event: Event | None = None,
) -> Seeded:
    """One delivery (and its event, unless given) created at `created_at`, ended in `status` if terminal."""
    made = make(tenant_id, endpoint_id, created_at, status, expired=expired, event=event)
    store([made], with_events=event is None)
    return made


def stored_event(tenant_id: str, event_id: str) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """Where an event ingest logged is stored: the event log table, the item's key, and the item as the Events table
    would hold it (in one of the tenant's log shards: the function that wrote it had its own count)."""
    log = wiring.delivery_log_service().events.log
    for partition in shards(tenant_id):
        key = {event_log.PARTITION: partition, event_log.SORT: event_log.sort_key(event_id)}
        if (item := log.get_item(Key=key).get("Item")) is not None:
            return log, key, event_log.event_item_of(item)
    raise AssertionError(f"event {event_id} is not in the event log")


def every_page(where: DeliveryFilter, limit: int) -> list[list[str]]:
    """The ids of each page of the delivery log read `limit` at a time, following its cursors to the end."""
    deliveries = wiring.delivery_log_service().deliveries
    pages: list[list[str]] = []
    start: Position | None = None
    while True:
        page = deliveries.find(where, limit, start, utcnow())
        pages.append([d.id for d in page.deliveries])
        start = page.resume_after
        if start is None:
            return pages


def log_index_entries(tenant_id: str) -> list[dict[str, Any]]:
    """Every entry of the tenant's log index (`by_tenant`), over every shard."""
    table, index = wiring.delivery_log_service().deliveries.table, schema.DELIVERY_LOG_INDEX
    found = []
    for partition in shards(tenant_id):
        found += table.query(
            IndexName=index.name,
            KeyConditionExpression=f"{index.partition_key} = :p",
            ExpressionAttributeValues={":p": partition},
        )["Items"]
    return found


def store(seeded: list[Seeded], *, with_events: bool = True) -> None:
    service = wiring.delivery_log_service()
    if with_events:
        with service.events.table.batch_writer() as batch:
            for item in seeded:
                batch.put_item(Item=to_item(item.event))
    service.deliveries.put_many([item.delivery for item in seeded])


def make(
    tenant_id: str,
    endpoint_id: str,
    created_at: datetime,
    status: DeliveryStatus = DeliveryStatus.DEAD,
    *,
    expired: bool = False,
    event: Event | None = None,
) -> Seeded:
    if event is None:
        event_id = ids.new_id("evt")
        data = {"n": created_at.isoformat()}
        event = Event(
            id=event_id,
            tenant_id=tenant_id,
            type="order.updated",
            timestamp=created_at,
            body=envelope_body(event_id=event_id, event_type="order.updated", timestamp=created_at, data=data),
            expires_at=epoch_seconds(utcnow() + timedelta(days=30)),
        )
    ended = created_at + timedelta(seconds=1)
    delivery = Delivery(
        id=ids.delivery_id(),
        tenant_id=tenant_id,
        endpoint_id=endpoint_id,
        event_id=event.id,
        event_type=event.type,
        status=status,
        message_group_id=message_group_id(endpoint_id, 1, None, event.id),
        created_at=created_at,
        updated_at=ended,
        completed_at=ended if status.is_terminal else None,
        attempt_count=3 if status is DeliveryStatus.DEAD else 0,
        expires_at=epoch_seconds(utcnow() - timedelta(seconds=1)) if expired else None,
    )
    return Seeded(event, delivery)


def mark(delivery: Delivery, status: DeliveryStatus) -> None:
    """Move a delivery to `status` the way the delivery path does when a schedule ends or an endpoint is off."""
    wiring.delivery_service().deliveries.set_status(delivery.id, delivery.tenant_id, status, utcnow(), None)


def stored_deliveries(table: Any) -> list[dict[str, Any]]:
    """Every delivery item of the deliveries table (a scan), without the log pages that table also holds."""
    return [item for item in table.scan()["Items"] if not log_pages.is_page_item(item)]
