"""Endpoint health summarised from a sample of deliveries: pure, so every figure is checked against a known mix."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hookrelay.domain.classification import FailureKind, Outcome
from hookrelay.domain.health import summarize
from hookrelay.domain.models import Attempt, Delivery
from hookrelay.domain.status import DeliveryStatus

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def attempt(
    number: int, minutes_ago: float, outcome: Outcome, status_code: int | None = None, **extra: object
) -> Attempt:
    return Attempt(
        number=number,
        started_at=NOW - timedelta(minutes=minutes_ago),
        latency_ms=10,
        status_code=status_code,
        outcome=outcome,
        **extra,
    )


def delivery(name: str, minutes_ago: float, status: DeliveryStatus, *attempts: Attempt, **extra: object) -> Delivery:
    created = NOW - timedelta(minutes=minutes_ago)
    return Delivery(
        id=f"dlv_{name}",
        tenant_id="ten_1",
        endpoint_id="ep_1",
        event_id=f"evt_{name}",
        event_type="order.updated",
        status=status,
        message_group_id="ep_1#0",
        attempts=list(attempts),
        attempt_count=len(attempts),
        created_at=created,
        updated_at=created,
        **extra,
    )


def test_an_empty_sample_has_no_rates_and_no_failures() -> None:
    health = summarize([], NOW, older_not_sampled=False)
    assert health.sampled == 0 and set(health.counts.values()) == {0} and len(health.counts) == len(DeliveryStatus)
    assert health.success_rate is None and health.last_delivered_at is None
    assert health.last_failure is None and health.consecutive_failures == 0 and health.oldest_retrying is None


def test_a_mix_of_outcomes() -> None:
    timeout = attempt(1, 9, Outcome.RETRY, error=FailureKind.TIMEOUT)
    deliveries = [
        # newest first, as the index returns them
        delivery("e", 1, DeliveryStatus.RETRYING, attempt(1, 1, Outcome.RETRY, 503)),
        delivery("d", 2, DeliveryStatus.DELIVERED, attempt(1, 2, Outcome.DELIVERED, 200), completed_at=NOW),
        delivery("c", 3, DeliveryStatus.CANCELLED),
        delivery(
            "b",
            10,
            DeliveryStatus.RETRYING,
            timeout,
            attempt(2, 0.5, Outcome.RETRY, 500),  # its retry is the newest attempt of all
            next_attempt_at=NOW + timedelta(minutes=5),
        ),
        delivery("a", 20, DeliveryStatus.DEAD, attempt(1, 20, Outcome.RETRY_LIMITED, 404)),
        delivery(
            "z",
            30,
            DeliveryStatus.DELIVERED,
            attempt(1, 30, Outcome.DELIVERED, 204),
            completed_at=NOW - timedelta(minutes=30),
        ),
    ]
    health = summarize(deliveries, NOW, older_not_sampled=True)

    assert health.sampled == 6 and health.older_not_sampled
    assert health.counts[DeliveryStatus.DELIVERED] == 2 and health.counts[DeliveryStatus.RETRYING] == 2
    assert health.counts[DeliveryStatus.DEAD] == 1 and health.counts[DeliveryStatus.CANCELLED] == 1
    assert health.success_rate == round(2 / 3, 4)  # the cancelled delivery was never sent
    assert health.last_delivered_at == NOW
    assert health.last_failure is not None
    assert (health.last_failure.delivery_id, health.last_failure.attempt.status_code) == ("dlv_b", 500)
    assert health.consecutive_failures == 2  # b's 500 and e's 503, back to d's 200
    assert health.oldest_retrying is not None
    assert (health.oldest_retrying.delivery_id, health.oldest_retrying.age_seconds) == ("dlv_b", 600)
    assert health.oldest_retrying.next_attempt_at == NOW + timedelta(minutes=5)


def test_without_any_success_every_attempt_counts_as_consecutive() -> None:
    deliveries = [
        delivery("b", 1, DeliveryStatus.RETRYING, attempt(1, 1, Outcome.RETRY, 502)),
        delivery(
            "a",
            5,
            DeliveryStatus.DEAD,
            attempt(1, 5, Outcome.RETRY_LIMITED, 410),
            attempt(2, 4, Outcome.RETRY_LIMITED, 410),
            attempt(3, 3, Outcome.RETRY_LIMITED, 410),
        ),
    ]
    health = summarize(deliveries, NOW, older_not_sampled=False)
    assert health.consecutive_failures == 4 and health.success_rate == 0.0
    assert health.last_failure is not None and health.last_failure.attempt.status_code == 502
