"""The retry schedule: deployment configuration, published as a table, enforced here.

Attempt times are anchored to the first attempt (attempt n is planned at the sum of the first n gaps),
so jitter never accumulates and the horizon is exact: no attempt is ever made later than `horizon`
seconds after the first one.
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
DEFAULT_JITTER = 0.1
# Every attempt is kept on the delivery record (a 1 KiB excerpt each, within DynamoDB's 400 KB item) and
# is a few events in the retry execution's history (Step Functions stops at 25,000): well within both.
MAX_ATTEMPTS = 50
_CONFIG_KEYS = frozenset({"name", "gaps", "repeat_every", "horizon", "jitter", "retry_after_cap"})


class InvalidSchedule(ValueError):
    pass


def _whole_seconds(value: Any, what: str, *, minimum: int) -> int:
    """A whole number of seconds ≥ minimum: ints, or floats with no fraction (JSON may give 30.0)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidSchedule(f"{what} must be a whole number of seconds, got {value!r}")
    if not math.isfinite(value) or value != int(value) or value < minimum:
        raise InvalidSchedule(f"{what} must be a finite whole number of seconds ≥ {minimum}, got {value!r}")
    return int(value)


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
    jitter: float = DEFAULT_JITTER  # each attempt moves by up to ±jitter times its gap
    # The longest a consumer's Retry-After may push an attempt back; None: the schedule's longest gap.
    retry_after_cap: int | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if not self.gaps or self.gaps[0] != 0:
            raise InvalidSchedule("the first attempt must be immediate: gaps must start with 0")
        for gap in self.gaps[1:]:
            _whole_seconds(gap, "every gap after the first", minimum=1)
        if self.repeat_every is not None:
            _whole_seconds(self.repeat_every, "repeat_every", minimum=1)
        _whole_seconds(self.horizon, "the horizon", minimum=1)
        if self.horizon > MAX_HORIZON_SECONDS:
            raise InvalidSchedule(f"the horizon must be at most 30 days ({MAX_HORIZON_SECONDS} s), got {self.horizon}")
        if sum(self.gaps) > self.horizon:
            raise InvalidSchedule("the listed gaps add up to more than the horizon")
        if self._attempt_count() > MAX_ATTEMPTS:
            raise InvalidSchedule(
                f"the schedule plans {self._attempt_count()} attempts; a delivery may have at most {MAX_ATTEMPTS}"
                " (use longer gaps, a longer repeat_every or a shorter horizon)"
            )
        if isinstance(self.jitter, bool) or not isinstance(self.jitter, int | float) or not 0 <= self.jitter < 0.5:
            raise InvalidSchedule(f"jitter must be a fraction in [0, 0.5), got {self.jitter!r}")
        if self.retry_after_cap is not None:
            _whole_seconds(self.retry_after_cap, "retry_after_cap", minimum=1)

    def _attempt_count(self) -> int:
        """`max_attempts` by arithmetic, so that validation never walks a huge schedule to refuse it."""
        repeats = 0 if self.repeat_every is None else (self.horizon - sum(self.gaps)) // self.repeat_every
        return len(self.gaps) + repeats

    @property
    def retry_gaps(self) -> tuple[int, ...]:
        return self.gaps[1:] + ((self.repeat_every,) if self.repeat_every is not None else ())

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
        return max(self.retry_gaps, default=0)

    @property
    def effective_retry_after_cap(self) -> int:
        """A consumer's Retry-After is honoured up to this many seconds."""
        return self.retry_after_cap if self.retry_after_cap is not None else self.longest_gap

    def attempt(self, number: int) -> PlannedAttempt | None:
        for planned in self.planned():
            if planned.number == number:
                return planned
            if planned.number > number:
                break
        return None

    def next_attempt_at(
        self,
        *,
        first_attempt_at: datetime,
        attempts_made: int,
        now: datetime,
        attempt_started: datetime | None = None,
        retry_after: float | None = None,
        rng: random.Random | None = None,
    ) -> datetime | None:
        """When attempt `attempts_made + 1` should be made, or None when the schedule is exhausted.

        `now` is when the attempt that just failed ended, `attempt_started` when it began (default: now).
        The planned time (anchored to the first attempt, ±jitter, never past the horizon) is pushed later,
        never earlier, by two floors: the next attempt's own gap, less its jitter, after the failed attempt
        began (an earlier Retry-After may have put us behind the plan, and the published gaps still hold
        then) and the consumer's Retry-After from now, up to the cap. If a floor lands beyond the horizon,
        no attempt can honour it, and the schedule is exhausted.
        """
        planned = self.attempt(attempts_made + 1)
        horizon_end = first_attempt_at + timedelta(seconds=self.horizon)
        if planned is None or now >= horizon_end:
            return None
        spread = planned.gap * self.jitter
        jittered = first_attempt_at + timedelta(seconds=planned.offset + (rng or random).uniform(-spread, spread))
        at = min(jittered, horizon_end)
        at = max(at, (attempt_started or now) + timedelta(seconds=planned.gap * (1 - self.jitter)))
        if retry_after is not None:
            at = max(at, now + timedelta(seconds=min(retry_after, self.effective_retry_after_cap)))
        return at if at <= horizon_end else None

    def to_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "name": self.name,
            "gaps": list(self.gaps),
            "repeat_every": self.repeat_every,
            "horizon": self.horizon,
            "jitter": self.jitter,
        }
        if self.retry_after_cap is not None:
            config["retry_after_cap"] = self.retry_after_cap
        return config


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
    a Lambda environment variable. Anything invalid raises InvalidSchedule, at synth time as well.
    """
    if config is None or config == "":
        return DEFAULT_SCHEDULE
    if isinstance(config, str):
        stripped = config.strip()
        if stripped[:1] in "[{":
            try:
                parsed = json.loads(stripped)
            except ValueError as error:
                raise InvalidSchedule(f"the schedule is not valid JSON: {error}") from error
            return schedule_from_config(parsed)
        if stripped not in PROFILES:
            raise InvalidSchedule(f"unknown schedule profile {stripped!r}; choose one of {sorted(PROFILES)}")
        return PROFILES[stripped]
    if isinstance(config, dict):
        unknown = set(config) - _CONFIG_KEYS
        if unknown:
            raise InvalidSchedule(f"unknown schedule settings {sorted(unknown)}; known: {sorted(_CONFIG_KEYS)}")
        gaps = _gaps(config.get("gaps"))
        return RetrySchedule(
            name=str(config.get("name", "custom")),
            gaps=gaps,
            repeat_every=None
            if config.get("repeat_every") is None
            else _whole_seconds(config["repeat_every"], "repeat_every", minimum=1),
            horizon=_whole_seconds(config.get("horizon", sum(gaps)), "the horizon", minimum=1),
            jitter=config.get("jitter", DEFAULT_JITTER),
            retry_after_cap=None
            if config.get("retry_after_cap") is None
            else _whole_seconds(config["retry_after_cap"], "retry_after_cap", minimum=1),
        )
    gaps = _gaps(config)
    return RetrySchedule(name="custom", gaps=gaps, horizon=sum(gaps))


def _gaps(value: Any) -> tuple[int, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or not value:
        raise InvalidSchedule(f"gaps must be a non-empty list of seconds, got {value!r}")
    return tuple(_whole_seconds(gap, "every gap", minimum=0) for gap in value)


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date); None if absent or invalid."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)  # raises ValueError on an invalid date (Python 3.10+)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())
