"""The slow lane's tails (domain/lanes.py): an item per message group in the slow-tails table, keyed by the group's
id, naming the last message forwarded to the slow lane and not yet settled there."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from hookrelay.adapters import schema
from hookrelay.adapters.dynamodb import applied
from hookrelay.domain.clock import epoch_seconds, utcnow

# No message a tail names outlives its queue's retention: a tail is written just before its message is sent. A tail
# that is never deleted (its endpoint deleted, its slow spell ended by a crash) is gone a day after that.
LIFETIME = timedelta(seconds=schema.DELIVERY_QUEUE.retention_seconds, days=1)


class SlowTailTable:
    def __init__(self, table: Any, clock: Callable[[], datetime] = utcnow) -> None:
        self.table = table
        self.clock = clock

    def tail(self, group: str) -> str | None:
        item = self.table.get_item(Key={"group_id": group}, ConsistentRead=True).get("Item")
        return None if item is None else str(item["tail"])

    def name(self, group: str, key: str) -> None:
        expires_at = epoch_seconds(self.clock() + LIFETIME)
        self.table.put_item(Item={"group_id": group, "tail": key, "expires_at": expires_at})

    def clear(self, group: str, key: str) -> bool:
        return applied(
            self.table.delete_item,
            Key={"group_id": group},
            ConditionExpression="tail = :key",
            ExpressionAttributeValues={":key": key},
        )
