"""Time, in one format: timezone-aware UTC datetimes, serialised as RFC 3339 with milliseconds and Z."""

from __future__ import annotations

from datetime import UTC, datetime

RETENTION_DAYS = 30  # the redrive window: records live this long after their delivery ends


# The bounds a query's times are held to: nothing is stored outside them, and the arithmetic done on a bound
# (a millisecond either side, the change to UTC) cannot leave datetime's range (years 1 to 9999).
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 12, 31, tzinfo=UTC)


def within_range(moment: datetime) -> datetime:
    """An aware `moment` in UTC, held to [EARLIEST, LATEST]: a bound before anything was stored, or after all of
    it, selects the same records as the extreme itself (`since=0001-01-01T00:00:00+01:00` is not a 500)."""
    if moment <= EARLIEST:
        return EARLIEST
    if moment >= LATEST:
        return LATEST
    return moment.astimezone(UTC)


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
