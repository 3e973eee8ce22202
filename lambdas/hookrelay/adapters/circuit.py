"""DynamoDB: an endpoint's circuit (attributes of the endpoint record) and the deliveries parked behind it.

A parked delivery carries a `parked_endpoint` mark on its record and has an entry in its endpoint's lot
(`schema.PARKING_LOT`): partitioned by the endpoint and its delivery's message group (`lot_partition`, over
schema.LOT_SHARDS), sorted by event order, holding what the drain needs to release it; a read merges the shards.
The lot is a table, not an index, so reading it is strongly consistent: the circuit closes on a lot read empty
after the close began (services/parking.py). The mark is written first, the entry after; every later write of the
delivery's parking (park again, claim, end, unpark) puts or drops the entry from the mark, so a crash between the
two is repaired by the next message for that delivery.

An entry written before the lot was sharded is under the endpoint's own id (`_lot_partitions` reads it too), and
one written under an earlier count of shards (schema.EARLIER_LOT_SHARDS) may be in another shard than the count's
now. The writes that follow a delivery's mark do not look there: the claim or end of its delivery leaves such an
entry behind, stale, and the next read of it releases it again, whose refused claim drops it wherever it is
(`_drop_everywhere`). So each such entry costs one more release, once, and nothing is released twice into an
attempt.
"""

from __future__ import annotations

import heapq
import itertools
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from boto3.dynamodb.conditions import Key

from hookrelay.adapters import schema
from hookrelay.adapters.dynamodb import (
    applied,
    batch_get,
    batch_put,
    claim_update,
    claim_values,
    claimable_condition,
    conditional_write,
    deliveries_by_id,
    delivery_item,
    endpoints_of,
    first_write,
    put_first,
    query_items,
    scatter,
    set_status_key,
    shards,
    update_expression,
)
from hookrelay.adapters.records import from_data
from hookrelay.domain.circuit import CircuitState, park_order
from hookrelay.domain.clock import from_rfc3339, to_rfc3339
from hookrelay.domain.lifecycle import parkable, parked
from hookrelay.domain.models import Delivery, Endpoint, EndpointState
from hookrelay.domain.paging import BoundedCount
from hookrelay.domain.status import DeadReason, DeliveryStatus
from hookrelay.services.ports import ParkedDelivery, ParkOutcome

_PARKED = schema.PARKED_MARK
_CIRCUITS = schema.OPEN_CIRCUITS_INDEX
_OPEN_MARK = "1"  # the constant partition of the sparse open-circuits index


def _key(endpoint: Endpoint) -> dict[str, str]:
    return {"tenant_id": endpoint.tenant_id, "id": endpoint.id}


