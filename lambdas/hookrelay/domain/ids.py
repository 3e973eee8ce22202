"""Identifiers: a type prefix and a ULID (time-ordered, so ids sort roughly by creation)."""

from __future__ import annotations

import hashlib
import secrets
import time
from datetime import UTC, datetime, timedelta

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _encode(now_ms: int, randomness: int) -> str:
    value = (now_ms << 80) | randomness
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def ulid(now_ms: int | None = None) -> str:
    return _encode(now_ms if now_ms is not None else time.time_ns() // 1_000_000, secrets.randbits(80))


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)
_LAST_MS = (datetime.max.replace(tzinfo=UTC) - _EPOCH) // _MILLISECOND


def epoch_ms(moment: datetime) -> int:
    """The moment's millisecond since the epoch, exactly (floored, as `clock.to_rfc3339` writes it; no float)."""
    return (moment - _EPOCH) // _MILLISECOND


def id_at(prefix: str, moment: datetime) -> str:
    """A new random id of its kind timed at `moment`'s millisecond, which `moment_of` reads back from it."""
    return f"{prefix}_{ulid(epoch_ms(moment))}"


def moment_of(identifier: str) -> datetime | None:
    """The millisecond an id is timed at (`id_at`, `ulid`, `derived_id`); None if it is no id of that form. A keyed
    id (`keyed_id`) reads as some moment too, but one that says nothing of when it was made."""
    value = _value(identifier.partition("_")[2])
    if value is None:
        return None
    # A keyed id's 48 bits of digest read as a moment up to the year 10889: past what a datetime holds, none.
    return _EPOCH + (value >> _RANDOM_BITS) * _MILLISECOND if value >> _RANDOM_BITS <= _LAST_MS else None


def _value(body: str) -> int | None:
    """The 128 bits an id's body (after its prefix) encodes, `_encode`'s inverse; None for a body of no such id."""
    if len(body) != 26 or not set(body) <= set(_CROCKFORD) or body[0] > "7":  # 26 digits of 5 bits hold 128
        return None
    value = 0
    for char in body:
        value = value * 32 + _CROCKFORD.index(char)
    return value


_DELIVERY = "dlv"
_RANDOM_BITS = 80


def derived_delivery_id(moment: datetime, *parts: str) -> str:
    """A delivery id timed at `moment` that is the same every time it is derived from `parts`.

    Creating a delivery under it twice creates it once: that is what makes a re-run harmless.
    """
    return derived_id(_DELIVERY, moment, *parts)


def is_derived_delivery_id(identifier: str, *parts: str) -> bool:
    """Whether `identifier` is `derived_delivery_id(<some moment>, *parts)`: its random bits are the parts' digest."""
    prefix, _, body = identifier.partition("_")
    value = _value(body) if prefix == _DELIVERY else None
    return value is not None and value & ((1 << _RANDOM_BITS) - 1) == _digest(parts, _RANDOM_BITS // 8)


def derived_id(prefix: str, moment: datetime, *parts: str) -> str:
    """An id of any kind timed at `moment`, the same every time it is derived from `parts` (see above)."""
    return f"{prefix}_" + _encode(epoch_ms(moment), _digest(parts, _RANDOM_BITS // 8))


def keyed_id(prefix: str, *parts: str) -> str:
    """An id wholly derived from `parts` (a request's idempotency key and body): a retry of a request that
    crashed converges on the id the first run wrote, whenever it comes. Not time-ordered, unlike the others."""
    digest = _digest(parts, 16)
    return f"{prefix}_" + _encode(digest >> 80, digest & ((1 << 80) - 1))


def _digest(parts: tuple[str, ...], size: int) -> int:
    return int.from_bytes(hashlib.sha256("\x00".join(parts).encode()).digest()[:size], "big")


def new_id(prefix: str) -> str:
    return f"{prefix}_{ulid()}"


def delivery_id() -> str:
    return new_id(_DELIVERY)


def endpoint_id() -> str:
    return new_id("ep")


def tenant_id() -> str:
    return new_id("ten")


def api_key_id() -> str:
    return new_id("key")
