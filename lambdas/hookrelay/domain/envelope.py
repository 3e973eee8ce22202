"""The event envelope: the JSON body consumers receive, serialised once and never again."""

from __future__ import annotations

import json
import zlib
from datetime import datetime
from typing import Any

from hookrelay.domain.clock import to_rfc3339


def envelope_body(
    *,
    event_id: str,
    event_type: str,
    timestamp: datetime,
    data: dict[str, Any],
    ordering_key: str | None = None,
    sequence: int | None = None,
) -> str:
    envelope: dict[str, Any] = {"id": event_id, "type": event_type, "timestamp": to_rfc3339(timestamp), "data": data}
    if ordering_key is not None:
        envelope["ordering_key"] = ordering_key
        envelope["sequence"] = sequence
    return json.dumps(envelope, separators=(",", ":"), ensure_ascii=False)


def message_group_id(endpoint_id: str, max_in_flight: int, ordering_key: str | None, event_id: str) -> str:
    """`endpoint_id#slot`: the FIFO group bounds the endpoint's concurrency and keeps per-key order.

    The slot is a stable hash (not Python's salted `hash`) of the ordering key, or of the event id
    when there is none, so one key always lands in the same group.
    """
    slot = zlib.crc32((ordering_key or event_id).encode()) % max(1, max_in_flight)
    return f"{endpoint_id}#{slot}"


def retry_group_id(delivery_id: str) -> str:
    """A retry's own FIFO group: a retry is due at its time, never behind its endpoint's backlog of first
    attempts. (A failing endpoint's backlog is parked behind its circuit instead, so retries that bypass the
    endpoint's concurrency bound are the few of a healthy endpoint that rejected some events.)"""
    return f"retry~{delivery_id}"
