"""Admit or refuse one request of an API key against its per-key rate (domain/rate_limit.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from hookrelay.domain.clock import utcnow
from hookrelay.domain.rate_limit import window
from hookrelay.services.ports import RateCounters


@dataclass
class RateLimiter:
    counters: RateCounters
    per_key_per_second: int | None  # None: no per-key limit (the local stack, unless told)
    clock: Callable[[], datetime] = field(default=utcnow)

    def admit(self, key_id: str) -> bool:
        """Count the request; False when the key has already made its number of requests this second."""
        if self.per_key_per_second is None:
            return True
        current = window(key_id, self.clock())
        return self.counters.take(current.counter_id, self.per_key_per_second, current.expires_at)
