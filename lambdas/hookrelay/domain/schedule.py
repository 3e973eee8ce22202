"""The retry schedule: deployment configuration, published as a table, enforced here.

Attempt times are anchored to the first attempt (attempt n is planned at the sum of the first n gaps),
so jitter never accumulates and the horizon is exact: no attempt is ever made later than
`horizon` seconds after the first one.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

MAX_HORIZON_SECONDS = 30 * 24 * 3600


class InvalidSchedule(ValueError):
    pass


@dataclass(frozen=True)
class PlannedAttempt:
    number: int
    gap: int  # seconds after the previous planned attempt
    offset: int  # seconds after the first attempt


@dataclass(frozen=True)
class RetrySchedule:
    name: str
    gaps: tuple[int, ...]  # gaps[0] == 0: the first attempt is immediate; gaps[i] precedes attempt i+1
    horizon: int  # seconds after the first attempt; nothing is attempted later
    repeat_every: int | None = None  # after the listed gaps, keep going at this gap within the horizon
    jitter: float = 0.1  # each attempt moves by up to ±jitter times its gap

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if not self.gaps or self.gaps[0] != 0:
            raise InvalidSchedule("the first attempt must be immediate: gaps must start with 0")
        for gap in self.gaps[1:] + ((self.repeat_every,) if self.repeat_every is not None else ()):
            if not isinstance(gap, int) or isinstance(gap, bool) or gap <= 0:
                raise InvalidSchedule(f"every gap after the first must be a positive whole number of seconds: {gap!r}")
        if not isinstance(self.horizon, int) or not 0 < self.horizon <= MAX_HORIZON_SECONDS:
            raise InvalidSchedule(f"the horizon must be between 1 second and 30 days, got {self.horizon!r}")
        if sum(self.gaps) > self.horizon:
            raise InvalidSchedule("the listed gaps add up to more than the horizon")
        if not 0 <= self.jitter < 0.5:
            raise InvalidSchedule("jitter must be in [0, 0.5)")

    def planned(self) -> Iterator[PlannedAttempt]:
        offset = 0
        for number, gap in enumerate(self.gaps, start=1):
            offset += gap
            yield PlannedAttempt(number, gap, offset)
        number = len(self.gaps)
        while self.repeat_every is not None and offset + self.repeat_every <= self.horizon:
            number += 1
            offset += self.repeat_every
            yield PlannedAttempt(number, self.repeat_every, offset)

    @property
    def max_attempts(self) -> int:
        return sum(1 for _ in self.planned())

    @property
    def longest_gap(self) -> int:
        return max(max(self.gaps), self.repeat_every or 0)

    @property
    def retry_after_cap(self) -> int:
        """A consumer's Retry-After is honoured up to the schedule's longest gap."""
        return self.longest_gap

    def attempt(self, number: int) -> PlannedAttempt | None:
        for planned in self.planned():
            if planned.number == number:
                return planned
        return None

    def next_attempt_at(
        self,
        *,
        first_attempt_at: datetime,
        attempts_made: int,
        now: datetime,
        retry_after: float | None = None,
        rng: random.Random | None = None,
    ) -> datetime | None:
        """When attempt `attempts_made + 1` should be made, or None when the schedule is exhausted."""
        planned = self.attempt(attempts_made + 1)
        horizon_end = first_attempt_at + timedelta(seconds=self.horizon)
        if planned is None or now >= horizon_end:
            return None
        spread = planned.gap * self.jitter
        jitter = (rng or random).uniform(-spread, spread)
        at = first_attempt_at + timedelta(seconds=planned.offset + jitter)
        # Never sooner than the first retry gap after the attempt that just failed (an earlier
        # Retry-After may have pushed us past the planned time) ...
        at = max(at, now + timedelta(seconds=self.gaps[1] if len(self.gaps) > 1 else planned.gap))
        # ... never earlier than the consumer asked, within the cap ...
        if retry_after is not None:
            at = max(at, now + timedelta(seconds=min(retry_after, self.retry_after_cap)))
        # ... and never past the horizon.
        return min(at, horizon_end)

    def to_config(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "gaps": list(self.gaps),
            "repeat_every": self.repeat_every,
            "horizon": self.horizon,
            "jitter": self.jitter,
        }


DEFAULT_SCHEDULE = RetrySchedule(
    name="default",
    gaps=(0, 30, 5 * 60, 30 * 60, 2 * 3600, 6 * 3600),
    repeat_every=12 * 3600,
    horizon=72 * 3600,
)

SHORT_SCHEDULE = RetrySchedule(
    name="short",
    gaps=(0, 60, 5 * 60, 30 * 60, 2 * 3600, 12 * 3600),
    horizon=60 + 5 * 60 + 30 * 60 + 2 * 3600 + 12 * 3600,
)

# The default schedule's shape in seconds instead of minutes and hours, for watching retries locally.
FAST_SCHEDULE = RetrySchedule(name="fast", gaps=(0, 1, 2, 4, 8), horizon=15)

PROFILES: dict[str, RetrySchedule] = {s.name: s for s in (DEFAULT_SCHEDULE, SHORT_SCHEDULE, FAST_SCHEDULE)}


def schedule_from_config(config: str | Sequence[int] | dict[str, Any] | None) -> RetrySchedule:
    """A profile name, a list of gaps in seconds (horizon = their sum), or a full mapping.

    Strings that look like JSON are parsed first, so the same value works from CDK context and from
    a Lambda environment variable.
    """
    if config is None or config == "":
        return DEFAULT_SCHEDULE
    if isinstance(config, str):
        stripped = config.strip()
        if stripped[:1] in "[{":
            return schedule_from_config(json.loads(stripped))
        if stripped not in PROFILES:
            raise InvalidSchedule(f"unknown schedule profile {stripped!r}; choose one of {sorted(PROFILES)}")
        return PROFILES[stripped]
    if isinstance(config, dict):
        gaps = tuple(config.get("gaps", ()))
        return RetrySchedule(
            name=str(config.get("name", "custom")),
            gaps=gaps,
            repeat_every=config.get("repeat_every"),
            horizon=config.get("horizon", sum(gaps)),
            jitter=float(config.get("jitter", 0.1)),
        )
    gaps = tuple(config)
    for gap in gaps:
        if not isinstance(gap, int) or isinstance(gap, bool) or not math.isfinite(gap):
            raise InvalidSchedule(f"gaps must be whole numbers of seconds: {gap!r}")
    return RetrySchedule(name="custom", gaps=gaps, horizon=sum(gaps))


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date); None if absent or invalid."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())
