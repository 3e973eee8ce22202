"""Admit or refuse one request of an API key against its per-key rate (domain/rate_limit.py): this container's
tally of the key's second first, the shared counter only when the tally says it must be written."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from hookrelay.domain.clock import utcnow
from hookrelay.domain.rate_limit import Tally, window
from hookrelay.services.ports import RateCounters

# Keys whose tallies a container keeps; past it, it starts over (a forgotten key's next request is a window's first).
KEPT_TALLIES_LIMIT = 10_000


@dataclass
class RateLimiter:
    counters: RateCounters
    per_key_per_second: int | None  # None: no per-key limit (the local stack, unless told)
    clock: Callable[[], datetime] = field(default=utcnow)
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
        for amount in tally.amounts(limit):
            if self.counters.take(tally.window.counter_id, amount, limit, tally.window.expires_at):
                tally.counted(amount)
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
        fresh = Tally(current) if tally is None else tally.following(current, limit)
        self._tallies[key_id] = fresh
        return fresh
