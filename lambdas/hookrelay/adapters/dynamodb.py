"""DynamoDB implementations of the repositories."""

from __future__ import annotations

import base64
import binascii
import contextvars
import heapq
import itertools
import json
import os
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any, TypeVar

from boto3.dynamodb.conditions import Attr, ConditionBase, ConditionExpressionBuilder, Key
from botocore.exceptions import ClientError

from hookrelay.adapters import event_log, log_pages, schema
from hookrelay.adapters.aws import resend_left
from hookrelay.adapters.records import field_names, from_data, to_data
from hookrelay.adapters.schema import IndexSpec
from hookrelay.domain import ids
from hookrelay.domain.clock import epoch_seconds, from_rfc3339, to_rfc3339, truncate_to_milliseconds, utcnow
from hookrelay.domain.lifecycle import is_expired, is_fan_out, may_stay_unstored, unstored_fan_out
from hookrelay.domain.limits import limit_from_config
from hookrelay.domain.models import (
    DELIVERY_PATH_FIELDS,
    ApiKey,
    Delivery,
    Endpoint,
    EndpointState,
    Event,
    FailureNotice,
    PortalSession,
    Tenant,
)
from hookrelay.domain.paging import BoundedCount, Position
from hookrelay.domain.queues import DeliveryLane
from hookrelay.domain.redrive import Redrive, RedriveState
from hookrelay.domain.status import CLAIMABLE_STATUSES, DeadReason, DeliveryStatus
from hookrelay.services.ports import (
    AttemptRecord,
    DeliveryFilter,
    DeliveryPage,
    PageDone,
    Unclaimed,
    UnknownPosition,
)

R = TypeVar("R")


def to_item(record: Any, **extra: Any) -> dict[str, Any]:
    item = to_data(record, decimals=True)
    item.update(extra)
    return item


def from_item(record_type: type[R], item: dict[str, Any] | None) -> R | None:
    return None if item is None else from_data(record_type, item)


def conditional_write(write: Callable[..., dict[str, Any]], **request: Any) -> dict[str, Any] | None:
    """Run a conditional write: its response, or None when its condition did not hold (other errors raise)."""
    try:
        return write(**request)
    except ClientError as error:
        if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
            return None
        raise


def applied(write: Callable[..., dict[str, Any]], **request: Any) -> bool:
    return conditional_write(write, **request) is not None


def pages(read: Callable[..., dict[str, Any]], **request: Any) -> Iterator[dict[str, Any]]:
    """Every page of a query or scan, following `LastEvaluatedKey` to the end."""
    while True:
        page = read(**request)
        yield page
        if "LastEvaluatedKey" not in page:
            return
        request = {**request, "ExclusiveStartKey": page["LastEvaluatedKey"]}


def query_pages(table: Any, **query: Any) -> Iterator[dict[str, Any]]:
    """Every page of a query (or of an index read)."""
    return pages(table.query, **query)


def query_items(table: Any, **query: Any) -> Iterator[dict[str, Any]]:
    """Every item a query finds, page after page."""
    for page in query_pages(table, **query):
        yield from page["Items"]


class TenantTable:
    def __init__(self, table: Any) -> None:
        self.table = table

    def put(self, tenant: Tenant) -> None:
        self.table.put_item(Item=to_item(tenant))

    def get(self, tenant_id: str) -> Tenant | None:
        return from_item(Tenant, self.table.get_item(Key={"id": tenant_id}).get("Item"))

    def ids(self) -> Iterator[str]:
        """A scan of the ids only: the tenants table is small (one item per tenant) and read whole by design."""
        for page in pages(self.table.scan, ProjectionExpression="id"):
            yield from (str(item["id"]) for item in page["Items"])


class ApiKeyTable:
    def __init__(self, table: Any) -> None:
        self.table = table

    def put(self, key: ApiKey) -> None:
        self.table.put_item(Item=to_item(key), ConditionExpression="attribute_not_exists(key_id)")

    def get(self, key_id: str) -> ApiKey | None:
        return from_item(ApiKey, self.table.get_item(Key={"key_id": key_id}).get("Item"))

    def revoke(self, key_id: str, at: datetime) -> bool:
        return applied(
            self.table.update_item,
            Key={"key_id": key_id},
            UpdateExpression="SET revoked_at = if_not_exists(revoked_at, :at)",
            ConditionExpression="attribute_exists(key_id)",
            ExpressionAttributeValues={":at": to_rfc3339(at)},
        )


class PortalSessionTable:
    def __init__(self, table: Any) -> None:
        self.table = table

    def put(self, session: PortalSession) -> None:
        self.table.put_item(Item=to_item(session), ConditionExpression="attribute_not_exists(id)")

    def get(self, session_id: str) -> PortalSession | None:
        return from_item(PortalSession, self.table.get_item(Key={"id": session_id}).get("Item"))


_FAILING = schema.FAILING_ENDPOINTS_INDEX
_FAILING_MARK = "1"  # the constant partition of the sparse failing-endpoints index


def _endpoint_item(endpoint: Endpoint) -> dict[str, Any]:
    """The stored endpoint: in the failing-endpoints index exactly while it is enabled and failing."""
    failing = endpoint.failing_since is not None and endpoint.state is EndpointState.ENABLED
    return to_item(endpoint, **({_FAILING.partition_key: _FAILING_MARK} if failing else {}))


def _as_read(name: str, value: str | None, values: dict[str, Any]) -> str:
    """A condition that the attribute is still what was read (absent when it was None)."""
    if value is None:
        return f"attribute_not_exists({name})"
    values[f":read_{name}"] = value
    return f"{name} = :read_{name}"


