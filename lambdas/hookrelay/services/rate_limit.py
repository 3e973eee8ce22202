"""Admit or refuse one request of an API key against its per-key rate (domain/rate_limit.py): this container's
tally of the key's second first, the key's counters only when the tally says one must be written."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from hookrelay.domain.clock import utcnow
from hookrelay.domain.rate_limit import Tally, counter_shards, window
from hookrelay.services.ports import RateCounters

# Keys whose tallies a container keeps; past it, it starts over (a forgotten key's next request is a window's first).
KEPT_TALLIES_LIMIT = 10_000


@dataclass
class RateLimiter:
    counters: RateCounters
    per_key_per_second: int | None  # None: no per-key limit (the local stack, unless told)
    clock: Callable[[], datetime] = field(default=utcnow)
    # Which of a key's n counters a container starts its second on: any, so that containers spread over them.
    pick_shard: Callable[[int], int] = field(default=random.randrange)
    _tallies: dict[str, Tally] = field(default_factory=dict, init=False, repr=False)

    def admit(self, key_id: str) -> bool:
        """Count the request; False when the key has already made its number of requests this second."""
        limit = self.per_key_per_second
        if limit is None:
            return True
        tally = self._tally(key_id, limit)
        if tally.over:
            return False
        if tally.admit_unwritten():
            return True
        for ask in tally.asks():
            if self.counters.take(ask.counter_id, ask.amount, ask.limit, tally.window.expires_at):
                tally.counted(ask)
                return True
        tally.refused()
        return False

    def _tally(self, key_id: str, limit: int) -> Tally:
        current = window(key_id, self.clock())
        tally = self._tallies.get(key_id)
        if tally is not None and tally.window == current:
            return tally
        if tally is None and len(self._tallies) >= KEPT_TALLIES_LIMIT:
            self._tallies.clear()
        shard = self.pick_shard(counter_shards(limit))
        fresh = Tally(current, limit, shard) if tally is None else tally.following(current, limit, shard)
        self._tallies[key_id] = fresh
        return fresh