class DynamoCircuits:
    """CircuitRepository on the endpoints table."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def _update(self, key: dict[str, str], update: str, condition: str, values: dict[str, Any]) -> bool:
        names = {"#c": "circuit", "#state": "state", "#mark": _CIRCUITS.partition_key}
        used = {name: attr for name, attr in names.items() if name in update or name in condition}
        return applied(
            self.table.update_item,
            Key=key,
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeValues=values,
            **({"ExpressionAttributeNames": used} if used else {}),
        )

    def count_failure(self, tenant_id: str, endpoint_id: str, delivery_id: str) -> Endpoint | None:
        result = conditional_write(
            self.table.update_item,
            Key={"tenant_id": tenant_id, "id": endpoint_id},
            UpdateExpression="SET circuit_failed = list_append(if_not_exists(circuit_failed, :none), :failed) "
            "ADD circuit_failures :one",
            ConditionExpression="attribute_exists(id) AND #state = :enabled AND "
            "(attribute_not_exists(#c) OR #c = :closed)",
            ExpressionAttributeNames={"#state": "state", "#c": "circuit"},
            ExpressionAttributeValues={
                ":one": 1,
                ":none": [],
                ":failed": [delivery_id],
                ":enabled": EndpointState.ENABLED.value,
                ":closed": CircuitState.CLOSED.value,
            },
            ReturnValues="ALL_NEW",
        )
        return None if result is None else from_data(Endpoint, result["Attributes"])

    def reset_failures(self, tenant_id: str, endpoint_id: str) -> None:
        conditional_write(
            self.table.update_item,
            Key={"tenant_id": tenant_id, "id": endpoint_id},
            UpdateExpression="REMOVE circuit_failures, circuit_failed",
            ConditionExpression="circuit_failures > :zero",
            ExpressionAttributeValues={":zero": 0},
        )

    def open(self, endpoint: Endpoint, at: datetime, due_at: datetime, threshold: int) -> bool:
        return self._update(
            _key(endpoint),
            "SET #c = :open, circuit_opened_at = :at, next_probe_at = :due, probes_made = :zero, "
            "circuit_step = if_not_exists(circuit_step, :zero) + :one, #mark = :mark, drained_count = :zero "
            "REMOVE circuit_failures, circuit_failed, drain_paused_until, circuit_closing",
            "#state = :enabled AND (attribute_not_exists(#c) OR #c = :closed) AND circuit_failures >= :threshold",
            {
                ":open": CircuitState.OPEN.value,
                ":closed": CircuitState.CLOSED.value,
                ":enabled": EndpointState.ENABLED.value,
                ":at": to_rfc3339(at),
                ":due": to_rfc3339(due_at),
                ":zero": 0,
                ":one": 1,
                ":mark": _OPEN_MARK,
                ":threshold": threshold,
            },
        )

    def reopen(self, endpoint: Endpoint, due_at: datetime) -> bool:
        return self._update(
            _key(endpoint),
            "SET #c = :open, next_probe_at = :due ADD probes_made :one REMOVE drain_paused_until",
            "#c = :draining",
            {
                ":open": CircuitState.OPEN.value,
                ":draining": CircuitState.DRAINING.value,
                ":due": to_rfc3339(due_at),
                ":one": 1,
            },
        )

    def probed(self, endpoint: Endpoint, step: int, due_at: datetime) -> bool:
        return self._update(
            _key(endpoint),
            "SET next_probe_at = :due ADD probes_made :one",
            "#c = :open AND circuit_step = :step",
            {":due": to_rfc3339(due_at), ":one": 1, ":open": CircuitState.OPEN.value, ":step": step},
        )

    def start_drain(self, endpoint: Endpoint, step: int) -> bool:
        return self._update(
            _key(endpoint),
            "SET #c = :draining, drained_count = :zero REMOVE drain_paused_until",
            "#c = :open AND circuit_step = :step",
            {":draining": CircuitState.DRAINING.value, ":open": CircuitState.OPEN.value, ":step": step, ":zero": 0},
        )

    def drained(self, endpoint: Endpoint, step: int, released: int, due_at: datetime) -> bool:
        return self._update(
            _key(endpoint),
            "SET next_probe_at = :due ADD drained_count :n",
            "#c = :draining AND circuit_step = :step",
            {":due": to_rfc3339(due_at), ":n": released, ":draining": CircuitState.DRAINING.value, ":step": step},
        )

    def pause_drain(self, tenant_id: str, endpoint_id: str, until: datetime) -> bool:
        return self._update(
            {"tenant_id": tenant_id, "id": endpoint_id},
            "SET drain_paused_until = :until",
            "#c = :draining",
            {":until": to_rfc3339(until), ":draining": CircuitState.DRAINING.value},
        )

    def begin_close(self, endpoint: Endpoint, step: int) -> bool:
        return self._update(
            _key(endpoint),
            "SET circuit_closing = :yes",
            "#c = :draining AND circuit_step = :step",
            {":yes": True, ":draining": CircuitState.DRAINING.value, ":step": step},
        )

    def hold_open(self, endpoint: Endpoint) -> bool:
        return self._update(
            _key(endpoint),
            "REMOVE circuit_closing",
            "#c = :draining AND circuit_closing = :yes",
            {":yes": True, ":draining": CircuitState.DRAINING.value},
        )

    def close(self, endpoint: Endpoint, step: int) -> bool:
        return self._update(
            _key(endpoint),
            "SET #c = :closed REMOVE #mark, next_probe_at, drain_paused_until, circuit_failures, circuit_closing",
            "#c = :draining AND circuit_step = :step AND circuit_closing = :yes",
            {
                ":closed": CircuitState.CLOSED.value,
                ":draining": CircuitState.DRAINING.value,
                ":step": step,
                ":yes": True,
            },
        )

    def take_over(self, endpoint: Endpoint, step: int, due_at: datetime) -> bool:
        return self._update(
            _key(endpoint),
            "SET circuit_step = :next, next_probe_at = :due",
            "circuit_step = :step AND #c IN (:open, :draining)",
            {
                ":next": step + 1,
                ":step": step,
                ":due": to_rfc3339(due_at),
                ":open": CircuitState.OPEN.value,
                ":draining": CircuitState.DRAINING.value,
            },
        )

    def reset(self, endpoint: Endpoint) -> bool:
        return self._update(
            _key(endpoint),
            "SET #c = :closed REMOVE #mark, next_probe_at, drain_paused_until, circuit_failures, circuit_closing",
            # attribute_exists: a missing `state` satisfies `<>`, and a reset must never create an endpoint.
            "attribute_exists(id) AND #state <> :enabled",
            {":closed": CircuitState.CLOSED.value, ":enabled": EndpointState.ENABLED.value},
        )

    def open_circuits(self) -> Iterator[Endpoint]:
        entries = query_items(
            self.table, IndexName=_CIRCUITS.name, KeyConditionExpression=Key(_CIRCUITS.partition_key).eq(_OPEN_MARK)
        )
        yield from endpoints_of(self.table, entries)


def _slot(event_order: str, delivery_id: str) -> str:
    return f"{event_order}#{delivery_id}"


def lot_partition(endpoint_id: str, message_group_id: str) -> str:
    """The lot partition of a delivery parked behind the endpoint: its message group's shard (a stable hash, never
    Python's salted `hash`), so a group's entries are in one partition, in event order."""
    return _lot_shard(endpoint_id, message_group_id, schema.LOT_SHARDS)


def _lot_shard(endpoint_id: str, message_group_id: str, count: int) -> str:
    return f"{endpoint_id}#{zlib.crc32(message_group_id.encode()) % count}"


def _entry_partitions(endpoint_id: str, message_group_id: str) -> list[str]:
    """Every partition one entry of the group's can be in: its shard now, its shard under each earlier count
    (schema.EARLIER_LOT_SHARDS), and the endpoint's own id (from before shards)."""
    counts = (schema.LOT_SHARDS, *schema.EARLIER_LOT_SHARDS)
    return list(dict.fromkeys([*(_lot_shard(endpoint_id, message_group_id, n) for n in counts), endpoint_id]))


