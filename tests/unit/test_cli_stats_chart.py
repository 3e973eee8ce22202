"""`deliveries stats`: the text chart's bars (stacked, scaled to the busiest hour) and the partial note."""

from __future__ import annotations

from datetime import UTC, datetime

from hookrelay_client.cli import CHART_WIDTH, describe_stats, stats_bar
from hookrelay_client.models import EndpointStats


def test_bars_stack_the_outcomes_scaled_to_the_busiest_hour() -> None:
    assert stats_bar([10, 0, 0], 10) == "#" * CHART_WIDTH
    assert stats_bar([5, 3, 2], 20) == "#" * 8 + "x" * 4 + "!" * 3
    assert stats_bar([0, 0, 1], 1000) == "!"  # a rare death still shows
    assert stats_bar([0, 0, 0], 0) == ""


def test_a_partial_answer_says_so() -> None:
    at = datetime(2030, 1, 1, tzinfo=UTC)
    stats = EndpointStats(
        endpoint_id="ep_1", since=at, until=at, deliveries_read=1000, max_deliveries_read=1000, partial=True, hours=[]
    )
    assert "partial: the window holds more than 1000" in describe_stats(stats).splitlines()[0]
