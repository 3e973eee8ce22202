"""Fairness between API keys: each key gets at most its own number of requests a second.

The stage's throttle (stacks/constructs/api.py) bounds the whole API, shared by every caller: alone, it lets one
producer's flood get everyone 429s. A per-key limit below it makes the flooding key the one refused. HTTP APIs
have no usage plans (those are REST APIs'), so the API functions count it (handlers/http.py; not the authorizer,
whose answers API Gateway caches) on a shared counter per key and second (a DynamoDB item that expires).

A write per request would cost a write unit on every API call, and most keys send far below their limit. So each
container keeps a `Tally` of its own part of a key's second and writes only what the limit needs:

- a container's first request of a key's second is admitted without a write, and added to the shared counter by
  that container's next request in the same second (so one container alone is held to the limit exactly);
- a container that has seen a key busy counts ahead: with the request it must count, it adds a lease of up to a
  `LEASE_SHARE`th of the limit, which its next requests of that second use without a write;
- once the shared counter refuses, the key is over its limit in this container until the second ends: later
  requests are refused without a write (a flood's refusals cost nothing).

What that trades, each bounded per container and second: a key may get one request more than its limit from each
container whose only request of that second it was (never counted), and may be refused before the limit by the
leases other containers hold unused (at most a `LEASE_SHARE`th of the limit each).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from hookrelay.domain.clock import epoch_seconds

WINDOW_SECONDS = 1
# A window's counter is worthless once the window has passed; TTL deletes it (lazily: reads never need it).
COUNTER_LIFETIME_SECONDS = 120
DEFAULT_PER_KEY_PER_SECOND = 50  # the deployed default: a quarter of the stage's 200 requests a second
# A container counts ahead at most this fraction of a key's limit (1/LEASE_SHARE): what others may lose to its lease.
LEASE_SHARE = 4


@dataclass(frozen=True)
class Window:
    counter_id: str  # one counter per key and second
    second: int  # its start, epoch seconds

    @property
    def expires_at(self) -> int:
        """Epoch seconds, for TTL."""
        return self.second + COUNTER_LIFETIME_SECONDS


def window(key_id: str, now: datetime) -> Window:
    second = epoch_seconds(now) // WINDOW_SECONDS * WINDOW_SECONDS
    return Window(counter_id=f"{key_id}#{second}", second=second)


@dataclass
class Tally:
    """One container's part of one key's window (see the module's docstring)."""

    window: Window
    lease: int = 0  # how far ahead to count when this container must write: from its part of the key's last window
    admitted: int = 0  # requests admitted here in this window
    uncounted: int = 0  # of those, not added to the shared counter yet (the window's first)
    ahead: int = 0  # counted on the shared counter ahead of requests (a lease), not used yet
    over: bool = False  # the shared counter refused: the key is over its limit for the rest of the window

    def admit_unwritten(self) -> bool:
        """Admit a request without a write when this container may (a counted-ahead request, or the window's
        first); False when the shared counter must be asked. (A tally that is `over` refuses before asking.)"""
        if self.ahead:
            self.ahead -= 1
        elif self.admitted:
            return False
        else:
            self.uncounted = 1
        self.admitted += 1
        return True

    def amounts(self, limit: int) -> list[int]:
        """What to add to the shared counter for this request, in the order to try: with the lease, then without
        it; none when even the request and the uncounted one exceed the limit."""
        due = self.uncounted + 1
        return [amount for amount in dict.fromkeys((due + self.lease, due)) if amount <= limit]

    def counted(self, amount: int) -> None:
        self.ahead = amount - self.uncounted - 1
        self.uncounted = 0
        self.admitted += 1

    def refused(self) -> None:
        self.over = True

    def following(self, current: Window, limit: int) -> Tally:
        """This container's tally of a later window of the key: right after this one, it leases ahead what it
        admitted in this one (but the request that makes the write), up to its share of the limit."""
        if current.second != self.window.second + WINDOW_SECONDS:
            return Tally(current)
        return Tally(current, lease=max(0, min(self.admitted - 1, limit // LEASE_SHARE)))


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
