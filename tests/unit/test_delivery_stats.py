"""domain/delivery_stats.py: which hour each figure lands in, and the percentiles (nearest rank)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hookrelay.domain import delivery_stats
from hookrelay.domain.classification import Outcome
from hookrelay.domain.models import Attempt, Delivery
from hookrelay.domain.status import DeliveryStatus

NOW = datetime(2030, 1, 1, 12, 30, tzinfo=UTC)


def delivery(status: DeliveryStatus, created: datetime, attempts: list[tuple[datetime, int, Outcome]]) -> Delivery:
    made = [
        Attempt(number=i + 1, started_at=at, latency_ms=ms, outcome=outcome, status_code=200)
        for i, (at, ms, outcome) in enumerate(attempts)
    ]
    ended = attempts[-1][0] + timedelta(seconds=1) if attempts else created
    return Delivery(
        id=f"dlv_{created.timestamp()}_{status}",
        tenant_id="t",
        endpoint_id="ep",
        event_id="evt",
        event_type="order.created",
        status=status,
        message_group_id="g",
        attempts=made,
        attempt_count=len(made),
        created_at=created,
        updated_at=ended,
        completed_at=ended if status.is_terminal else None,
    )


def test_the_window_is_whole_hours_ending_with_the_current_one() -> None:
    since, until = delivery_stats.window(NOW, 24)
    assert until == datetime(2030, 1, 1, 13, tzinfo=UTC)
    assert since == datetime(2029, 12, 31, 13, tzinfo=UTC)


def test_nearest_rank_percentiles() -> None:
    values = list(range(1, 101))
    assert [delivery_stats.percentile(values, p) for p in (50, 95, 99)] == [50, 95, 99]
    assert delivery_stats.percentile([7], 99) == 7
    assert delivery_stats.percentile([3, 1, 2], 50) == 2
    assert delivery_stats.percentile([], 50) is None


def test_each_figure_lands_in_the_hour_it_happened_in() -> None:
    since, until = delivery_stats.window(NOW, 3)  # 10:00, 11:00, 12:00
    ten, eleven, twelve = (since + timedelta(hours=h, minutes=5) for h in range(3))
    deliveries = [
        # Failed at 10, retried and delivered at 11: one failed attempt at 10, delivered at 11.
        delivery(DeliveryStatus.DELIVERED, ten, [(ten, 900, Outcome.RETRY), (eleven, 100, Outcome.DELIVERED)]),
        # Dead at 12 after two failures at 12.
        delivery(DeliveryStatus.DEAD, twelve, [(twelve, 30, Outcome.RETRY), (twelve, 50, Outcome.RETRY)]),
        # Still retrying: its failure counts, it has not ended.
        delivery(DeliveryStatus.RETRYING, twelve, [(twelve, 70, Outcome.RETRY)]),
        # An attempt before the window is left out.
        delivery(DeliveryStatus.DELIVERED, ten, [(since - timedelta(minutes=1), 5, Outcome.DELIVERED)]),
    ]
    stats = delivery_stats.summarize(deliveries, since, until)
    assert [h.start.hour for h in stats.hours] == [10, 11, 12]
    assert [(h.delivered, h.failed_attempts, h.dead, h.attempts) for h in stats.hours] == [
        (0, 1, 0, 1),
        (1, 0, 0, 1),
        (0, 3, 1, 3),
    ]
    assert stats.hours[0].latency_ms == {50: 900, 95: 900, 99: 900}
    assert stats.hours[2].latency_ms == {50: 50, 95: 70, 99: 70}
    assert stats.deliveries_read == 4 and not stats.partial


def test_an_hour_without_attempts_has_no_latency() -> None:
    since, until = delivery_stats.window(NOW, 2)
    stats = delivery_stats.summarize([], since, until)
    assert [h.latency_ms for h in stats.hours] == [{50: None, 95: None, 99: None}] * 2


def test_the_consumer_guide_s_numbers_are_the_code_s() -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "consumer-guide.md").read_text()
    shown = dict(re.findall(r"<!-- stats:([a-z-]+) -->(\d+)<!-- /stats:\1 -->", guide))
    assert shown == {"max-hours": str(delivery_stats.MAX_HOURS), "max-read": str(delivery_stats.MAX_DELIVERIES_READ)}


def test_the_wait_is_creation_to_first_attempt_in_the_hour_the_first_attempt_started() -> None:
    """Only first attempts count (a retry's wait is the schedule's, not the endpoint's backlog), each in the hour it
    started, whenever its delivery was created."""
    since, until = delivery_stats.window(NOW, 2)  # 11:00, 12:00
    eleven, twelve = since + timedelta(minutes=10), since + timedelta(hours=1, minutes=10)
    deliveries = [
        delivery(DeliveryStatus.DELIVERED, eleven, [(eleven + timedelta(milliseconds=40), 5, Outcome.DELIVERED)]),
        # Created at 11, first attempted at 12 (parked, say): its wait is at 12; its retry adds none.
        delivery(
            DeliveryStatus.DELIVERED,
            eleven,
            [(twelve, 5, Outcome.RETRY), (twelve + timedelta(minutes=1), 5, Outcome.DELIVERED)],
        ),
        delivery(DeliveryStatus.QUEUED, twelve, []),  # not attempted yet: no wait to count
    ]
    stats = delivery_stats.summarize(deliveries, since, until)
    assert stats.hours[0].wait_ms == {50: 40, 95: 40, 99: 40}
    assert stats.hours[1].wait_ms == {50: 3_600_000, 95: 3_600_000, 99: 3_600_000}
    assert stats.hours[1].attempts == 2


def test_an_hour_without_first_attempts_has_no_wait() -> None:
    since, until = delivery_stats.window(NOW, 2)
    retried = delivery(
        DeliveryStatus.DELIVERED,
        since - timedelta(hours=3),
        [(since - timedelta(hours=2), 5, Outcome.RETRY), (since, 5, Outcome.DELIVERED)],
    )
    stats = delivery_stats.summarize([retried], since, until)
    assert [h.wait_ms for h in stats.hours] == [{50: None, 95: None, 99: None}] * 2
    assert stats.hours[0].attempts == 1
