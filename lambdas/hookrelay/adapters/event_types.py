"""The event-type catalogue in DynamoDB: one partition, sorted by name, so that listing is a paged query in name
order and the names are one projected query (the catalogue is capped at domain/event_types.MAX_EVENT_TYPES)."""

from __future__ import annotations

from typing import Any

from boto3.dynamodb.conditions import Key

from hookrelay.adapters import schema
from hookrelay.adapters.dynamodb import applied, from_item, query_items, to_item
from hookrelay.adapters.records import from_data
from hookrelay.domain.event_types import EventType

CATALOGUE = "event-types"  # the one partition: the whole catalogue is read together, and it is small
_PARTITION = schema.EVENT_TYPES.partition_key


class EventTypeTable:
    def __init__(self, table: Any) -> None:
        self.table = table

    def put(self, event_type: EventType) -> None:
        self.table.put_item(Item=to_item(event_type, **{_PARTITION: CATALOGUE}))

    def get(self, name: str) -> EventType | None:
        return from_item(EventType, self.table.get_item(Key={_PARTITION: CATALOGUE, "name": name}).get("Item"))

    def delete(self, name: str) -> bool:
        return applied(
            self.table.delete_item,
            Key={_PARTITION: CATALOGUE, "name": name},
            ConditionExpression="attribute_exists(#name)",
            ExpressionAttributeNames={"#name": "name"},
        )

    def page(self, limit: int, after: str | None) -> tuple[list[EventType], str | None]:
        # One more than asked for: finding it proves there is a next page without a wasted empty one.
        query: dict[str, Any] = {"KeyConditionExpression": Key(_PARTITION).eq(CATALOGUE), "Limit": limit + 1}
        if after is not None:
            query["ExclusiveStartKey"] = {_PARTITION: CATALOGUE, "name": after}
        found = [from_data(EventType, item) for item in self.table.query(**query)["Items"]]
        if len(found) > limit:
            return found[:limit], found[limit - 1].name
        return found, None

    def names(self) -> list[str]:
        items = query_items(
            self.table,
            KeyConditionExpression=Key(_PARTITION).eq(CATALOGUE),
            ProjectionExpression="#name",
            ExpressionAttributeNames={"#name": "name"},
        )
        return [str(item["name"]) for item in items]
