"""Identifiers: a type prefix and a ULID (time-ordered, so ids sort roughly by creation)."""

from __future__ import annotations

import secrets
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid(now_ms: int | None = None) -> str:
    value = ((now_ms if now_ms is not None else time.time_ns() // 1_000_000) << 80) | secrets.randbits(80)
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def new_id(prefix: str) -> str:
    return f"{prefix}_{ulid()}"


def event_id() -> str:
    return new_id("evt")


def delivery_id() -> str:
    return new_id("dlv")


def endpoint_id() -> str:
    return new_id("ep")


def tenant_id() -> str:
    return new_id("ten")


def api_key_id() -> str:
    return new_id("key")