def replace_request(endpoint: Endpoint, expected_updated_at: datetime, read: Endpoint | None) -> dict[str, Any]:
    """`EndpointTable.replace`'s conditional update (Key, expressions, names, values), for update_item or a
    transaction."""
    values: dict[str, Any] = {":read": to_rfc3339(expected_updated_at)}
    read = read or endpoint
    spell = [
        _as_read("failing_since", to_rfc3339(read.failing_since) if read.failing_since else None, values),
        _as_read("failure_notice", read.failure_notice and read.failure_notice.value, values),
    ]
    item = _endpoint_item(endpoint)
    owned = (set(field_names(Endpoint)) | {_FAILING.partition_key}) - DELIVERY_PATH_FIELDS - {"tenant_id", "id"}
    names = {f"#a{i}": name for i, name in enumerate(sorted(owned))}
    sets = [f"{alias} = :a{alias[2:]}" for alias, name in names.items() if name in item]
    removes = [alias for alias, name in names.items() if name not in item]
    values |= {f":a{alias[2:]}": item[name] for alias, name in names.items() if name in item}
    update = f"SET {', '.join(sets)}" + (f" REMOVE {', '.join(removes)}" if removes else "")
    return {
        "Key": {"tenant_id": endpoint.tenant_id, "id": endpoint.id},
        "UpdateExpression": update,
        "ConditionExpression": " AND ".join(["attribute_exists(id)", "updated_at = :read", *spell]),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


class EndpointTable:
    def __init__(self, table: Any) -> None:
        self.table = table

    def put(self, endpoint: Endpoint) -> None:
        self.table.put_item(Item=_endpoint_item(endpoint))

    def get(self, tenant_id: str, endpoint_id: str) -> Endpoint | None:
        item = self.table.get_item(Key={"tenant_id": tenant_id, "id": endpoint_id}, ConsistentRead=True).get("Item")
        return from_item(Endpoint, item)

    def replace(self, endpoint: Endpoint, *, expected_updated_at: datetime, read: Endpoint | None = None) -> bool:
        """An update of every attribute the endpoint service owns: the circuit's and the lane's (DELIVERY_PATH_FIELDS)
        are left as they are, since the delivery path changes them between this read and this write."""
        return applied(self.table.update_item, **replace_request(endpoint, expected_updated_at, read))

    def list_for_tenant(self, tenant_id: str) -> list[Endpoint]:
        items = query_items(self.table, KeyConditionExpression=Key("tenant_id").eq(tenant_id))
        return [from_data(Endpoint, item) for item in items]

    def page_for_tenant(
        self, tenant_id: str, limit: int, start: Position | None
    ) -> tuple[list[Endpoint], Position | None]:
        """Newest first (endpoint ids are ULIDs: their order is their creation's), deleted ones filtered out; reads
        as many query pages as it takes to fill `limit` (a page of deleted endpoints is skipped, not returned empty).
        The position is the last returned endpoint's key, checked to be the tenant's when handed back."""
        query: dict[str, Any] = {
            "KeyConditionExpression": Key("tenant_id").eq(tenant_id),
            "FilterExpression": Attr("state").ne(EndpointState.DELETED.value),
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if start is not None:
            key = _start_key_of(start)
            if set(key) != {"tenant_id", "id"} or key["tenant_id"] != tenant_id or not isinstance(key["id"], str):
                raise UnknownPosition(start)
            query["ExclusiveStartKey"] = key
        found: list[Endpoint] = []
        for page in query_pages(self.table, **query):
            items = page["Items"]
            for taken, item in enumerate(items, start=1):
                found.append(from_data(Endpoint, item))
                if len(found) == limit:
                    more = taken < len(items) or "LastEvaluatedKey" in page
                    return found, _position({"tenant_id": tenant_id, "id": found[-1].id}) if more else None
        return found, None

    # --- The failing spell: written on transitions only (first failure after a success, first success after) ---

    def mark_failing(self, tenant_id: str, endpoint_id: str, since: datetime) -> bool:
        return applied(
            self.table.update_item,
            Key={"tenant_id": tenant_id, "id": endpoint_id},
            UpdateExpression="SET failing_since = :since, #failing = :mark REMOVE failure_notice",
            ConditionExpression="attribute_exists(id) AND attribute_not_exists(failing_since) AND #state = :enabled",
            ExpressionAttributeNames={"#failing": _FAILING.partition_key, "#state": "state"},
            ExpressionAttributeValues={
                ":since": to_rfc3339(since),
                ":mark": _FAILING_MARK,
                ":enabled": EndpointState.ENABLED.value,
            },
        )

    def mark_recovered(self, tenant_id: str, endpoint_id: str) -> bool:
        return applied(
            self.table.update_item,
            Key={"tenant_id": tenant_id, "id": endpoint_id},
            UpdateExpression="REMOVE failing_since, #failing, failure_notice",
            ConditionExpression="attribute_exists(failing_since)",
            ExpressionAttributeNames={"#failing": _FAILING.partition_key},
        )

    # --- The delivery lane (domain/lanes.py): written on a lane's switch and around each forwarded message ---

    def switch_lane(self, tenant_id: str, endpoint_id: str, to: DeliveryLane) -> bool:
        """Move the endpoint to lane `to`, if it is in the other one (the first of racing workers wins)."""
        values: dict[str, Any] = {":to": to.value}
        condition = "attribute_exists(id) AND lane <> :to"
        if to is DeliveryLane.SLOW:  # stored only while slow: an endpoint without one is in the fast lane
            return applied(
                self.table.update_item,
                Key={"tenant_id": tenant_id, "id": endpoint_id},
                UpdateExpression="SET lane = :to",
                ConditionExpression="attribute_exists(id) AND (attribute_not_exists(lane) OR lane <> :to)",
                ExpressionAttributeValues=values,
            )
        return applied(
            self.table.update_item,
            Key={"tenant_id": tenant_id, "id": endpoint_id},
            UpdateExpression="REMOVE lane",
            ConditionExpression=condition,
            ExpressionAttributeValues=values,
        )

    def mark_slow_tail(self, tenant_id: str, endpoint_id: str, mark: str) -> None:
        """Set members are added and taken off atomically: the groups of one endpoint forward concurrently."""
        self.table.update_item(
            Key={"tenant_id": tenant_id, "id": endpoint_id},
            UpdateExpression="ADD tail_marks :mark",
            ExpressionAttributeValues={":mark": {mark}},
        )

    def unmark_slow_tail(self, tenant_id: str, endpoint_id: str, mark: str) -> None:
        self.table.update_item(
            Key={"tenant_id": tenant_id, "id": endpoint_id},
            UpdateExpression="DELETE tail_marks :mark",  # the last member taken off removes the attribute
            ExpressionAttributeValues={":mark": {mark}},
        )

    def clear_legacy_slow_tail(self, tenant_id: str, endpoint_id: str, group: str, key: str) -> bool:
        """`group` has no message waiting in the slow lane, if `key` is still its last forwarded one in the map
        endpoints kept their tails in before adapters/slow_tails.py (nothing writes it any more)."""
        return applied(
            self.table.update_item,
            Key={"tenant_id": tenant_id, "id": endpoint_id},
            UpdateExpression="REMOVE slow_tails.#g",
            ConditionExpression="slow_tails.#g = :key",
            ExpressionAttributeNames={"#g": group},
            ExpressionAttributeValues={":key": key},
        )

    def failing(self, since_before: datetime) -> Iterator[Endpoint]:
        entries = query_items(
            self.table,
            IndexName=_FAILING.name,
            KeyConditionExpression=Key(_FAILING.partition_key).eq(_FAILING_MARK)
            & Key(_FAILING.sort_key).lte(to_rfc3339(since_before)),
            ScanIndexForward=True,  # longest failing first
        )
        yield from endpoints_of(self.table, entries)

    def record_notice(self, endpoint: Endpoint, notice: FailureNotice) -> bool:
        return self._set_notice(endpoint, notice, expected=endpoint.failure_notice)

    def withdraw_notice(self, endpoint: Endpoint, notice: FailureNotice) -> None:
        self._set_notice(endpoint, endpoint.failure_notice, expected=notice)

    def _set_notice(self, endpoint: Endpoint, notice: FailureNotice | None, *, expected: FailureNotice | None) -> bool:
        if endpoint.failing_since is None:
            raise ValueError(f"endpoint {endpoint.id} is not failing")
        values: dict[str, Any] = {":since": to_rfc3339(endpoint.failing_since), ":enabled": EndpointState.ENABLED.value}
        condition = " AND ".join(
            [
                "failing_since = :since",
                "#state = :enabled",
                _as_read("failure_notice", expected and expected.value, values),
            ]
        )
        if notice is None:
            update = "REMOVE failure_notice"
        else:
            update = "SET failure_notice = :notice"
            values[":notice"] = notice.value
        return applied(
            self.table.update_item,
            Key={"tenant_id": endpoint.tenant_id, "id": endpoint.id},
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues=values,
        )


# The per-(tenant, ordering key) sequence counters share the events table under keys in this space, which
# no event id can take: only this adapter knows of them, and it never hands one out as an event.
_SEQUENCE_SPACE = "seq#"


# An event's body is stored deflated when that makes it smaller: a webhook payload is JSON, which deflates to
# a half or less, and a write is billed per KB of item (a 1 KiB payload: one write unit deflated, two as text).
DEFLATED_BODY = "body_z"


ENDPOINT_COUNT = "endpoint_count"  # the tenant record's count of its live endpoints


class CountedEndpoints:
    """Each tenant's live endpoints, counted on its tenant record (`endpoint_count`), written with the endpoints.

    A creation is one transaction: add one to the count, on condition that it is below the limit, and put the
    endpoint (on condition that its id is new). A deletion is one transaction: the endpoint's conditional update
    to `deleted` (`replace_request`) and one taken off the count. DynamoDB applies all of a transaction or none of
    it, so there is no moment at which the count is written and the endpoint is not (or the other way round): a
    process that dies before the call wrote neither, one that dies after it wrote both. Concurrent creations each
    pass the count's condition or fail it as DynamoDB serializes them, so the count never exceeds the limit.

    A tenant counted for the first time (its record written before counts existed) is counted by listing its live
    endpoints and setting the count only if it is still unset (`start_count`): every writer that changes the count
    does so through it after it is set, so the first set wins and nothing is lost between the listing and the set
    (a creation or deletion between them would itself have set the count first, and this set then does nothing).
    """

    def __init__(self, tenants: Any, endpoints: Any) -> None:
        self.tenants = tenants
        self.endpoints = endpoints

    def counted(self, tenant_id: str) -> int | None:
        item = self.tenants.get_item(
            Key={"id": tenant_id},
            ConsistentRead=True,
            ProjectionExpression="#count",
            ExpressionAttributeNames={"#count": ENDPOINT_COUNT},
        ).get("Item")
        return None if item is None or ENDPOINT_COUNT not in item else int(item[ENDPOINT_COUNT])

    def start_count(self, tenant_id: str, live: int) -> bool:
        return applied(
            self.tenants.update_item,
            Key={"id": tenant_id},
            UpdateExpression="SET #count = :live",
            ConditionExpression="attribute_exists(id) AND attribute_not_exists(#count)",
            ExpressionAttributeNames={"#count": ENDPOINT_COUNT},
            ExpressionAttributeValues={":live": live},
        )

    def create(self, endpoint: Endpoint, limit: int) -> bool:
        return self._transact(
            self._count_change(endpoint.tenant_id, "+", "#count < :limit", {":limit": limit}),
            {
                "Put": {
                    "TableName": self.endpoints.name,
                    "Item": _endpoint_item(endpoint),
                    "ConditionExpression": "attribute_not_exists(id)",
                }
            },
        )

    def delete(self, endpoint: Endpoint, *, expected_updated_at: datetime, read: Endpoint | None = None) -> bool:
        request = replace_request(endpoint, expected_updated_at, read)
        update = {"TableName": self.endpoints.name, **request}
        return self._transact({"Update": update}, self._count_change(endpoint.tenant_id, "-", "#count >= :one", {}))

    def _count_change(self, tenant_id: str, sign: str, condition: str, values: dict[str, Any]) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": self.tenants.name,
                "Key": {"id": tenant_id},
                "UpdateExpression": f"SET #count = #count {sign} :one",
                "ConditionExpression": condition,
                "ExpressionAttributeNames": {"#count": ENDPOINT_COUNT},
                "ExpressionAttributeValues": {":one": 1, **values},
            }
        }

    def _transact(self, *items: dict[str, Any]) -> bool:
        """The table resource's client takes (and types) plain Python values, as the table's own calls do.

        True when applied; False when a condition failed or a concurrent write cancelled it (nothing written)."""
        try:
            self.endpoints.meta.client.transact_write_items(TransactItems=list(items))
        except ClientError as error:
            if error.response["Error"]["Code"] == "TransactionCanceledException":
                return False
            raise
        return True