def _lot_partitions(endpoint_id: str) -> list[str]:
    """Every partition the endpoint's entries can be in: its shards, then its own id (entries from before shards)."""
    return [*shards(endpoint_id, schema.LOT_SHARDS), endpoint_id]


def _entry_key(endpoint_id: str, delivery: Mapping[str, Any]) -> dict[str, str]:
    return {
        "endpoint_id": lot_partition(endpoint_id, delivery["message_group_id"]),
        "slot": _slot(delivery["event_order"], delivery["id"]),
    }


def _one_per_slot(entries: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Merged entries, each slot once: a delivery's entry can be in two partitions (an old entry beside the one
    written when it parked again), which stand for the same parked delivery."""
    for _, same in itertools.groupby(entries, key=_by_slot):
        yield next(same)


def _by_slot(entry: Mapping[str, Any]) -> str:
    return str(entry["slot"])


_MIN_LOT_PAGE = 10  # entries per lot partition read, at the least


# What a lot entry copies of its delivery: what the drain needs to release it (`_parked`).
_ENTRY_ATTRIBUTES = (
    "id",
    "tenant_id",
    "status",
    "attempt_count",
    "created_at",
    "first_attempt_at",
    "event_order",
    "message_group_id",
)


def _lot_entry(delivery: dict[str, Any]) -> dict[str, Any]:
    """The lot entry of a delivery item marked parked."""
    return {
        **_entry_key(delivery[_PARKED], delivery),
        **{name: delivery[name] for name in _ENTRY_ATTRIBUTES if name in delivery},
    }


class DynamoParkingLot:
    """ParkingLot: the parked mark on the deliveries table, the entries in the parking-lot table."""

    def __init__(self, deliveries: Any, lot: Any, event_log: Any) -> None:
        self.deliveries = deliveries
        self.lot = lot
        self.event_log = event_log  # where a delivery not stored yet is read from, to be parked (its first write)

    def _current(self, delivery_id: str) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self.deliveries.get_item(Key={"id": delivery_id}, ConsistentRead=True).get("Item")
        return item

    def _drop_entry(self, endpoint_id: str, delivery: Mapping[str, Any]) -> None:
        self.lot.delete_item(Key=_entry_key(endpoint_id, delivery))

    def _drop_everywhere(self, endpoint_id: str, delivery: Mapping[str, Any]) -> None:
        """Drop a stale entry read from the lot: in its shard, in its shard under an earlier count of shards, and
        under the endpoint's own id, where it is if it was written before the lot was sharded (only this, rare, path
        deletes outside its shard)."""
        slot = _slot(delivery["event_order"], delivery["id"])
        for partition in _entry_partitions(endpoint_id, delivery["message_group_id"]):
            self.lot.delete_item(Key={"endpoint_id": partition, "slot": slot})

    def _drop_if_stale(self, delivery_id: str, endpoint_id: str, read: ParkedDelivery | None = None) -> None:
        """After a refused claim or end: if the delivery is not parked behind the endpoint (a crash after it
        left the lot, or an entry from before shards that its claim did not drop), its entry goes too, so the
        drain does not release it forever."""
        current = self._current(delivery_id)
        if current is not None and current.get(_PARKED) != endpoint_id and "event_order" in current:
            self._drop_everywhere(endpoint_id, current)
        elif current is None and read is not None:
            self._drop_everywhere(endpoint_id, _entry_of(read))

    def park(
        self,
        delivery_id: str,
        tenant_id: str,
        endpoint_id: str,
        attempt_number: int | None,
        at: datetime,
        unstored: Delivery | None = None,
    ) -> ParkOutcome:
        if unstored is not None and parkable(unstored, tenant_id, endpoint_id, attempt_number):
            # Read with no record (a first message's, as its event made it): its record put parked, if there is
            # still none, then its entry. A crash between the two leaves it marked with no entry, as below.
            item = put_first(self.deliveries, parked(unstored, at))
            if item is not None:
                self.lot.put_item(Item=_lot_entry(item))
                return ParkOutcome.PARKED
        claimable, claimable_values = claimable_condition()
        result = first_write(
            self.deliveries,
            self.event_log,
            tenant_id,
            delivery_id,
            # Records made before the circuit existed have no event_order: they sort by when they parked.
            UpdateExpression="SET #parked = :endpoint, parked_at = :at, "
            "event_order = if_not_exists(event_order, :fallback)",
            ConditionExpression=f"tenant_id = :tenant AND endpoint_id = :endpoint AND "
            f"attribute_not_exists(#parked) AND {claimable}"
            + ("" if attempt_number is None else " AND attempt_count = :made"),
            ExpressionAttributeNames={"#parked": _PARKED, "#s": "status"},
            ExpressionAttributeValues={
                ":endpoint": endpoint_id,
                ":tenant": tenant_id,
                ":at": to_rfc3339(at),
                ":fallback": park_order(at, delivery_id),
                **({} if attempt_number is None else {":made": attempt_number - 1}),
                **claimable_values,
            },
            ReturnValues="ALL_NEW",
        )
        if result is not None:
            self.lot.put_item(Item=_lot_entry(result["Attributes"]))
            return ParkOutcome.PARKED
        current = self._current(delivery_id)
        if current is None or current.get(_PARKED) != endpoint_id or current.get("tenant_id") != tenant_id:
            return ParkOutcome.NOT_PARKABLE
        self.lot.put_item(Item=_lot_entry(current))  # a crash may have come between the mark and the entry
        return ParkOutcome.ALREADY_PARKED

    def enter(self, deliveries: Sequence[Delivery]) -> None:
        batch_put(self.lot, (_lot_entry(delivery_item(delivery)) for delivery in deliveries))

    def missing(self, deliveries: Sequence[Delivery]) -> set[str]:
        slots = {_slot(d.event_order or "", d.id): d for d in deliveries}
        # In its shard, its shard under an earlier count, or under the endpoint's own id if it was entered before the
        # lot was sharded.
        keys = [
            {"endpoint_id": partition, "slot": slot}
            for slot, d in slots.items()
            for partition in _entry_partitions(d.endpoint_id, d.message_group_id)
        ]
        found = {item["slot"] for item in batch_get(self.lot, keys, consistent=False)}
        return {d.id for slot, d in slots.items() if slot not in found}

    def unpark(self, delivery_id: str, endpoint_id: str) -> bool:
        result = conditional_write(
            self.deliveries.update_item,
            Key={"id": delivery_id},
            UpdateExpression="REMOVE #parked, parked_at",
            ConditionExpression="#parked = :endpoint",
            ExpressionAttributeNames={"#parked": _PARKED},
            ExpressionAttributeValues={":endpoint": endpoint_id},
            ReturnValues="ALL_OLD",
        )
        if result is None:
            return False
        self._drop_entry(endpoint_id, result["Attributes"])
        return True

    def parked(self, endpoint_id: str, limit: int) -> list[ParkedDelivery]:
        # Each partition read oldest event first, a little more than its share of `limit` a page (a partition holding
        # more of the oldest is read on as the merge reaches its end), merged by slot: the endpoint's event order.
        page = max(_MIN_LOT_PAGE, -(-2 * limit // schema.LOT_SHARDS))
        queries = [
            {"KeyConditionExpression": Key("endpoint_id").eq(partition), "ConsistentRead": True, "Limit": page}
            for partition in _lot_partitions(endpoint_id)
        ]
        merged = heapq.merge(*scatter(self.lot, queries), key=_by_slot)
        return [_parked(item) for item in itertools.islice(_one_per_slot(merged), limit)]

    def count(self, endpoint_id: str, up_to: int) -> BoundedCount:
        # One entry more than `up_to` tells "exactly" from "at least"; Limit bounds the entries read, so the units paid.
        # The partitions one after the other, each only as far as the count still needs.
        read = 0
        for partition in _lot_partitions(endpoint_id):
            read += self._count_in(partition, up_to + 1 - read)
            if read > up_to:
                break
        return BoundedCount.of(read, up_to)

    def _count_in(self, partition: str, most: int) -> int:
        query: dict[str, Any] = {
            "KeyConditionExpression": Key("endpoint_id").eq(partition),
            "ConsistentRead": True,
            "Select": "COUNT",
        }
        read = 0
        while read < most:
            page = self.lot.query(**query, Limit=most - read)
            read += int(page["Count"])
            if "LastEvaluatedKey" not in page:
                break
            query["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return read

    def claim(
        self,
        delivery_id: str,
        tenant_id: str,
        endpoint_id: str,
        attempt_number: int,
        now: datetime,
        *,
        keep_entry: bool = False,
    ) -> Delivery | None:
        claimable, claimable_values = claimable_condition()
        result = conditional_write(
            self.deliveries.update_item,
            Key={"id": delivery_id},
            UpdateExpression=claim_update("#parked", "parked_at"),
            ConditionExpression=f"tenant_id = :tenant AND #parked = :endpoint AND {claimable} "
            "AND attempt_count = :made",
            ExpressionAttributeNames={"#parked": _PARKED, "#s": "status"},
            ExpressionAttributeValues={
                **claim_values(tenant_id, attempt_number, now),
                ":endpoint": endpoint_id,
                **claimable_values,
            },
            ReturnValues="ALL_NEW",
        )
        if result is None:
            self._drop_if_stale(delivery_id, endpoint_id)
            return None
        if not keep_entry:
            self._drop_entry(endpoint_id, result["Attributes"])
        return from_data(Delivery, result["Attributes"])

    def forget(self, parked: ParkedDelivery, endpoint_id: str) -> None:
        self._drop_everywhere(endpoint_id, _entry_of(parked))

    def end(
        self,
        parked: ParkedDelivery,
        endpoint_id: str,
        status: DeliveryStatus,
        now: datetime,
        expires_at: int,
        dead_reason: DeadReason | None = None,
    ) -> Delivery | None:
        sets = ["#s = :status", "updated_at = :now", "completed_at = :now", "expires_at = :e"]
        removes = ["#parked", "parked_at", "next_attempt_at", "claimed_at"]
        values = {
            **set_status_key(parked.tenant_id, parked.id, status, sets, removes),
            ":status": status.value,
            ":now": to_rfc3339(now),
            ":e": expires_at,
            ":endpoint": endpoint_id,
            ":was": parked.status.value,
            ":made": parked.attempt_count,
        }
        if dead_reason is not None:
            if status is not DeliveryStatus.DEAD:
                raise ValueError(f"a {status.value} delivery has no dead reason")
            sets += ["dead_lettered_at = :now", "dead_reason = :why"]
            values[":why"] = dead_reason.value
        result = conditional_write(
            self.deliveries.update_item,
            Key={"id": parked.id},
            UpdateExpression=update_expression(sets, removes),
            ConditionExpression="#parked = :endpoint AND #s = :was AND attempt_count = :made",
            ExpressionAttributeNames={"#parked": _PARKED, "#s": "status"},
            ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW",
        )
        if result is None:
            self._drop_if_stale(parked.id, endpoint_id, parked)
            return None
        self._drop_entry(endpoint_id, result["Attributes"])
        return from_data(Delivery, result["Attributes"])

    def get_many(self, delivery_ids: Sequence[str]) -> list[Delivery]:
        items = deliveries_by_id(self.deliveries, delivery_ids, consistent=True)
        return [from_data(Delivery, item) for item in items.values()]


def _entry_of(parked: ParkedDelivery) -> dict[str, str]:
    """What locates a parked delivery's entry, from what a read of the lot gave."""
    return {"id": parked.id, "event_order": parked.event_order, "message_group_id": parked.message_group_id}


def _parked(item: dict[str, Any]) -> ParkedDelivery:
    first = item.get("first_attempt_at")
    return ParkedDelivery(
        id=item["id"],
        tenant_id=item["tenant_id"],
        status=DeliveryStatus(item["status"]),
        attempt_count=int(item.get("attempt_count", 0)),
        created_at=from_rfc3339(item["created_at"]),
        first_attempt_at=from_rfc3339(first) if first else None,
        event_order=item["event_order"],
        message_group_id=item["message_group_id"],
    )
