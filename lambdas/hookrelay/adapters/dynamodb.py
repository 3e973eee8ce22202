"""DynamoDB implementations of the repositories."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeVar

from boto3.dynamodb.conditions import Key
from botocore.exceptions import ClientError
from pydantic import BaseModel

from hookrelay.domain.clock import to_rfc3339
from hookrelay.domain.models import ApiKey, Delivery, Endpoint, Event, Tenant
from hookrelay.domain.status import CLAIMABLE_STATUSES, DeliveryStatus
from hookrelay.services.ports import AttemptRecord

M = TypeVar("M", bound=BaseModel)


def to_item(model: BaseModel, **extra: Any) -> dict[str, Any]:
    item = json.loads(model.model_dump_json(exclude_none=True), parse_float=Decimal)
    item.update(extra)
    return item


def from_item(model: type[M], item: dict[str, Any] | None) -> M | None:
    return None if item is None else model.model_validate(item)


def _conditional_failed(error: ClientError) -> bool:
    return error.response["Error"]["Code"] == "ConditionalCheckFailedException"


class TenantTable:
    def __init__(self, table: Any) -> None:
        self.table = table

    def put(self, tenant: Tenant) -> None:
        self.table.put_item(Item=to_item(tenant))

    def get(self, tenant_id: str) -> Tenant | None:
        return from_item(Tenant, self.table.get_item(Key={"id": tenant_id}).get("Item"))


class ApiKeyTable:
    def __init__(self, table: Any) -> None:
        self.table = table

    def put(self, key: ApiKey) -> None:
        self.table.put_item(Item=to_item(key), ConditionExpression="attribute_not_exists(key_id)")

    def get(self, key_id: str) -> ApiKey | None:
        return from_item(ApiKey, self.table.get_item(Key={"key_id": key_id}).get("Item"))

    def revoke(self, key_id: str, at: datetime) -> bool:
        try:
            self.table.update_item(
                Key={"key_id": key_id},
                UpdateExpression="SET revoked_at = if_not_exists(revoked_at, :at)",
                ConditionExpression="attribute_exists(key_id)",
                ExpressionAttributeValues={":at": to_rfc3339(at)},
            )
        except ClientError as error:
            if _conditional_failed(error):
                return False
            raise
        return True


class EndpointTable:
    def __init__(self, table: Any) -> None:
        self.table = table

    def put(self, endpoint: Endpoint) -> None:
        self.table.put_item(Item=to_item(endpoint))

    def get(self, tenant_id: str, endpoint_id: str) -> Endpoint | None:
        item = self.table.get_item(Key={"tenant_id": tenant_id, "id": endpoint_id}, ConsistentRead=True).get("Item")
        return from_item(Endpoint, item)

    def list_for_tenant(self, tenant_id: str) -> list[Endpoint]:
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"KeyConditionExpression": Key("tenant_id").eq(tenant_id)}
        while True:
            page = self.table.query(**kwargs)
            items.extend(page["Items"])
            if "LastEvaluatedKey" not in page:
                return [Endpoint.model_validate(item) for item in items]
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


class EventTable:
    def __init__(self, table: Any) -> None:
        self.table = table

    def put(self, event: Event) -> None:
        self.table.put_item(Item=to_item(event), ConditionExpression="attribute_not_exists(id)")

    def get(self, event_id: str) -> Event | None:
        return from_item(Event, self.table.get_item(Key={"id": event_id}).get("Item"))

    def next_sequence(self, tenant_id: str, ordering_key: str) -> int:
        """An atomic counter per (tenant, ordering key): strictly increasing, never reused."""
        result = self.table.update_item(
            Key={"id": f"seq#{tenant_id}#{ordering_key}"},
            UpdateExpression="ADD #v :one",
            ExpressionAttributeNames={"#v": "value"},
            ExpressionAttributeValues={":one": 1},
            ReturnValues="UPDATED_NEW",
        )
        return int(result["Attributes"]["value"])

    def extend_expiry(self, event_id: str, expires_at: int) -> None:
        """Keep the event at least as long as its latest-ending delivery (never shorten it)."""
        try:
            self.table.update_item(
                Key={"id": event_id},
                UpdateExpression="SET expires_at = :e",
                ConditionExpression="attribute_exists(id) AND expires_at < :e",
                ExpressionAttributeValues={":e": expires_at},
            )
        except ClientError as error:
            if not _conditional_failed(error):
                raise


def _tenant_status(tenant_id: str, status: DeliveryStatus) -> str:
    return f"{tenant_id}#{status.value}"


class DeliveryTable:
    def __init__(self, table: Any) -> None:
        self.table = table

    def put_many(self, deliveries: Sequence[Delivery]) -> None:
        with self.table.batch_writer() as batch:
            for delivery in deliveries:
                batch.put_item(
                    Item=to_item(delivery, tenant_status=_tenant_status(delivery.tenant_id, delivery.status))
                )

    def get(self, delivery_id: str) -> Delivery | None:
        return from_item(Delivery, self.table.get_item(Key={"id": delivery_id}, ConsistentRead=True).get("Item"))

    def claim(
        self, delivery_id: str, tenant_id: str, attempt_number: int, now: datetime, stale_before: datetime
    ) -> Delivery | None:
        claimable = sorted(s.value for s in CLAIMABLE_STATUSES)
        try:
            result = self.table.update_item(
                Key={"id": delivery_id},
                UpdateExpression=(
                    "SET #s = :attempting, tenant_status = :ts, attempt_count = :n, claimed_at = :now, "
                    "updated_at = :now, first_attempt_at = if_not_exists(first_attempt_at, :now)"
                ),
                ConditionExpression=(
                    "tenant_id = :tenant AND ("
                    "(#s IN (:c0, :c1) AND attempt_count = :prev) "
                    "OR (#s = :attempting AND attempt_count = :n AND claimed_at < :stale))"
                ),
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={
                    ":attempting": DeliveryStatus.ATTEMPTING.value,
                    ":ts": _tenant_status(tenant_id, DeliveryStatus.ATTEMPTING),
                    ":tenant": tenant_id,
                    ":c0": claimable[0],
                    ":c1": claimable[1],
                    ":n": attempt_number,
                    ":prev": attempt_number - 1,
                    ":now": to_rfc3339(now),
                    ":stale": to_rfc3339(stale_before),
                },
                ReturnValues="ALL_NEW",
            )
        except ClientError as error:
            if _conditional_failed(error):
                return None
            raise
        return Delivery.model_validate(result["Attributes"])

    def record_attempt(self, delivery_id: str, tenant_id: str, attempt_number: int, record: AttemptRecord) -> bool:
        now = to_rfc3339(record.attempt.started_at if record.completed_at is None else record.completed_at)
        sets = [
            "#s = :status",
            "tenant_status = :ts",
            "attempts = list_append(if_not_exists(attempts, :empty), :attempt)",
            "updated_at = :now",
        ]
        removes = ["claimed_at"]
        values: dict[str, Any] = {
            ":status": record.status.value,
            ":ts": _tenant_status(tenant_id, record.status),
            ":empty": [],
            ":attempt": [to_item(record.attempt)],
            ":now": now,
            ":attempting": DeliveryStatus.ATTEMPTING.value,
            ":n": attempt_number,
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
        try:
            self.table.update_item(
                Key={"id": delivery_id},
                UpdateExpression=f"SET {', '.join(sets)} REMOVE {', '.join(removes)}",
                ConditionExpression="#s = :attempting AND attempt_count = :n",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if _conditional_failed(error):
                return False
            raise
        return True

    def set_status(
        self, delivery_id: str, tenant_id: str, status: DeliveryStatus, now: datetime, expires_at: int | None
    ) -> None:
        sets = "#s = :status, tenant_status = :ts, updated_at = :now"
        values: dict[str, Any] = {
            ":status": status.value,
            ":ts": _tenant_status(tenant_id, status),
            ":now": to_rfc3339(now),
        }
        if status.is_terminal:
            sets += ", completed_at = :now"
        if expires_at is not None:
            sets += ", expires_at = :e"
            values[":e"] = expires_at
        self.table.update_item(
            Key={"id": delivery_id},
            UpdateExpression=f"SET {sets} REMOVE claimed_at, next_attempt_at",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues=values,
        )