def event_item(event: Event) -> dict[str, Any]:
    """The stored event: its body as text, or deflated (`body_z`, binary) when that is smaller."""
    item = to_item(event)
    text = event.body.encode()
    deflated = zlib.compress(text)
    if len(deflated) < len(text):
        del item["body"]
        item[DEFLATED_BODY] = deflated
    return item


def event_of(item: dict[str, Any] | None) -> Event | None:
    """The event an item holds, whichever way its body is stored (items from before deflation hold text)."""
    if item is not None and DEFLATED_BODY in item:
        item = dict(item)
        item["body"] = zlib.decompress(bytes(item.pop(DEFLATED_BODY))).decode()
    return from_item(Event, item)


class EventTable:
    """Events: those ingest logs (adapters/event_log.py) in the event log (`log`), the others in `table`, which
    also holds the per-(tenant, ordering key) sequence counters."""

    def __init__(self, table: Any, log: Any) -> None:
        self.table = table
        self.log = log

    def put(self, event: Event) -> bool:
        return applied(self.table.put_item, Item=event_item(event), ConditionExpression="attribute_not_exists(id)")

    def append(self, events: Sequence[tuple[Event, Sequence[Delivery]]]) -> None:
        """New events (ids timed at their own millisecond, never stored before), each with the deliveries it fanned
        out to, in their tenants' logs; unconditionally, as a put again is the same item."""
        for event, _ in events:
            if not event_log.is_loggable(event):
                raise ValueError(f"event {event.id} is not timed at its own millisecond: it cannot be logged")
        items = (event_log.item(event_item(e), sharded(e.tenant_id, e.id), fan_out) for e, fan_out in events)
        batch_put(self.log, items)

    def get(self, tenant_id: str, event_id: str) -> Event | None:
        found = self._find(tenant_id, event_id)
        return None if found is None else event_of(found[2])

    def next_sequence(self, tenant_id: str, ordering_key: str, count: int = 1) -> int:
        """An atomic counter per (tenant, ordering key): strictly increasing, never reused; one write draws `count`."""
        result = self.table.update_item(
            Key={"id": f"{_SEQUENCE_SPACE}{tenant_id}#{ordering_key}"},
            UpdateExpression="ADD #v :count",
            ExpressionAttributeNames={"#v": "value"},
            ExpressionAttributeValues={":count": count},
            ReturnValues="UPDATED_NEW",
        )
        return int(result["Attributes"]["value"])

    def extend_expiry(self, tenant_id: str, event_id: str, expires_at: int) -> None:
        """Keep the event at least as long as its latest-ending delivery (never shorten it). Found first (a read),
        then updated where it is: this is the path of deliveries that ended late, never the happy one."""
        found = self._find(tenant_id, event_id)
        if found is None:
            return
        table, key, _ = found
        conditional_write(
            table.update_item,
            Key=key,
            UpdateExpression="SET expires_at = :e",
            ConditionExpression="attribute_exists(#k) AND expires_at < :e",
            ExpressionAttributeNames={"#k": next(iter(key))},
            ExpressionAttributeValues={":e": expires_at},
        )

    def _find(self, tenant_id: str, event_id: str) -> tuple[Any, dict[str, Any], dict[str, Any]] | None:
        """Where the tenant's event is (its table, key, and item as the Events table holds one): in the log at the
        key its id gives (the current shard count's shard), else in the Events table, else in the log under an
        earlier, smaller shard count (looked for in each current shard: a read only events stored before the count
        was raised pay)."""
        if event_id.startswith(_SEQUENCE_SPACE):
            return None
        logged = event_log.may_be_logged(event_id, utcnow())
        if logged and (found := _logged_event(self.log, tenant_id, event_id, earlier_shards=False)) is not None:
            return self.log, found[0], event_log.event_item_of(found[1])
        item = self.table.get_item(Key={"id": event_id}).get("Item")
        if item is not None and item.get("tenant_id") == tenant_id:
            return self.table, {"id": event_id}, item
        if logged and (found := _logged_event(self.log, tenant_id, event_id, current_shard=False)) is not None:
            return self.log, found[0], event_log.event_item_of(found[1])
        return None


