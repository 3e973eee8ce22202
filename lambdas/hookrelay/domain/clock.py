"""Time, in one format: timezone-aware UTC datetimes, serialised as RFC 3339 with milliseconds and Z."""

from __future__ import annotations

from datetime import UTC, datetime

RETENTION_DAYS = 30  # the redrive window: records live this long after their delivery ends


def utcnow() -> datetime:
    return datetime.now(UTC)


def to_rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def from_rfc3339(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def epoch_seconds(moment: datetime) -> int:
    return int(moment.timestamp())
