"""Fairness between API keys: each key gets at most its own number of requests a second.

The stage's throttle (stacks/constructs/api.py) bounds the whole API, shared by every caller: alone, it lets one
producer's flood get everyone 429s. A per-key limit below it makes the flooding key the one refused. HTTP APIs
have no usage plans (those are REST APIs'), so the API functions count it (handlers/http.py; not the authorizer,
whose answers API Gateway caches): one conditional DynamoDB update per request in a fixed one-second window, on an
item that expires.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from hookrelay.domain.clock import epoch_seconds

WINDOW_SECONDS = 1
# A window's counter is worthless once the window has passed; TTL deletes it (lazily: reads never need it).
COUNTER_LIFETIME_SECONDS = 120
DEFAULT_PER_KEY_PER_SECOND = 50  # the deployed default: a quarter of the stage's 200 requests a second


@dataclass(frozen=True)
class Window:
    counter_id: str  # one counter per key and second
    expires_at: int  # epoch seconds, for TTL


def window(key_id: str, now: datetime) -> Window:
    second = epoch_seconds(now) // WINDOW_SECONDS * WINDOW_SECONDS
    return Window(counter_id=f"{key_id}#{second}", expires_at=second + COUNTER_LIFETIME_SECONDS)


def per_key_limit_from_config(raw: str | int | None) -> int | None:
    """The per-key limit a deployment configures: a positive whole number, or None (no per-key limit)."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, bool):
        raise ValueError("give a number of requests per second")
    limit = int(raw)
    if limit < 1:
        raise ValueError(f"a per-key limit is at least 1 request a second, not {limit}")
    return limit
