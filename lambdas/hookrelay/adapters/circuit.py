"""DynamoDB: an endpoint's circuit (attributes of the endpoint record) and the deliveries parked behind it.

The parked index (`schema.PARKED_INDEX`) holds a delivery exactly while its `parked_endpoint` attribute is
set, sorted by `event_order`. The endpoint's `parked_count` moves in the same transaction as every park and
unpark, so closing the circuit can be conditional on the count being zero: the index itself is eventually
consistent and could still show nothing for a delivery parked a moment ago.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from boto3.dynamodb.conditions import Key
from botocore.exceptions import ClientError

from hookrelay.adapters import schema
from hookrelay.adapters.dynamodb import (
    applied,
    claim_update,
    claim_values,
    claimable_condition,
    conditional_write,
    deliveries_by_id,
    endpoints_of,
    query_items,
    set_status_key,
    update_expression,
)
from hookrelay.domain.circuit import CircuitState
from hookrelay.domain.clock import from_rfc3339, to_rfc3339
from hookrelay.domain.models import Delivery, Endpoint, EndpointState
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ports import ParkedDelivery, ParkOutcome

_PARKED = schema.PARKED_INDEX
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
        return None if result is None else Endpoint.model_validate(result["Attributes"])

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
            "REMOVE circuit_failures, circuit_failed, drain_paused_until",
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

    def close(self, endpoint: Endpoint, step: int) -> bool:
        return self._update(
            _key(endpoint),
            "SET #c = :closed REMOVE #mark, next_probe_at, drain_paused_until, circuit_failures",
            "#c = :draining AND circuit_step = :step AND (attribute_not_exists(parked_count) OR parked_count = :zero)",
            {":closed": CircuitState.CLOSED.value, ":draining": CircuitState.DRAINING.value, ":step": step, ":zero": 0},
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
            "SET #c = :closed REMOVE #mark, next_probe_at, drain_paused_until, circuit_failures",
            # attribute_exists: a missing `state` satisfies `<>`, and a reset must never create an endpoint.
            "attribute_exists(id) AND #state <> :enabled AND "
            "(attribute_not_exists(parked_count) OR parked_count = :zero)",
            {":closed": CircuitState.CLOSED.value, ":enabled": EndpointState.ENABLED.value, ":zero": 0},
        )

    def open_circuits(self) -> Iterator[Endpoint]:
        entries = query_items(
            self.table, IndexName=_CIRCUITS.name, KeyConditionExpression=Key(_CIRCUITS.partition_key).eq(_OPEN_MARK)
        )
        yield from endpoints_of(self.table, entries)


def _cancelled(error: ClientError) -> list[str] | None:
    """The per-item reasons of a cancelled transaction (None for any other error)."""
    if error.response["Error"]["Code"] != "TransactionCanceledException":
        return None
    return [reason.get("Code", "None") for reason in error.response.get("CancellationReasons", [])]


class DynamoParkingLot:
    """ParkingLot on the deliveries table, each park and unpark one transaction with the endpoint's count."""

    def __init__(self, deliveries: Any, endpoints: Any) -> None:
        self.deliveries = deliveries
        self.endpoints = endpoints
        self.client = deliveries.meta.client  # the resource's client: takes Python values, like the tables

    def _count(self, tenant_id: str, endpoint_id: str, delta: int, condition: str | None = None) -> dict[str, Any]:
        update: dict[str, Any] = {
            "TableName": self.endpoints.name,
            "Key": {"tenant_id": tenant_id, "id": endpoint_id},
            "UpdateExpression": "ADD parked_count :delta",
            "ExpressionAttributeValues": {":delta": delta},
        }
        if condition:
            update["ConditionExpression"] = condition
            update["ExpressionAttributeNames"] = {"#state": "state", "#c": "circuit"}
            update["ExpressionAttributeValues"] |= {
                ":enabled": EndpointState.ENABLED.value,
                ":open": CircuitState.OPEN.value,
                ":draining": CircuitState.DRAINING.value,
            }
        return {"Update": update}

    def _transact(self, items: list[dict[str, Any]]) -> list[str] | None:
        """Run the transaction: None when it applied, else the cancellation reason of each item."""
        try:
            self.client.transact_write_items(TransactItems=items)
        except ClientError as error:
            reasons = _cancelled(error)
            if reasons is None:
                raise
            return reasons
        return None

    def park(
        self, delivery_id: str, tenant_id: str, endpoint_id: str, attempt_number: int | None, at: datetime
    ) -> ParkOutcome:
        claimable, claimable_values = claimable_condition()
        park = {
            "Update": {
                "TableName": self.deliveries.name,
                "Key": {"id": delivery_id},
                # Records made before the circuit existed have no event_order: they sort by when they parked.
                "UpdateExpression": "SET #parked = :endpoint, parked_at = :at, "
                "event_order = if_not_exists(event_order, :fallback)",
                "ConditionExpression": f"tenant_id = :tenant AND endpoint_id = :endpoint AND "
                f"attribute_not_exists(#parked) AND {claimable}"
                + ("" if attempt_number is None else " AND attempt_count = :made"),
                "ExpressionAttributeNames": {"#parked": _PARKED.partition_key, "#s": "status"},
                "ExpressionAttributeValues": {
                    ":endpoint": endpoint_id,
                    ":tenant": tenant_id,
                    ":at": to_rfc3339(at),
                    ":fallback": f"{to_rfc3339(at)}#{delivery_id}",
                    **({} if attempt_number is None else {":made": attempt_number - 1}),
                    **claimable_values,
                },
            }
        }
        reasons = self._transact(
            [park, self._count(tenant_id, endpoint_id, 1, "#state = :enabled AND #c IN (:open, :draining)")]
        )
        if reasons is None:
            return ParkOutcome.PARKED
        if reasons[0] == "ConditionalCheckFailed":
            current = self.deliveries.get_item(Key={"id": delivery_id}, ConsistentRead=True).get("Item") or {}
            parked = current.get(_PARKED.partition_key) == endpoint_id
            return ParkOutcome.ALREADY_PARKED if parked else ParkOutcome.NOT_PARKABLE
        return ParkOutcome.CIRCUIT_CLOSED

    def parked(self, endpoint_id: str, limit: int) -> list[ParkedDelivery]:
        page = self.deliveries.query(
            IndexName=_PARKED.name,
            KeyConditionExpression=Key(_PARKED.partition_key).eq(endpoint_id),
            ScanIndexForward=True,  # oldest event first
            Limit=limit,
        )
        return [_parked(item) for item in page["Items"]]

    def claim(
        self, delivery_id: str, tenant_id: str, endpoint_id: str, attempt_number: int, now: datetime
    ) -> Delivery | None:
        claimable, claimable_values = claimable_condition()
        claim = {
            "Update": {
                "TableName": self.deliveries.name,
                "Key": {"id": delivery_id},
                "UpdateExpression": claim_update("#parked", "parked_at"),
                "ConditionExpression": f"tenant_id = :tenant AND #parked = :endpoint AND {claimable} "
                "AND attempt_count = :made",
                "ExpressionAttributeNames": {"#parked": _PARKED.partition_key, "#s": "status"},
                "ExpressionAttributeValues": {
                    **claim_values(tenant_id, attempt_number, now),
                    ":endpoint": endpoint_id,
                    **claimable_values,
                },
            }
        }
        if self._transact([claim, self._count(tenant_id, endpoint_id, -1)]) is not None:
            return None
        item = self.deliveries.get_item(Key={"id": delivery_id}, ConsistentRead=True).get("Item")
        return None if item is None else Delivery.model_validate(item)

    def end(
        self, parked: ParkedDelivery, endpoint_id: str, status: DeliveryStatus, now: datetime, expires_at: int
    ) -> Delivery | None:
        sets = ["#s = :status", "updated_at = :now", "completed_at = :now", "expires_at = :e"]
        removes = ["#parked", "parked_at", "next_attempt_at", "claimed_at"]
        end = {
            "Update": {
                "TableName": self.deliveries.name,
                "Key": {"id": parked.id},
                "ExpressionAttributeValues": {
                    **set_status_key(parked.tenant_id, status, sets, removes),
                    ":status": status.value,
                    ":now": to_rfc3339(now),
                    ":e": expires_at,
                    ":endpoint": endpoint_id,
                    ":was": parked.status.value,
                    ":made": parked.attempt_count,
                },
                "UpdateExpression": update_expression(sets, removes),
                "ConditionExpression": "#parked = :endpoint AND #s = :was AND attempt_count = :made",
                "ExpressionAttributeNames": {"#parked": _PARKED.partition_key, "#s": "status"},
            }
        }
        if self._transact([end, self._count(parked.tenant_id, endpoint_id, -1)]) is not None:
            return None
        item = self.deliveries.get_item(Key={"id": parked.id}, ConsistentRead=True).get("Item")
        return None if item is None else Delivery.model_validate(item)

    def get_many(self, delivery_ids: Sequence[str]) -> list[Delivery]:
        items = deliveries_by_id(self.deliveries, delivery_ids, consistent=True)
        return [Delivery.model_validate(item) for item in items.values()]


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
