"""Fairness between API keys: each key gets at most its own number of requests a second.

The stage's throttle (stacks/constructs/api.py) bounds the whole API, shared by every caller: alone, it lets one
producer's flood get everyone 429s. A per-key limit below it makes the flooding key the one refused. HTTP APIs
have no usage plans (those are REST APIs'), so the API functions count it (handlers/http.py; not the authorizer,
whose answers API Gateway caches) on shared counters per key and second (items that expire).

A key's second has one counter per `REQUESTS_PER_COUNTER` requests of its limit (`counter_shards`): one for every
limit up to it (the default among them), more for a high one, its limit split over them (`shard_limit`). Each
container writes to one of them, picked at random when the second starts, and moves on to the next when that one
refuses (`SHARD_TRIES` in all), so a key's writes spread over its counters however many containers serve it.

A write per request would cost a write unit on every API call, and most keys send far below their limit. So each
container keeps a `Tally` of its own part of a key's second and writes only what the limit needs:

- a container's first request of a key's second is admitted without a write, and added to a counter by that
  container's next request in the same second (so one container alone is held to the limit exactly);
- a container that has seen a key busy counts ahead: with the request it must count, it adds a lease of up to a
  `LEASE_SHARE`th of its counter's limit, which its next requests of that second use without a write;
- once every counter it tries refuses, the key is over its limit in this container until the second ends: later
  requests are refused without a write (a flood's refusals cost nothing).

What that trades, each bounded per container and second: a key may get one request more than its limit from each
container whose only request of that second it was (never counted), and may be refused before the limit by the
leases other containers hold unused (at most a `LEASE_SHARE`th of a counter's limit each). Sharding adds one: with
more counters than `SHARD_TRIES`, a container whose tries all land on full counters is refused while the key's
other counters have room, so the key may be refused there before its limit, by at most the room left on the
counters that container did not try, and only until the second ends. Containers start at random and move on as
counters fill, so the counters fill about evenly. (One container alone reaches at most `SHARD_TRIES` counters'
limits a second, thousands of requests: more than one container serves, one request at a time.)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from hookrelay.domain.clock import epoch_seconds

WINDOW_SECONDS = 1
# A window's counter is worthless once the window has passed; TTL deletes it (lazily: reads never need it).
COUNTER_LIFETIME_SECONDS = 120
DEFAULT_PER_KEY_PER_SECOND = 50  # the deployed default: a quarter of the stage's 200 requests a second
# A container counts ahead at most this fraction of a counter's limit (1/LEASE_SHARE): what others may lose to it.
LEASE_SHARE = 4
# Each write a counter admits counts at least one request, so a counter that counts at most this many requests a
# second admits at most this many writes a second: a DynamoDB item's most (1,000 write units a second; the adapter's
# store, stated here once). Refused writes add nothing and come near a counter's limit (a lease that no longer
# fits, a container's last tries of its second).
REQUESTS_PER_COUNTER = 1_000
# The counters a container tries for one request, its own then the next ones, before the key is over in it: each
# more finds room a full counter lacks, and costs one refused write more, once a second.
SHARD_TRIES = 3


def counter_shards(limit: int) -> int:
    """How many counters a key's second is split over: one per REQUESTS_PER_COUNTER of its limit, rounded up."""
    return -(-limit // REQUESTS_PER_COUNTER)


def shard_limit(limit: int, shard: int) -> int:
    """One counter's part of the key's limit: the limit split as evenly as whole requests go (the first ones take
    one more), so that the parts add up to the limit exactly."""
    shards = counter_shards(limit)
    return limit // shards + (1 if shard < limit % shards else 0)


@dataclass(frozen=True)
class Window:
    key_id: str
    second: int  # its start, epoch seconds

    @property
    def expires_at(self) -> int:
        """Epoch seconds, for TTL."""
        return self.second + COUNTER_LIFETIME_SECONDS

    def counter_id(self, shard: int, shards: int) -> str:
        """One counter per key, second and shard; a key's only counter has no shard in its id (as before shards:
        a deployment's counters and every limit up to REQUESTS_PER_COUNTER keep theirs)."""
        return f"{self.key_id}#{self.second}" if shards == 1 else f"{self.key_id}#{self.second}#{shard}"


def window(key_id: str, now: datetime) -> Window:
    return Window(key_id=key_id, second=epoch_seconds(now) // WINDOW_SECONDS * WINDOW_SECONDS)


@dataclass(frozen=True)
class Ask:
    """One write to try: add `amount` to a counter, unless it would then count more than its `limit`."""

    shard: int
    counter_id: str
    amount: int
    limit: int  # the counter's part of the key's limit


@dataclass
class Tally:
    """One container's part of one key's window (see the module's docstring)."""

    window: Window
    limit: int  # the key's, over counter_shards(limit) counters
    shard: int = 0  # the counter this container writes to: picked at random, then the last that admitted
    lease: int = 0  # how far ahead to count when this container must write: from its part of the key's last window
    admitted: int = 0  # requests admitted here in this window
    uncounted: int = 0  # of those, not added to a counter yet (the window's first)
    ahead: int = 0  # counted on a counter ahead of requests (a lease), not used yet
    over: bool = False  # every counter tried refused: the key is over its limit for the rest of the window

    def admit_unwritten(self) -> bool:
        """Admit a request without a write when this container may (a counted-ahead request, or the window's
        first); False when a counter must be asked. (A tally that is `over` refuses before asking.)"""
        if self.ahead:
            self.ahead -= 1
        elif self.admitted:
            return False
        else:
            self.uncounted = 1
        self.admitted += 1
        return True

    def asks(self) -> list[Ask]:
        """The writes to try for this request, in order: on this container's counter with the lease, then without
        it; then likewise on the next counters, up to SHARD_TRIES distinct ones. An amount past a counter's limit
        is not asked (when even the request and the uncounted one are, that counter is not asked at all)."""
        shards = counter_shards(self.limit)
        due = self.uncounted + 1
        asks: list[Ask] = []
        for n in range(min(SHARD_TRIES, shards)):
            shard = (self.shard + n) % shards
            most = shard_limit(self.limit, shard)
            counter_id = self.window.counter_id(shard, shards)
            asks += [Ask(shard, counter_id, amount, most) for amount in dict.fromkeys((due + self.lease, due))]
        return [ask for ask in asks if ask.amount <= ask.limit]

    def counted(self, ask: Ask) -> None:
        """The counter admitted: this container writes there from now on."""
        self.shard = ask.shard
        self.ahead = ask.amount - self.uncounted - 1
        self.uncounted = 0
        self.admitted += 1

    def refused(self) -> None:
        self.over = True

    def following(self, current: Window, limit: int, shard: int) -> Tally:
        """This container's tally of a later window of the key, on counter `shard`: right after this one, it
        leases ahead what it admitted in this one (but the request that makes the write), up to its share of the
        smallest counter's limit (so that a lease fits any of the key's counters)."""
        if current.second != self.window.second + WINDOW_SECONDS:
            return Tally(current, limit, shard)
        share = limit // counter_shards(limit) // LEASE_SHARE
        return Tally(current, limit, shard, lease=max(0, min(self.admitted - 1, share)))


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
