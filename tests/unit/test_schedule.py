"""The schedule arithmetic: planned attempts, bounded jitter, an exact horizon, and validated configuration."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest

from hookrelay.domain.schedule import (
    DEFAULT_SCHEDULE,
    MAX_ATTEMPTS,
    MAX_HORIZON_SECONDS,
    SHORT_SCHEDULE,
    InvalidSchedule,
    RetrySchedule,
    schedule_from_config,
)

FIRST = datetime(2025, 3, 7, 18, 0, tzinfo=UTC)  # a Friday evening
HOUR = 3600


def offsets(schedule: RetrySchedule) -> list[int]:
    return [planned.offset for planned in schedule.planned()]


def test_default_profile_is_the_published_table_within_72_hours() -> None:
    assert [p.gap for p in DEFAULT_SCHEDULE.planned()][:6] == [0, 30, 300, 1800, 2 * HOUR, 6 * HOUR]
    assert all(p.gap == 12 * HOUR for p in list(DEFAULT_SCHEDULE.planned())[6:])
    assert DEFAULT_SCHEDULE.horizon == 72 * HOUR
    # 0, 30 s, 5.5 min, 35.5 min, 2.6 h, 8.6 h, then every 12 h while within 72 h: 20.6, 32.6, 44.6, 56.6, 68.6 h.
    assert DEFAULT_SCHEDULE.max_attempts == 11
    assert offsets(DEFAULT_SCHEDULE)[-1] <= 72 * HOUR < offsets(DEFAULT_SCHEDULE)[-1] + 12 * HOUR


def test_short_profile_is_six_attempts_over_about_15_hours() -> None:
    assert [p.gap for p in SHORT_SCHEDULE.planned()] == [0, 60, 300, 1800, 2 * HOUR, 12 * HOUR]
    assert SHORT_SCHEDULE.max_attempts == 6
    assert offsets(SHORT_SCHEDULE)[-1] == SHORT_SCHEDULE.horizon == 14 * HOUR + 36 * 60


@pytest.mark.parametrize("schedule", [DEFAULT_SCHEDULE, SHORT_SCHEDULE], ids=lambda s: s.name)
def test_every_attempt_is_within_ten_percent_of_its_gap_and_never_past_the_horizon(schedule: RetrySchedule) -> None:
    rng = random.Random(7)
    horizon_end = FIRST + timedelta(seconds=schedule.horizon)
    for planned in list(schedule.planned())[1:]:
        previous_end = FIRST + timedelta(seconds=planned.offset - planned.gap)  # the attempt before, on time
        for _ in range(200):
            at = schedule.next_attempt_at(
                first_attempt_at=FIRST, attempts_made=planned.number - 1, now=previous_end, rng=rng
            )
            assert at is not None
            deviation = (at - FIRST).total_seconds() - planned.offset
            assert abs(deviation) <= planned.gap * schedule.jitter + 1e-6
            assert at <= horizon_end


def test_jitter_actually_spreads_attempts() -> None:
    rng = random.Random(1)
    times = {
        DEFAULT_SCHEDULE.next_attempt_at(first_attempt_at=FIRST, attempts_made=3, now=FIRST, rng=rng) for _ in range(50)
    }
    assert len(times) > 40


def test_the_schedule_is_exhausted_after_the_last_planned_attempt_and_at_the_horizon() -> None:
    last = DEFAULT_SCHEDULE.max_attempts
    assert DEFAULT_SCHEDULE.next_attempt_at(first_attempt_at=FIRST, attempts_made=last, now=FIRST) is None
    past_horizon = FIRST + timedelta(hours=72)
    assert DEFAULT_SCHEDULE.next_attempt_at(first_attempt_at=FIRST, attempts_made=2, now=past_horizon) is None


def test_jitter_is_clamped_at_the_horizon_exactly() -> None:
    schedule = RetrySchedule(name="t", gaps=(0, 100), horizon=100, jitter=0.4)
    rng = random.Random(3)
    latest = max(
        schedule.next_attempt_at(first_attempt_at=FIRST, attempts_made=1, now=FIRST, rng=rng) for _ in range(100)
    )
    assert latest == FIRST + timedelta(seconds=100)


def test_retry_after_pushes_the_next_attempt_later_never_earlier() -> None:
    started, now = FIRST, FIRST + timedelta(seconds=1)  # attempt 1 took a second to fail
    no_jitter = RetrySchedule(name="t", gaps=(0, 30, 300), horizon=3600, jitter=0)

    def next_at(retry_after: float | None) -> datetime | None:
        return no_jitter.next_attempt_at(
            first_attempt_at=FIRST, attempts_made=1, now=now, attempt_started=started, retry_after=retry_after
        )

    assert next_at(None) == FIRST + timedelta(seconds=30)
    assert next_at(120) == now + timedelta(seconds=120)
    assert next_at(5) == next_at(None)


def test_retry_after_is_capped_at_the_longest_gap_unless_configured() -> None:
    now = FIRST + timedelta(seconds=1)
    at = DEFAULT_SCHEDULE.next_attempt_at(first_attempt_at=FIRST, attempts_made=1, now=now, retry_after=10**9)
    assert DEFAULT_SCHEDULE.effective_retry_after_cap == 12 * HOUR
    assert at == now + timedelta(hours=12)
    capped = RetrySchedule(name="t", gaps=(0, 30), repeat_every=3600, horizon=86400, retry_after_cap=600)
    assert capped.next_attempt_at(
        first_attempt_at=FIRST, attempts_made=1, now=now, retry_after=10**9
    ) == now + timedelta(seconds=600)


def test_a_retry_after_beyond_the_horizon_ends_the_schedule_rather_than_arriving_early() -> None:
    schedule = RetrySchedule(name="t", gaps=(0, 10, 20), horizon=30, retry_after_cap=60, jitter=0)
    started, now = FIRST + timedelta(seconds=10), FIRST + timedelta(seconds=11)  # attempt 2, on time
    for retry_after, expected in ((25, None), (5, FIRST + timedelta(seconds=30))):
        at = schedule.next_attempt_at(
            first_attempt_at=FIRST, attempts_made=2, now=now, attempt_started=started, retry_after=retry_after
        )
        assert at == expected


def test_behind_the_plan_the_next_attempt_keeps_its_own_gap_less_jitter() -> None:
    # Attempt 2 was pushed to +10 min by a Retry-After; attempt 3 was planned at +5.5 min, 5 min after attempt 2.
    started = FIRST + timedelta(minutes=10)
    at = DEFAULT_SCHEDULE.next_attempt_at(
        first_attempt_at=FIRST, attempts_made=2, now=started + timedelta(seconds=2), attempt_started=started
    )
    assert at == started + timedelta(seconds=300 * 0.9)  # attempt 3's gap, 5 min, less its 10% jitter


def test_after_a_long_retry_after_the_next_attempts_keep_the_published_gaps() -> None:
    """A 12 h Retry-After on attempt 2 must not bunch attempts 3 to 6 together: each keeps its gap."""
    rng = random.Random(11)
    started, made = FIRST, []
    retry_after = 12 * HOUR
    for attempts_made in range(1, DEFAULT_SCHEDULE.max_attempts):
        at = DEFAULT_SCHEDULE.next_attempt_at(
            first_attempt_at=FIRST,
            attempts_made=attempts_made,
            now=started + timedelta(seconds=1),
            attempt_started=started,
            retry_after=retry_after if attempts_made == 2 else None,
            rng=rng,
        )
        if at is None:
            break
        made.append(at)
        started = at
    gaps = [(later - earlier).total_seconds() for earlier, later in pairwise(made)]
    planned = [p.gap for p in DEFAULT_SCHEDULE.planned()]
    # made[0] is attempt 2, so gaps[i] is the gap before attempt i + 3.
    for number, gap in enumerate(gaps, start=3):
        assert gap >= planned[number - 1] * (1 - DEFAULT_SCHEDULE.jitter), (number, gap)
    assert made[1] - made[0] >= timedelta(hours=12)  # the Retry-After itself
    assert all(at <= FIRST + timedelta(seconds=DEFAULT_SCHEDULE.horizon) for at in made)


def test_a_floor_beyond_the_horizon_ends_the_schedule() -> None:
    schedule = RetrySchedule(name="t", gaps=(0, 10, 100), horizon=110, jitter=0)
    started = FIRST + timedelta(seconds=50)  # attempt 2, pushed late: attempt 3 would need 100 s after it
    at = schedule.next_attempt_at(first_attempt_at=FIRST, attempts_made=2, now=started, attempt_started=started)
    assert at is None


def test_a_slow_failure_does_not_eat_into_the_jitter_of_the_next_attempt() -> None:
    rng = random.Random(5)
    earliest = min(
        DEFAULT_SCHEDULE.next_attempt_at(
            first_attempt_at=FIRST, attempts_made=1, now=FIRST + timedelta(seconds=8), attempt_started=FIRST, rng=rng
        )
        for _ in range(200)
    )
    assert earliest < FIRST + timedelta(seconds=28)  # the plan says 27 to 33 s, though the attempt took 8 s to time out


def test_profiles_and_custom_configuration() -> None:
    assert schedule_from_config(None) is DEFAULT_SCHEDULE
    assert schedule_from_config("short") is SHORT_SCHEDULE
    assert schedule_from_config(json.dumps(DEFAULT_SCHEDULE.to_config())) == DEFAULT_SCHEDULE
    custom = schedule_from_config("[0, 10, 20]")
    assert (custom.gaps, custom.horizon, custom.max_attempts) == ((0, 10, 20), 30, 3)
    mapping = schedule_from_config({"gaps": [0, 1.0, 1], "horizon": 10, "retry_after_cap": 5})
    assert (mapping.gaps, mapping.horizon, mapping.effective_retry_after_cap) == ((0, 1, 1), 10, 5)


@pytest.mark.parametrize(
    "config",
    [
        "[10, 20]",  # first attempt not immediate
        "[]",
        "[0, -5]",
        "[0, 0]",
        "[0, 1.5]",
        '[0, "30"]',
        "[0, true]",
        '{"gaps": [0, 1e400]}',  # infinite
        json.dumps([0, MAX_HORIZON_SECONDS + 1]),  # horizon over 30 days
        '{"gaps": [0, 60], "horizon": 30}',  # gaps beyond the horizon
        '{"gaps": [0, 60], "repeat_every": 0, "horizon": 600}',
        '{"gaps": [0, 60], "jitter": 0.9}',
        '{"gap": [0, 60]}',  # a typo is refused, not ignored
        "hourly",  # unknown profile
        "[0, 60",  # not JSON
        '{"gaps": [0, 60], "repeat_every": 600, "horizon": 2592000}',  # 4,320 attempts
        json.dumps([0] + [1] * MAX_ATTEMPTS),  # one attempt over the cap, listed
    ],
)
def test_invalid_schedules_are_refused(config: str) -> None:
    with pytest.raises(InvalidSchedule):
        schedule_from_config(config)


def test_the_attempt_cap_says_why_and_allows_exactly_the_cap() -> None:
    at_cap = {"gaps": [0, 60], "repeat_every": 600, "horizon": 60 + 600 * (MAX_ATTEMPTS - 2)}
    assert schedule_from_config(at_cap).max_attempts == MAX_ATTEMPTS == 50
    over = {**at_cap, "horizon": at_cap["horizon"] + 600}
    with pytest.raises(InvalidSchedule, match=f"{MAX_ATTEMPTS + 1} attempts.*at most {MAX_ATTEMPTS}"):
        schedule_from_config(over)
