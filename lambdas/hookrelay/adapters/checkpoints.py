"""Where each scheduled sweep has got to: one item per sweep in the checkpoints table, moved only forward."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hookrelay.adapters.dynamodb import applied
from hookrelay.domain.clock import from_rfc3339, to_rfc3339


class CheckpointTable:
    def __init__(self, table: Any) -> None:
        self.table = table

    def get(self, name: str) -> datetime | None:
        item = self.table.get_item(Key={"name": name}, ConsistentRead=True).get("Item")
        return from_rfc3339(item["reached"]) if item else None

    def advance(self, name: str, to: datetime) -> bool:
        # Never back: two runs at once (a slow one and the next) may finish in either order. The stored times are
        # RFC 3339 at fixed width, so comparing the strings compares the times.
        reached = to_rfc3339(to)
        return applied(
            self.table.update_item,
            Key={"name": name},
            UpdateExpression="SET reached = :to",
            ConditionExpression="attribute_not_exists(reached) OR reached < :to",
            ExpressionAttributeValues={":to": reached},
        )
