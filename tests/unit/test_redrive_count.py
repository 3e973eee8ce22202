"""A redrive's count stops at REDRIVE_COUNT_LIMIT log entries; the consumer guide says where."""

from __future__ import annotations

from pathlib import Path

from hookrelay.domain.paging import BoundedCount
from hookrelay.domain.redrive import REDRIVE_COUNT_LIMIT

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "consumer-guide.md"


def test_the_consumer_guide_states_the_limit_the_code_counts_to() -> None:
    assert f"more than {REDRIVE_COUNT_LIMIT:,} log entries" in " ".join(GUIDE.read_text().split())


def test_a_bounded_count_tells_exactly_from_at_least_by_the_one_more_it_read() -> None:
    assert BoundedCount.of(10, 10) == BoundedCount(10, exact=True)
    assert BoundedCount.of(11, 10) == BoundedCount(10, exact=False)
    assert BoundedCount.of(3, 10) == BoundedCount(3, exact=True)
