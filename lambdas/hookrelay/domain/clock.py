"""Time, in one format: timezone-aware UTC datetimes, serialised as RFC 3339 with milliseconds and Z."""

from __future__ import annotations

from datetime import UTC, datetime

RETENTION_DAYS = 30  # the redrive window: records live this long after their delivery ends


def utcnow() -> datetime:
    return datetime.now(UTC)


def truncate_to_milliseconds(moment: datetime) -> datetime:
    """`moment` truncated to the stored precision (RFC 3339 with milliseconds), so it compares as stored."""
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def to_rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def from_rfc3339(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def epoch_seconds(moment: datetime) -> int:
    return int(moment.timestamp())