def _logged_event(
    log: Any, tenant_id: str, event_id: str, *, current_shard: bool = True, earlier_shards: bool = True
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The tenant's event's key and item in the event log: at the key its id gives (the current shard count's
    shard), or under an earlier, smaller count, looked for by its sort key in each current shard (a read only events
    stored before the count was raised pay)."""
    key = {event_log.PARTITION: sharded(tenant_id, event_id), event_log.SORT: event_log.sort_key(event_id)}
    if current_shard and (item := log.get_item(Key=key).get("Item")) is not None:
        return key, item
    for partition in shards(tenant_id) if earlier_shards else ():
        if partition == key[event_log.PARTITION]:
            continue
        at = Key(event_log.PARTITION).eq(partition) & Key(event_log.SORT).eq(key[event_log.SORT])
        for item in log.query(KeyConditionExpression=at)["Items"]:
            return {event_log.PARTITION: partition, event_log.SORT: key[event_log.SORT]}, item
    return None


# The statuses a reader looks for among many delivered deliveries: only these are in the by_tenant_status
# index (the rest are read from the tenant's or endpoint's log and filtered), so a first-time delivery writes
# no entry there. A claim leaves the entry as it is (`claim_update`): an `attempting` delivery may still be
# under `retrying`, and the status read re-checks every item.
STATUS_INDEXED = frozenset({DeliveryStatus.RETRYING, DeliveryStatus.DEAD, DeliveryStatus.CANCELLED})


def tenant_status(tenant_id: str, status: DeliveryStatus) -> str | None:
    """What the by_tenant_status index's partition keys of deliveries in `status` start with (the shard follows),
    or None when the status is not indexed."""
    return f"{tenant_id}#{status.value}" if status in STATUS_INDEXED else None


def log_shards() -> int:
    """The delivery log's write shards, as deployed (schema.DELIVERY_LOG_SHARDS; CDK context `log_shards`). Read
    when used, not at import: a function's environment is its own (the integration tier runs several in one
    process), and a count raised under running code only widens the shards new entries go to."""
    raw = os.environ.get(schema.DELIVERY_LOG_SHARDS)
    return limit_from_config("log_shards", raw, schema.DEFAULT_LOG_SHARDS, schema.MAX_LOG_SHARDS)


def shard_of(delivery_id: str) -> int:
    """The log shard of a delivery: a stable hash of its id (never Python's salted `hash`), so uniform over a
    tenant's or an endpoint's deliveries however fast they come."""
    return zlib.crc32(delivery_id.encode()) % log_shards()


def sharded(owner: str, delivery_id: str) -> str:
    """A sharded index's partition key of the delivery: its owner (tenant, endpoint, tenant#status), then its shard."""
    return f"{owner}#{shard_of(delivery_id)}"


def shards(owner: str, count: int | None = None) -> list[str]:
    """Every partition key of `owner` in a sharded index (`count` shards; default: as deployed): a read queries
    them all and merges them. Entries written under a smaller count are on the first of these."""
    return [f"{owner}#{shard}" for shard in range(log_shards() if count is None else count)]


def set_status_key(
    tenant_id: str, delivery_id: str, status: DeliveryStatus, sets: list[str], removes: list[str]
) -> dict[str, str]:
    """Add `tenant_status` to an update's SET or REMOVE clauses for `status`; the values it needs (`:ts`)."""
    owner = tenant_status(tenant_id, status)
    if owner is None:
        removes.append(_STATUS.partition_key)
        return {}
    sets.append(f"{_STATUS.partition_key} = :ts")
    return {":ts": sharded(owner, delivery_id)}


def update_expression(sets: Sequence[str], removes: Sequence[str]) -> str:
    clauses = [f"{verb} {', '.join(paths)}" for verb, paths in (("SET", sets), ("REMOVE", removes)) if paths]
    return " ".join(clauses)


def claimable_condition() -> tuple[str, dict[str, str]]:
    """The condition that the delivery's status (`#s`) is one a new attempt may be claimed from, and its values."""
    values = {f":c{i}": status.value for i, status in enumerate(sorted(CLAIMABLE_STATUSES))}
    return f"#s IN ({', '.join(values)})", values


# Claiming a delivery for attempt :n, off the delivery queue or out of the parking lot alike.
_CLAIM_SETS = (
    "#s = :attempting",
    "attempt_count = :n",
    "claimed_at = :now",
    "updated_at = :now",
    "first_attempt_at = if_not_exists(first_attempt_at, :now)",
)


def claim_update(*removes: str) -> str:
    """The claim's update expression, also removing `removes`. It moves no index entry: a retry being attempted
    keeps its `retrying` status-index entry (readers re-check the status on the item), which its record then
    keeps (failed again), moves (dead) or drops (delivered): one index write per retry instead of three."""
    return update_expression(list(_CLAIM_SETS), list(removes))


def claim_values(tenant_id: str, attempt_number: int, now: datetime) -> dict[str, Any]:
    """The claim's values, with `:made` (the attempts made before this one) and `:tenant` for the condition."""
    return {
        ":attempting": DeliveryStatus.ATTEMPTING.value,
        ":tenant": tenant_id,
        ":n": attempt_number,
        ":made": attempt_number - 1,
        ":now": to_rfc3339(now),
    }


def _settle_condition(tenant_id: str, attempt_number: int, unclaimed: Unclaimed | None, values: dict[str, Any]) -> str:
    """The record's condition (adding the values it needs beyond `:n`): held by this attempt's claim; or, for an
    attempt made unclaimed, as the claim's own condition would have found it (claimable with the attempts before it
    made, not parked), or held by its late claim when one was tried."""
    if unclaimed is None or unclaimed.late_claim_at is not None:
        values[":attempting"] = DeliveryStatus.ATTEMPTING.value
    if unclaimed is None:
        return "#s = :attempting AND attempt_count = :n"
    claimable, claimable_values = claimable_condition()
    values |= {**claimable_values, ":tenant": tenant_id, ":made": attempt_number - 1}
    free = f"(tenant_id = :tenant AND attribute_not_exists({schema.PARKED_MARK})"
    free += f" AND {claimable} AND attempt_count = :made)"
    if unclaimed.late_claim_at is None:
        return free
    values[":claimed"] = to_rfc3339(unclaimed.late_claim_at)
    return f"{free} OR (#s = :attempting AND attempt_count = :n AND claimed_at = :claimed)"


def delivery_item(delivery: Delivery, *, paged: bool = False) -> dict[str, Any]:
    """The stored delivery: in its tenant's log shard (which an endpoint's log reads too) unless a log page lists it
    (`paged`: adapters/log_pages.py), in the status index while its status is indexed, and in the event-extras index
    unless it is its event's fan-out (which the log derives from the event instead: `find_of_event`)."""
    keys = {} if paged else {_TENANT.partition_key: sharded(delivery.tenant_id, delivery.id)}
    if (owner := tenant_status(delivery.tenant_id, delivery.status)) is not None:
        keys[_STATUS.partition_key] = sharded(owner, delivery.id)
    if not is_fan_out(delivery):
        keys[_EXTRAS.partition_key] = delivery.event_id
    if delivery.parked_at is not None:  # written parked (by ingest): the mark goes with it, as lot.park sets both
        keys[schema.PARKED_MARK] = delivery.endpoint_id
    return to_item(delivery, **keys)


_BATCH_GET_LIMIT = 100  # DynamoDB's BatchGetItem maximum
_BATCH_WRITE_LIMIT = 25  # DynamoDB's BatchWriteItem maximum


def batch_get(table: Any, keys: Sequence[dict[str, Any]], *, consistent: bool) -> list[dict[str, Any]]:
    """The items of `keys` that exist (in no particular order), in as many BatchGetItem calls as it takes.

    How the index reads get their items: the indexes project keys and a few attributes, not whole items."""
    client = table.meta.client  # the resource's client: takes and returns Python values, like the table
    found: list[dict[str, Any]] = []
    for start in range(0, len(keys), _BATCH_GET_LIMIT):
        request = {table.name: {"Keys": list(keys[start : start + _BATCH_GET_LIMIT]), "ConsistentRead": consistent}}
        send = lambda r: client.batch_get_item(RequestItems=r)  # noqa: E731
        for answer in resend_left(send, request, _left("UnprocessedKeys"), "BatchGetItem"):
            found.extend(answer["Responses"].get(table.name, []))
    return found


def batch_put(table: Any, items: Iterable[dict[str, Any]]) -> None:
    """Put every item (unconditionally: a put again is the same item), 25 to a BatchWriteItem call."""
    client = table.meta.client
    items = list(items)
    for start in range(0, len(items), _BATCH_WRITE_LIMIT):
        request = {table.name: [{"PutRequest": {"Item": item}} for item in items[start : start + _BATCH_WRITE_LIMIT]]}
        send = lambda r: client.batch_write_item(RequestItems=r)  # noqa: E731
        for _ in resend_left(send, request, _left("UnprocessedItems"), "BatchWriteItem"):
            pass


def _left(name: str) -> Callable[[Any, dict[str, Any]], Any]:
    """What a batch answer left unprocessed (`name`: DynamoDB leaves what a partition over its throughput, or the
    answer's size, did not take), as the request that sends it again; None when nothing."""
    return lambda _, answer: answer.get(name) or None


def endpoints_of(table: Any, entries: Iterator[dict[str, Any]], page: int = _BATCH_GET_LIMIT) -> Iterator[Endpoint]:
    """The endpoints of a sparse index's entries (keys only), in the index's order, read back page by page."""
    while chunk := list(itertools.islice(entries, page)):
        keys = [{"tenant_id": entry["tenant_id"], "id": entry["id"]} for entry in chunk]
        items = {(i["tenant_id"], i["id"]): i for i in batch_get(table, keys, consistent=True)}
        found = (items.get((key["tenant_id"], key["id"])) for key in keys)
        yield from (from_data(Endpoint, item) for item in found if item is not None)


def deliveries_by_id(table: Any, ids: Sequence[str], *, consistent: bool) -> dict[str, dict[str, Any]]:
    items = batch_get(table, [{"id": i} for i in dict.fromkeys(ids)], consistent=consistent)
    return {item["id"]: item for item in items}


def unstored_of(row: dict[str, Any]) -> Delivery | None:
    """The delivery an event-log row stands for when it has no record: queued, as ingest made it (None for a row
    written before deliveries were left unstored, whose delivery was always written: its record's absence is a
    crash's leftover, as a log page's row's is)."""
    if event_log.GROUP not in row:
        return None
    event = event_of(row[event_log.EVENT_ITEM])
    assert event is not None
    return unstored_fan_out(event, str(row["endpoint_id"]), str(row[event_log.GROUP]), int(row[event_log.QUEUE_SHARD]))


def unstored_delivery(log: Any, tenant_id: str, delivery_id: str, *, consistent: bool) -> Delivery | None:
    """The tenant's delivery that has no record, read from the event that lists it (adapters/event_log.py): a fan-out
    id is timed at its event's millisecond, so the tenant's events of that millisecond, one Query per log shard."""
    now = utcnow()
    if not event_log.may_be_logged(delivery_id, now):
        return None
    at = to_rfc3339(ids.moment_of(delivery_id))  # type: ignore[arg-type]  # (may_be_logged: it has one)
    for partition in shards(tenant_id):
        condition = Key(event_log.PARTITION).eq(partition) & Key(event_log.SORT).between(
            event_log.lower_bound(at), event_log.upper_bound(at)
        )
        query = {
            "KeyConditionExpression": condition,
            "FilterExpression": _not_expired(now),
            "ConsistentRead": consistent,
        }
        for stored in query_items(log, **query):
            row = next((row for row in event_log.entries(stored) if row["id"] == delivery_id), None)
            if row is not None:
                return unstored_of(row)
    return None


# What an attempt's record writes of a delivery (`DeliveryTable.record_attempt`), and so not what it creates an
# unstored delivery's record with (the record's own values are those).
_RECORDED = frozenset(
    {
        "status",
        "attempts",
        "updated_at",
        "attempt_count",
        "first_attempt_at",
        "claimed_at",
        "next_attempt_at",
        "completed_at",
        "expires_at",
    }
)


def _created(delivery: Delivery, sets: list[str], names: dict[str, str], values: dict[str, Any]) -> None:
    """Add to an update what creates the unstored delivery's record when there is none: each of its attributes the
    update does not write itself, if not there (so an update that finds a record leaves the record's own)."""
    item = delivery_item(delivery, paged=True)  # no index entry of its own: its event lists it
    for n, (name, value) in enumerate(sorted((k, v) for k, v in item.items() if k != "id" and k not in _RECORDED)):
        sets.append(f"#u{n} = if_not_exists(#u{n}, :u{n})")  # (`:c…` are claimable_condition's)
        names[f"#u{n}"], values[f":u{n}"] = name, value


def store_unstored(table: Any, log: Any, tenant_id: str, delivery_id: str) -> bool:
    """Write the record of the tenant's delivery that has none, as read from its event, before a write that needs
    one (on condition that there is still none). True if written: the write can be made again and find it.

    If the process dies after this and before that write, the record is what ingest wrote before deliveries were
    left unstored (a queued delivery): nothing was lost, and whoever tries the write again finds it."""
    delivery = unstored_delivery(log, tenant_id, delivery_id, consistent=True)
    if delivery is None:
        return False
    attributes = sorted((k, v) for k, v in delivery_item(delivery, paged=True).items() if k != "id")
    return applied(
        table.update_item,  # an update, not a put: every function that changes deliveries may update them
        Key={"id": delivery_id},
        UpdateExpression=update_expression([f"#a{n} = :a{n}" for n in range(len(attributes))], []),
        ConditionExpression="attribute_not_exists(id)",
        ExpressionAttributeNames={f"#a{n}": name for n, (name, _) in enumerate(attributes)},
        ExpressionAttributeValues={f":a{n}": value for n, (_, value) in enumerate(attributes)},
    )


def put_first(table: Any, delivery: Delivery) -> dict[str, Any] | None:
    """A delivery read with no record (left unstored, `unstored_delivery`), put whole as its first write leaves it,
    if it still has none: one write where `store_unstored` and the write after it are two. The item put; None if a
    record was found (stored since it was read), which the caller's conditional update then decides on.

    A put, where `store_unstored` updates: only for a function granted PutItem on the table (the delivery function)."""
    item = delivery_item(delivery, paged=True)
    return item if applied(table.put_item, Item=item, ConditionExpression="attribute_not_exists(id)") else None


def first_write(table: Any, log: Any, tenant_id: str, delivery_id: str, **request: Any) -> dict[str, Any] | None:
    """A conditional update of the tenant's delivery that may be the first write to change it: its response, or None
    when its condition did not hold. A delivery not stored yet (adapters/event_log.py) has no record for the condition
    to hold on: its record is written, as read from its event, and the update made again."""
    try:
        answer: dict[str, Any] = table.update_item(
            Key={"id": delivery_id}, ReturnValuesOnConditionCheckFailure="ALL_OLD", **request
        )
        return answer
    except ClientError as error:
        if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
            raise
        if "Item" in error.response or not store_unstored(table, log, tenant_id, delivery_id):
            return None
    return conditional_write(table.update_item, Key={"id": delivery_id}, **request)


class DeliveryTable:
    """Deliveries (`table`), and their log: the table's `by_tenant` index and the event log (`event_log`,
    adapters/event_log.py), which lists each logged event's fan-out."""

    def __init__(self, table: Any, event_log: Any) -> None:
        self.table = table
        self.event_log = event_log

    def put_many(self, deliveries: Sequence[Delivery], logged: Collection[str] = frozenset()) -> None:
        """The deliveries, and the log pages that list those created together (adapters/log_pages.py): the pages
        first, all of them, so that a crash never leaves a delivery the log cannot find. Those in `logged` (ids)
        are listed already, by their event in the event log (stored first, by `EventTable.append`)."""
        pages = log_pages.paginate([delivery for delivery in deliveries if delivery.id not in logged])
        batch_put(self.table, (log_pages.item(page, sharded(page.tenant_id, page.id)) for page in pages))
        paged = {row.delivery_id for page in pages for row in page.rows} | set(logged)
        # A logged delivery as ingest made it is not written: its event's row reads as it (`unstored_of`).
        stored = (d for d in deliveries if d.id not in logged or not may_stay_unstored(d))
        batch_put(self.table, (delivery_item(delivery, paged=delivery.id in paged) for delivery in stored))

    def get(self, delivery_id: str, tenant_id: str | None = None) -> Delivery | None:
        return self._read(delivery_id, tenant_id, consistent=True)

    def peek(self, delivery_id: str, tenant_id: str | None = None) -> Delivery | None:
        return self._read(delivery_id, tenant_id, consistent=False)

    def _read(self, delivery_id: str, tenant_id: str | None, *, consistent: bool) -> Delivery | None:
        item = self.table.get_item(Key={"id": delivery_id}, ConsistentRead=consistent).get("Item")
        if tenant_id is None:
            return _delivery_of(item)
        if item is None:
            return unstored_delivery(self.event_log, tenant_id, delivery_id, consistent=consistent)
        delivery = _delivery_of(item)
        return delivery if delivery is not None and delivery.tenant_id == tenant_id else None

    def claim(
        self,
        delivery_id: str,
        tenant_id: str,
        attempt_number: int,
        now: datetime,
        stale_before: datetime,
        unstored: Delivery | None = None,
    ) -> Delivery | None:
        claimable, claimable_values = claimable_condition()
        sets = list(_CLAIM_SETS)
        condition = (
            f"tenant_id = :tenant AND attribute_not_exists({schema.PARKED_MARK}) AND ("
            f"({claimable} AND attempt_count = :made) "
            "OR (#s = :attempting AND attempt_count = :n AND claimed_at < :stale))"
        )
        names = {"#s": "status"}
        values = {
            **claim_values(tenant_id, attempt_number, now),
            **claimable_values,
            ":stale": to_rfc3339(stale_before),
        }
        if unstored is not None:  # (a late claim's, the happy path's settle's: created claimed, or found as above)
            _created(unstored, sets, names, values)
            condition = f"attribute_not_exists(id) OR ({condition})"
        result = first_write(
            self.table,
            self.event_log,
            tenant_id,
            delivery_id,
            UpdateExpression=update_expression(sets, []),
            ConditionExpression=condition,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
        )
        return None if result is None else from_data(Delivery, result["Attributes"])

    def mark_posted(self, delivery_id: str, tenant_id: str, seq: int, at: datetime, expires_at: int) -> bool:
        return None is not first_write(
            self.table,
            self.event_log,
            tenant_id,
            delivery_id,
            UpdateExpression="SET posted_at = :at, mailbox_seq = :seq, expires_at = :expires",
            ConditionExpression="tenant_id = :tenant AND #s = :queued AND attribute_not_exists(posted_at)",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={
                ":at": to_rfc3339(at),
                ":seq": seq,
                ":expires": expires_at,
                ":tenant": tenant_id,
                ":queued": DeliveryStatus.QUEUED.value,
            },
        )

    def record_attempt(
        self,
        delivery_id: str,
        tenant_id: str,
        attempt_number: int,
        record: AttemptRecord,
        unclaimed: Unclaimed | None = None,
    ) -> bool:
        # The happy path's settle, read with no record and no late claim tried: the settled record, put whole if
        # there is still none (one write, which a crash before leaves as read). Found (stored since, by a park, a
        # cancel or another attempt), the update below decides as it does for any record.
        unstored = unclaimed.unstored if unclaimed is not None and unclaimed.late_claim_at is None else None
        if unstored is not None and put_first(self.table, record.applied_to(unstored, attempt_number)) is not None:
            return True
        now = to_rfc3339(record.attempt.started_at if record.completed_at is None else record.completed_at)
        # The attempt count and first attempt are the claim's; set here too for an attempt made unclaimed (a no-op
        # after a claim, which set them to the same), so that this one write claims and records it at once.
        sets = [
            "#s = :status",
            "attempts = list_append(if_not_exists(attempts, :empty), :attempt)",
            "updated_at = :now",
            "attempt_count = :n",
            "first_attempt_at = if_not_exists(first_attempt_at, :started)",
        ]
        removes = ["claimed_at"]
        values: dict[str, Any] = {
            **set_status_key(tenant_id, delivery_id, record.status, sets, removes),
            ":status": record.status.value,
            ":empty": [],
            ":attempt": [to_item(record.attempt)],
            ":now": now,
            ":n": attempt_number,
            ":started": to_rfc3339(record.attempt.started_at),
        }
        for name, value in (
            ("next_attempt_at", record.next_attempt_at and to_rfc3339(record.next_attempt_at)),
            ("completed_at", record.completed_at and to_rfc3339(record.completed_at)),
            ("expires_at", record.expires_at),
        ):
            if value is None:
                removes.append(name)
            else:
                sets.append(f"{name} = :{name}")
                values[f":{name}"] = value
        names = {"#s": "status"}
        condition = _settle_condition(tenant_id, attempt_number, unclaimed, values)
        if unclaimed is not None and unclaimed.unstored is not None:
            # Read with no record (the happy path's): this one write creates it, settled, or finds it as the
            # condition says. Nothing was written before it, so a crash before it leaves the delivery as read.
            _created(unclaimed.unstored, sets, names, values)
            condition = f"attribute_not_exists(id) OR {condition}"  # (an OR of parenthesized terms, unclaimed)
        request = {
            "UpdateExpression": update_expression(sets, removes),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        return first_write(self.table, self.event_log, tenant_id, delivery_id, **request) is not None

    def set_status(
        self,
        delivery_id: str,
        tenant_id: str,
        status: DeliveryStatus,
        now: datetime,
        expires_at: int | None,
        *,
        expected: DeliveryStatus | None = None,
    ) -> bool:
        sets = ["#s = :status", "updated_at = :now"]
        removes = ["claimed_at", "next_attempt_at"]
        values: dict[str, Any] = {
            **set_status_key(tenant_id, delivery_id, status, sets, removes),
            ":status": status.value,
            ":now": to_rfc3339(now),
        }
        if status.is_terminal:
            sets.append("completed_at = :now")
        if expires_at is not None:
            sets.append("expires_at = :e")
            values[":e"] = expires_at
        # Never an upsert: an unknown delivery is refused, not created as a record with a status and no body (one
        # not stored yet is created first, as read from its event: `first_write`).
        condition = "attribute_exists(id) AND tenant_id = :tenant"
        values[":tenant"] = tenant_id
        if expected is not None:
            condition += " AND #s = :expected"
            values[":expected"] = expected.value
        return None is not first_write(
            self.table,
            self.event_log,
            tenant_id,
            delivery_id,
            UpdateExpression=update_expression(sets, removes),
            ConditionExpression=condition,
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues=values,
        )

    def mark_dead_lettered(self, delivery_id: str, at: datetime, reason: DeadReason) -> bool:
        return applied(
            self.table.update_item,
            Key={"id": delivery_id},
            UpdateExpression="SET dead_lettered_at = :at, dead_reason = :why",
            ConditionExpression="#s = :dead AND attribute_not_exists(dead_lettered_at)",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={
                ":at": to_rfc3339(at),
                ":dead": DeliveryStatus.DEAD.value,
                ":why": reason.value,
            },
        )

    def mark_recovered(self, delivery_id: str, tenant_id: str, replay_id: str, at: datetime) -> bool:
        # No index moves: the status (and so its status-index entry) stays; `recovered` filters on the item.
        return applied(
            self.table.update_item,
            Key={"id": delivery_id},
            UpdateExpression="SET recovered_by = :by, recovered_at = :at",
            ConditionExpression=(
                "tenant_id = :tenant AND #s IN (:dead, :cancelled) AND attribute_not_exists(recovered_by)"
            ),
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={
                ":by": replay_id,
                ":at": to_rfc3339(at),
                ":tenant": tenant_id,
                ":dead": DeliveryStatus.DEAD.value,
                ":cancelled": DeliveryStatus.CANCELLED.value,
            },
        )

    # --- The delivery log (reads by index) and idempotent creation ---

    def _index(self, where: DeliveryFilter) -> tuple[IndexSpec, str]:
        """The index that makes the filter combination selective; never a scan.

        | filter given                            | index            | owner         | then filtered          |
        |-----------------------------------------|------------------|---------------|------------------------|
        | event_id                                | (`find_of_event`: the fan-out by key, the rest by event_extras) |
        | status retrying, dead or cancelled      | by_tenant_status | tenant#status | endpoint               |
        | nothing, an endpoint, or another status | by_tenant        | tenant id     | endpoint, status       |

        The owner's entries are spread over the log's shards (`owner#shard`, `log_shards`), which a read merges.

        The other statuses are the bulk of a log (delivered) or its newest records (queued, attempting), so
        reading the log newest first and filtering finds them quickly. An endpoint's log is its tenant's, filtered on
        the entries' projected endpoint before any item is read (`_matched`): one index entry per delivery instead
        of two. A read stops after MAX_PAGES_PER_READ pages of entries, so an endpoint with a small share of its
        tenant's traffic gets short pages (or empty ones) with a cursor, never an unbounded read. Every read also
        filters on the tenant (so an index keyed by a bare event id can never hand out another tenant's record) and
        on expiry.
        """
        if where.event_id:
            raise ValueError("an event's deliveries are read by find_of_event, with its fan-out")
        if where.status and (owner := tenant_status(where.tenant_id, where.status)):
            return _STATUS, owner
        return _TENANT, where.tenant_id

    def _queries(
        self, where: DeliveryFilter, now: datetime, after: tuple[str, str] | None, count: int
    ) -> list[dict[str, Any]]:
        """The index read of each of the `count` shards of `where`'s owner, newest first and filtered on what the
        index projects (`_matches` checks the rest), from `after` (the (created_at, id) last returned) on. None if
        the range is empty."""
        index, owner = self._index(where)
        if (span := _span(where, after)) is None:
            return []
        lower, upper = span
        projected = {index.partition_key, index.sort_key, *index.include}
        condition = Attr("tenant_id").eq(where.tenant_id)
        if where.endpoint_id and index is _STATUS:  # few entries per owner: filtered as DynamoDB reads them
            condition &= Attr("endpoint_id").eq(where.endpoint_id)
        if "expires_at" in projected:
            condition &= _not_expired(now)
        if where.ended_before and "completed_at" in projected:
            condition &= Attr("completed_at").lt(to_rfc3339(where.ended_before))
        return [
            {
                "IndexName": index.name,
                "KeyConditionExpression": _within(Key(index.partition_key).eq(partition), index.sort_key, lower, upper),
                "FilterExpression": condition,
                "ScanIndexForward": False,  # newest first
            }
            for partition in shards(owner, count)
        ]

    def _merged(
        self, where: DeliveryFilter, now: datetime, after: tuple[str, str] | None, page: int, count: int
    ) -> Iterator[dict[str, Any]]:
        """Every index entry of `where` after `after`, newest first by (created_at, id), merged across the `count`
        shards (each read `page` entries at a time, and only as far as the merge needs)."""
        queries = [{**q, "Limit": page} for q in self._queries(where, now, after, count)]
        shard_entries = [_by_id_within_time(self._unpaged(entries)) for entries in scatter(self.table, queries)]
        if queries and self._index(where)[0] is _TENANT:
            logged = [{**q, "Limit": page} for q in self._log_queries(where, now, after, count)]
            shard_entries += [_by_id_within_time(_rows(events)) for events in scatter(self.event_log, logged)]
        merged = heapq.merge(*shard_entries, key=_entry_order, reverse=True)
        for order, same in itertools.groupby(merged, key=_entry_order):
            if after is None or order < after:
                # A delivery listed twice (its own entry and a page's row, or two pages' rows) is read once, from
                # its own entry if it has one (a page's row of it then stands for nothing: log_pages.stands_for).
                first, *others = same
                yield next((e for e in others if log_pages.PAGE not in e), first) if log_pages.PAGE in first else first

    def _log_queries(
        self, where: DeliveryFilter, now: datetime, after: tuple[str, str] | None, count: int
    ) -> list[dict[str, Any]]:
        """The event log's half of the tenant's log (`_queries` reads the index's): each shard's events, newest first,
        within `where`'s times and up to `after`'s (whose millisecond `_merged` cuts by id)."""
        if (span := _span(where, after)) is None:
            return []
        lower = event_log.lower_bound(span[0]) if span[0] else None
        upper = event_log.upper_bound(span[1]) if span[1] else None
        return [
            {
                "KeyConditionExpression": _within(Key(event_log.PARTITION).eq(partition), event_log.SORT, lower, upper),
                "FilterExpression": _not_expired(now),
                "ScanIndexForward": False,
            }
            for partition in shards(where.tenant_id, count)
        ]

    def _unpaged(self, entries: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """A shard's entries with each log page's in place of its rows (adapters/log_pages.py), read as they come."""
        for entry in entries:
            if not log_pages.is_page(str(entry["id"])):
                yield entry
                continue
            page = self.table.get_item(Key={"id": entry["id"]}).get("Item")
            if page is not None:  # (expired meanwhile: its deliveries have too)
                yield from log_pages.entries(page)

    def _matched(self, entries: Sequence[dict[str, Any]], where: DeliveryFilter, now: datetime) -> list[Delivery]:
        """The deliveries of a page of index entries that match `where`, in the page's order.

        The items are read back (eventually consistent, like the index) and every condition is checked on
        them, including those the index filtered on: a record may have moved since the index saw it. Entries of
        another endpoint than `where`'s are dropped before the read (their projected endpoint never changes)."""
        if where.endpoint_id:
            entries = [entry for entry in entries if entry.get("endpoint_id") == where.endpoint_id]
        items = deliveries_by_id(self.table, [entry["id"] for entry in entries], consistent=False)
        found = (_read_back(entry, items.get(entry["id"])) for entry in entries)
        return [delivery for delivery in found if delivery is not None and _matches(delivery, where, now)]

    def _scope(self, where: DeliveryFilter) -> str:
        """Whose log a position is in: the index's owner, or the endpoint read from its tenant's log (the owner its
        positions named when it had its own index, so that those still resume)."""
        index, owner = self._index(where)
        return where.endpoint_id if where.endpoint_id and index is _TENANT else owner

    def find(self, where: DeliveryFilter, limit: int, start: Position | None, now: datetime) -> DeliveryPage:
        owner = self._scope(where)
        after = self._after(where, start) if start else None
        count = log_shards()
        # Each shard holds about 1/count of the newest entries; a page reads a little more than its share.
        entries = self._merged(where, now, after, page=max(_MIN_SHARD_PAGE, 2 * (limit + 1) // count), count=count)
        found: list[tuple[dict[str, Any], Delivery]] = []
        last: dict[str, Any] | None = None
        for _ in range(MAX_PAGES_PER_READ):
            # One more than asked for: finding it proves there is a next page without a wasted empty one.
            chunk = list(itertools.islice(entries, limit + 1))
            by_id = {entry["id"]: entry for entry in chunk}
            for delivery in self._matched(chunk, where, now):
                found.append((by_id[delivery.id], delivery))
                if len(found) > limit:
                    # Resume right after the last item returned, not after the last entry read.
                    return DeliveryPage([d for _, d in found[:limit]], _log_position(owner, found[limit - 1][0]))
            if len(chunk) <= limit:
                return DeliveryPage([d for _, d in found], None)
            last = chunk[-1]
        assert last is not None  # MAX_PAGES_PER_READ >= 1: the loop ran, and returned when the entries ran out
        return DeliveryPage([d for _, d in found], _log_position(owner, last))

    def find_of_event(
        self, where: DeliveryFilter, fan_out: Sequence[str], limit: int, start: Position | None, now: datetime
    ) -> DeliveryPage:
        """`where` (with an event) among the event's deliveries: its fan-out, read by key (`fan_out`: the ids
        `domain.lifecycle.fan_out_id` derives for each of the tenant's endpoints; those never made are simply not
        found), and its other deliveries, read from the sparse event_extras index. An event has a few deliveries
        (one per subscribed endpoint, and its replays), so each page reads them all and sorts them: the position
        is the last delivery returned, newest first by (created_at, id)."""
        assert where.event_id
        after = self._event_start(start) if start else None
        extras = query_items(
            self.table,
            IndexName=_EXTRAS.name,
            KeyConditionExpression=Key(_EXTRAS.partition_key).eq(where.event_id),
            FilterExpression=Attr("tenant_id").eq(where.tenant_id),
            ProjectionExpression="id",
        )
        listed = [*fan_out, *(str(entry["id"]) for entry in extras)]
        items = deliveries_by_id(self.table, listed, consistent=False)
        deliveries = [*(from_data(Delivery, item) for item in items.values()), *self._unstored_of_event(where, items)]
        found = sorted(
            (d for d in deliveries if _matches(d, where, now) and _in_range(d, where)),
            key=_newest_first,
            reverse=True,
        )
        if after is not None:
            found = [d for d in found if _newest_first(d) < after]
        if len(found) <= limit:
            return DeliveryPage(found, None)
        last = found[limit - 1]
        return DeliveryPage(found[:limit], _position({"id": last.id, "created_at": to_rfc3339(last.created_at)}))

    def _unstored_of_event(self, where: DeliveryFilter, stored: Collection[str]) -> list[Delivery]:
        """The event's fan-out deliveries that have no record (`stored`: the ids that have one), from its row."""
        assert where.event_id
        if not event_log.may_be_logged(where.event_id, utcnow()):
            return []
        found = _logged_event(self.event_log, where.tenant_id, where.event_id)
        if found is None or is_expired(found[1].get("expires_at"), utcnow()):
            return []
        rows = event_log.entries(found[1])
        return [d for row in rows if row["id"] not in stored and (d := unstored_of(row)) is not None]

    def _event_start(self, start: Position) -> tuple[datetime, str]:
        """The (created_at, id) `start` stands for, if an event read made it (else UnknownPosition)."""
        key = _start_key_of(start)
        if set(key) != {"id", "created_at"} or not all(isinstance(v, str) for v in key.values()):
            raise UnknownPosition(start)
        if not key["id"].startswith("dlv_"):
            raise UnknownPosition(start)
        try:
            return from_rfc3339(key["created_at"]), key["id"]
        except ValueError:
            raise UnknownPosition(start) from None

    def count(self, where: DeliveryFilter, now: datetime, up_to: int) -> BoundedCount:
        entries = self._merged(where, now, None, page=_BATCH_GET_LIMIT, count=log_shards())
        counted = read = 0
        while read < up_to and (chunk := list(itertools.islice(entries, min(_BATCH_GET_LIMIT, up_to - read)))):
            read += len(chunk)
            counted += len(self._matched(chunk, where, now))
        # Exact when the entries ran out: before the limit, or right at it (one more entry looked for, not read back).
        return BoundedCount(counted, exact=read < up_to or next(entries, None) is None)

    def _after(self, where: DeliveryFilter, start: Position) -> tuple[str, str]:
        """The (created_at, id) `start` stands for, if a read of `where` could have made it (else UnknownPosition).

        `{"in": owner, "created_at", "id"}`; a position from before the log was sharded names the owner under its
        index's old partition attribute (`tenant_id`, `endpoint_id`, `tenant_status`), and resumes the same way."""
        owner = self._scope(where)
        key = _start_key_of(start)
        others = set(key) - {"id", "created_at"}
        if len(others) != 1 or len(key) != 3 or not all(isinstance(v, str) for v in key.values()):
            raise UnknownPosition(start)
        if key[others.pop()] != owner or not key["id"].startswith("dlv_"):
            raise UnknownPosition(start)
        try:
            from_rfc3339(key["created_at"])
        except ValueError:
            raise UnknownPosition(start) from None
        return key["created_at"], key["id"]

    def put_new(self, delivery: Delivery) -> bool:
        return applied(
            self.table.put_item, Item=delivery_item(delivery), ConditionExpression="attribute_not_exists(id)"
        )


class OneByOneDeliveryTable(DeliveryTable):
    """The deliveries, each created with its own conditional put, never a batch write: for the functions that emit
    platform events (sweeper, delivery, redrive), whose rights on this table are put and update, and BatchWriteItem
    would also grant deletes. A platform event fans out to a tenant's few operations endpoints."""

    def put_many(self, deliveries: Sequence[Delivery], logged: Collection[str] = frozenset()) -> None:
        for delivery in deliveries:  # (each with its own log entry: a platform event is never logged)
            self.put_new(delivery)


class RedriveTable:
    def __init__(self, table: Any) -> None:
        self.table = table

    def put(self, redrive: Redrive) -> bool:
        return applied(self.table.put_item, Item=to_item(redrive), ConditionExpression="attribute_not_exists(id)")

    def get(self, redrive_id: str) -> Redrive | None:
        item = self.table.get_item(Key={"id": redrive_id}, ConsistentRead=True).get("Item")
        if item is not None and isinstance(item.get("position"), dict):
            # Written before positions were tokens (a redrive running across the deploy): same key, as a token.
            item["position"] = _position(item["position"])
        return from_item(Redrive, item)

    def advance(self, redrive_id: str, done: PageDone) -> bool:
        sets = "page = :next, replayed = replayed + :r, skipped = skipped + :s"
        values: dict[str, Any] = {
            ":page": done.page,
            ":next": done.page + 1,
            ":r": done.replayed,
            ":s": done.skipped,
            ":running": RedriveState.RUNNING.value,
        }
        if done.total is not None:
            sets += ", #total = :total, total_exact = :exact"
            values |= {":total": done.total.counted, ":exact": done.total.exact}
        if done.position is None:
            sets += ", #state = :completed, completed_at = :now REMOVE #position"
            values |= {":completed": RedriveState.COMPLETED.value, ":now": to_rfc3339(done.now)}
        else:
            sets += ", #position = :position"
            values[":position"] = done.position
        return applied(
            self.table.update_item,
            Key={"id": redrive_id},
            UpdateExpression=f"SET {sets}",
            ConditionExpression="page = :page AND #state = :running",
            ExpressionAttributeNames={"#state": "state", "#position": "position"}
            | ({"#total": "total"} if done.total is not None else {}),
            ExpressionAttributeValues=values,
        )

    def fail(self, redrive_id: str, reason: str, now: datetime) -> bool:
        return applied(
            self.table.update_item,
            Key={"id": redrive_id},
            UpdateExpression="SET #state = :failed, #error = :reason, completed_at = :now",
            ConditionExpression="#state = :running",
            ExpressionAttributeNames={"#state": "state", "#error": "error"},
            ExpressionAttributeValues={
                ":failed": RedriveState.FAILED.value,
                ":running": RedriveState.RUNNING.value,
                ":reason": reason,
                ":now": to_rfc3339(now),
            },
        )


# --- The delivery log's helpers ---

_INDEXES = {index.name: index for index in schema.DELIVERIES.indexes}
_TENANT, _STATUS = schema.DELIVERY_LOG_INDEX, _INDEXES["by_tenant_status"]
_EXTRAS = schema.EVENT_EXTRAS_INDEX
_MIN_SHARD_PAGE = 10  # entries per shard read, at the least
# From this many shards a read's per-shard queries go out at once, on up to _SCATTER_THREADS threads: at 64
# shards a page waits for 4 rounds of Query calls, not 64. Below it, one after the other, on the caller's thread.
_SCATTER_FROM = 8
_SCATTER_THREADS = 16
# A read stops after this many pages' worth of index entries (`limit` + 1 each, merged across the shards) even if
# it found fewer than `limit` matches (a very selective filter over a long range), returning a cursor that
# resumes after the last entry it read.
MAX_PAGES_PER_READ = 10


def _read_back(entry: dict[str, Any], item: dict[str, Any] | None) -> Delivery | None:
    """The delivery a log entry stands for: its item, if the entry still stands for it (`log_pages.stands_for`); with
    no item, the queued delivery an event-log row stands for (`unstored_of`), or none (a crash's leftover row)."""
    if item is not None:
        return from_data(Delivery, item) if log_pages.stands_for(entry, item) else None
    return unstored_of(entry) if event_log.EVENT_ITEM in entry else None


def _delivery_of(item: dict[str, Any] | None) -> Delivery | None:
    """The delivery stored as `item`; None for none, and for a log page (asked for by its id: no delivery's)."""
    if item is None or log_pages.is_page_item(item):
        return None
    return from_data(Delivery, item)


def _matches(delivery: Delivery, where: DeliveryFilter, now: datetime) -> bool:
    """`where` and not expired, checked on a delivery read back from the table (as `_query` filters the index)."""
    return (
        delivery.tenant_id == where.tenant_id
        and (where.status is None or delivery.status is where.status)
        and (where.endpoint_id is None or delivery.endpoint_id == where.endpoint_id)
        and (where.event_id is None or delivery.event_id == where.event_id)
        and (delivery.expires_at is None or delivery.expires_at > epoch_seconds(now))
        and (where.ended_before is None or _ended_before(delivery, where.ended_before))
        and (where.recovered is None or (delivery.recovered_by is not None) == where.recovered)
    )


def _span(where: DeliveryFilter, after: tuple[str, str] | None) -> tuple[str | None, str | None] | None:
    """The created_at range a log read covers (each end inclusive, or open), from `where`'s times and up to `after`'s
    (whose millisecond `_merged` cuts by id); None when it is empty."""
    lower = _lower_inclusive(where.since) if where.since else None
    upper = _upper_inclusive(where.until) if where.until else None
    if after is not None and (upper is None or after[0] < upper):
        upper = after[0]
    return None if lower and upper and lower > upper else (lower, upper)


def _within(key: ConditionBase, sort_key: str, lower: str | None, upper: str | None) -> ConditionBase:
    """A partition's key condition narrowed to the sort key's range (each end inclusive, or open)."""
    if lower and upper:
        return key & Key(sort_key).between(lower, upper)
    if lower:
        return key & Key(sort_key).gte(lower)
    if upper:
        return key & Key(sort_key).lte(upper)
    return key


def _rows(events: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """A shard of the event log read as the log's entries: each event's fan-out, row by row."""
    for stored in events:
        yield from event_log.entries(stored)


def _entry_order(entry: dict[str, Any]) -> tuple[str, str]:
    """The log's order of an index entry, newest first: (created_at, id), descending (created_at is one format)."""
    return str(entry["created_at"]), str(entry["id"])


def _built(query: dict[str, Any]) -> dict[str, Any]:
    """`query` with its conditions as expression strings, built here: the table resource builds a condition it is
    given with one builder it shares between threads (boto3's TransformationInjector resets and numbers its
    placeholders), so reads made at once on several threads must hand it strings. Values stay Python's: the
    resource serializes them, statelessly."""
    builder = ConditionExpressionBuilder()  # one per query: the key's and the filter's placeholders stay apart
    built = dict(query)
    for name, is_key in (("KeyConditionExpression", True), ("FilterExpression", False)):
        if isinstance(query.get(name), ConditionBase):
            expression = builder.build_expression(query[name], is_key_condition=is_key)
            built[name] = expression.condition_expression
            built["ExpressionAttributeNames"] = {
                **built.get("ExpressionAttributeNames", {}),
                **expression.attribute_name_placeholders,
            }
            built["ExpressionAttributeValues"] = {
                **built.get("ExpressionAttributeValues", {}),
                **expression.attribute_value_placeholders,
            }
    return built


def scatter(table: Any, queries: Sequence[dict[str, Any]]) -> list[Iterator[dict[str, Any]]]:
    """Each query's items, in order, for a merge across a key's shards. A merge needs every shard's first page before
    it yields anything: with many shards those first pages are read at once (one round trip's wait, not one per
    shard); a shard's further pages are read as the merge reaches them."""
    if len(queries) < _SCATTER_FROM:
        return [query_items(table, **q) for q in queries]
    queries = [_built(q) for q in queries]  # conditions as strings: the resource's builder is not for threads
    # Each read in the context of the caller (copied per read: a context runs on one thread at a time), so it
    # sees what the caller's thread sees of its context variables (the integration tier's view of the calling
    # function's environment among them).
    contexts = [contextvars.copy_context() for _ in queries]
    with ThreadPoolExecutor(max_workers=min(_SCATTER_THREADS, len(queries))) as pool:
        firsts = list(pool.map(lambda c, q: c.run(table.query, **q), contexts, queries))
    return [_continued(table, q, first) for q, first in zip(queries, firsts, strict=True)]


def _continued(table: Any, query: dict[str, Any], first: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A query's items from its first page (already read), then its further pages as they are needed."""
    yield from first["Items"]
    if "LastEvaluatedKey" in first:
        yield from query_items(table, **query, ExclusiveStartKey=first["LastEvaluatedKey"])


def _by_id_within_time(entries: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """One shard's entries in `_entry_order`, descending: the index orders them by created_at only, so each run of
    entries created in the same millisecond is sorted by id."""
    run: list[dict[str, Any]] = []
    for entry in entries:
        if run and entry["created_at"] != run[0]["created_at"]:
            yield from sorted(run, key=_entry_order, reverse=True)
            run = []
        run.append(entry)
    yield from sorted(run, key=_entry_order, reverse=True)


def _log_position(owner: str, entry: dict[str, Any]) -> Position:
    """The position right after `entry` in its owner's merged log."""
    return _position({"in": owner, "created_at": str(entry["created_at"]), "id": str(entry["id"])})


def _in_range(delivery: Delivery, where: DeliveryFilter) -> bool:
    """`since` and `until` on a delivery read by key (an index read puts them in its key condition)."""
    return (where.since is None or delivery.created_at >= where.since) and (
        where.until is None or delivery.created_at < where.until
    )


def _newest_first(delivery: Delivery) -> tuple[datetime, str]:
    return delivery.created_at, delivery.id


def _ended_before(delivery: Delivery, moment: datetime) -> bool:
    return delivery.completed_at is not None and delivery.completed_at < moment


def _not_expired(now: datetime) -> ConditionBase:
    # TTL deletes lazily (moto never does): an expired record is gone as far as readers are concerned.
    return Attr("expires_at").not_exists() | Attr("expires_at").gt(epoch_seconds(now))


def _upper_inclusive(until: datetime) -> str:
    """created_at is stored at millisecond precision, so `< until` is `<=` the last millisecond before it."""
    ceiling = truncate_to_milliseconds(until)
    if ceiling < until:
        ceiling += timedelta(milliseconds=1)
    return to_rfc3339(ceiling - timedelta(milliseconds=1))


def _lower_inclusive(since: datetime) -> str:
    floor = truncate_to_milliseconds(since)
    return to_rfc3339(floor if floor == since else floor + timedelta(milliseconds=1))


def _position(key: dict[str, str]) -> Position:
    """An index key as an opaque token (what services keep and hand back)."""
    document = json.dumps(key, separators=(",", ":"), sort_keys=True)
    return Position(base64.urlsafe_b64encode(document.encode()).decode().rstrip("="))


def _start_key_of(position: Position) -> dict[str, Any]:
    try:
        key = json.loads(base64.urlsafe_b64decode(position + "=" * (-len(position) % 4)))
    except (binascii.Error, ValueError):
        raise UnknownPosition(position) from None
    if not isinstance(key, dict):
        raise UnknownPosition(position)
    return key
