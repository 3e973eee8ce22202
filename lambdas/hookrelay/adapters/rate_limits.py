"""The per-key request counters in DynamoDB: one item per key and second, added to by a conditional update."""

from __future__ import annotations

from typing import Any

from hookrelay.adapters.dynamodb import applied


class DynamoRateCounters:
    def __init__(self, table: Any) -> None:
        self.table = table

    def take(self, counter_id: str, amount: int, limit: int, expires_at: int) -> bool:
        # One write, whatever the answer: a refusal adds nothing (the condition fails the update).
        return applied(
            self.table.update_item,
            Key={"id": counter_id},
            UpdateExpression="ADD #n :amount SET expires_at = if_not_exists(expires_at, :expires)",
            ConditionExpression="attribute_not_exists(#n) OR #n <= :room",
            ExpressionAttributeNames={"#n": "requests"},
            ExpressionAttributeValues={":amount": amount, ":room": limit - amount, ":expires": expires_at},
        )
