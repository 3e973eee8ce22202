"""bench/cost_before_after.py reads the cost benchmark's summary lines: the two stay in step."""

from __future__ import annotations

from bench.cost import TARGETS, cost_summary, units_summary
from bench.cost_before_after import SUMMARY, UNITS


def test_it_reads_every_scenario_s_cost_and_the_write_units_as_the_cost_benchmark_prints_them() -> None:
    for scenario in TARGETS:
        match = SUMMARY.match(cost_summary(scenario, 1234.567))
        assert match is not None and (match.group(1), match.group(2)) == (scenario, "1,234.57")
    match = UNITS.match(units_summary(4.0))
    assert match is not None and float(match.group(1)) == 4.0
