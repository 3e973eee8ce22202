"""The seeds' night at full size (bench/simulation.py, issue 29): the real circuit rules, schedule and rate limit on a
simulated clock meet the issue's targets."""

from __future__ import annotations

from bench.simulation import NIGHT_EVENTS, NIGHT_LIMIT, night


def test_the_full_size_night_meets_its_targets() -> None:
    figures = night()
    assert figures.executions <= 10 and figures.attempts <= 100
    assert figures.delivered == NIGHT_EVENTS and figures.order_violations == 0
    assert abs(figures.drain_seconds / (NIGHT_EVENTS / NIGHT_LIMIT) - 1) <= 0.05
    assert figures.busiest_second <= NIGHT_LIMIT
    assert figures.healthy_extra_delay == 0
