"""Each rate-limited endpoint's next free send slot (domain/pacing.py): one item per endpoint in the rate-limit
table, moved on by conditional writes, so racing senders never share a slot."""

from __future__ import annotations

import threading
from typing import Any

from hookrelay.adapters.dynamodb import applied, conditional_write
from hookrelay.domain.pacing import ITEM_LIFETIME_SECONDS, MICROS

# Each try is one conditional write; a try fails only when time moved the slot from busy to idle under it.
_TRIES = 4


def pacing_key(endpoint_id: str) -> dict[str, str]:
    return {"id": f"pace#{endpoint_id}"}


class DynamoEndpointPacer:
    def __init__(self, table: Any) -> None:
        self.table = table
        # Per endpoint, the next free slot this process last saw: a busy endpoint's reservation tries the busy case
        # first, so a paced send costs one write, not a refused one and then the one that applies.
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()

    def reserve(self, endpoint_id: str, now_us: int, interval_us: int, latest_us: int | None) -> int | None:
        expires = now_us // MICROS + ITEM_LIFETIME_SECONDS
        with self._lock:
            busy_first = self._seen.get(endpoint_id, 0) > now_us
        order = (self._busy, self._idle) if busy_first else (self._idle, self._busy)
        for _ in range(_TRIES):
            for take in order:
                answer = take(endpoint_id, now_us, interval_us, latest_us, expires)
                if answer is None:
                    continue
                slot, next_us = answer
                with self._lock:
                    self._seen[endpoint_id] = next_us
                return slot
            if latest_us is not None and self._beyond(endpoint_id, now_us, latest_us):
                return None
        raise RuntimeError(f"endpoint {endpoint_id}'s pacing slot kept changing under its reservation")

    def _idle(
        self, endpoint_id: str, now_us: int, interval_us: int, latest_us: int | None, expires: int
    ) -> tuple[int, int] | None:
        """The slot has passed (or there is none): this send's is now."""
        taken = applied(
            self.table.update_item,
            Key=pacing_key(endpoint_id),
            UpdateExpression="SET next_us = :next, expires_at = :expires",
            ConditionExpression="attribute_not_exists(next_us) OR next_us <= :now",
            ExpressionAttributeValues={":next": now_us + interval_us, ":now": now_us, ":expires": expires},
        )
        return (now_us, now_us + interval_us) if taken else None

    def _busy(
        self, endpoint_id: str, now_us: int, interval_us: int, latest_us: int | None, expires: int
    ) -> tuple[int, int] | None:
        """The slot lies ahead: take it (if within `latest_us`) and move it on, in one write."""
        condition = "next_us > :now" + ("" if latest_us is None else " AND next_us <= :latest")
        values: dict[str, Any] = {":interval": interval_us, ":now": now_us, ":expires": expires}
        if latest_us is not None:
            values[":latest"] = latest_us
        answer = conditional_write(
            self.table.update_item,
            Key=pacing_key(endpoint_id),
            UpdateExpression="ADD next_us :interval SET expires_at = :expires",
            ConditionExpression=condition,
            ExpressionAttributeValues=values,
            ReturnValues="UPDATED_NEW",
        )
        if answer is None:
            return None
        next_us = int(answer["Attributes"]["next_us"])
        return next_us - interval_us, next_us

    def _beyond(self, endpoint_id: str, now_us: int, latest_us: int) -> bool:
        """Both writes refused: the slot lies past the budget (else time moved it meanwhile: try again)."""
        next_us = self.next_free(endpoint_id)
        return next_us is not None and next_us > latest_us and next_us > now_us

    def next_free(self, endpoint_id: str) -> int | None:
        item = self.table.get_item(Key=pacing_key(endpoint_id), ConsistentRead=True).get("Item")
        return None if item is None or "next_us" not in item else int(item["next_us"])
