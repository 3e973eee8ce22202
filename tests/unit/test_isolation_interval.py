"""The isolation benchmark's bootstrap interval of its p99 ratio (bench/isolation.py, `ratio_interval`)."""

from __future__ import annotations

from bench.isolation import P99_RATIO_BAR, ratio_interval


def latencies(slowest: float) -> list[float]:
    """500 events: most between 15 and 25 ms, the slowest ten rising to `slowest`."""
    body = [0.015 + 0.01 * (n % 97) / 97 for n in range(490)]
    return body + [0.030 + (slowest - 0.030) * n / 9 for n in range(10)]


def test_arms_alike_give_an_interval_around_one() -> None:
    low, high, within = ratio_interval(latencies(0.080), latencies(0.080))
    assert low < 1 < high
    assert 0.5 < within < 1


def test_an_arm_twice_as_slow_is_past_the_bar_in_every_resample() -> None:
    low, high, within = ratio_interval([2 * s for s in latencies(0.035)], latencies(0.035))
    assert low > P99_RATIO_BAR and within == 0
    assert high >= low
