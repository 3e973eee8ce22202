"""The seeds' recovery story, end to end over HTTP on the local stack (fast schedule), driven with the client.

A consumer returns 500 for a while; its deliveries die on the schedule. It is fixed, a test delivery
confirms the fix, and a redrive of that window (followed to completion) brings every event back:
verified, and each webhook-id processed exactly once at the consumer after its dedup, even when a
replay overlaps the redrive.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from hookrelay_client import DeliverySummary, HookrelayClient, Redrive
from standardwebhooks import Webhook

from hookrelay.domain.circuit import OPEN_AFTER_FAILURES
from hookrelay.domain.schedule import FAST_SCHEDULE
from tests.e2e.harness import Consumer, LocalStack, eventually

pytestmark = pytest.mark.e2e

EVENTS = 5
# The whole fast schedule (horizon 15 s) plus the local pollers and moto's timers.
SCHEDULE_WAIT = FAST_SCHEDULE.horizon + 30
REDRIVE_WAIT = 60.0


def deliveries_of(client: HookrelayClient, endpoint_id: str, **filters: str) -> list[DeliverySummary]:
    return list(client.iter_deliveries(endpoint_id=endpoint_id, **filters))


def accepted_ids(consumer: Consumer) -> list[str]:
    """The webhook-ids the consumer processed: verified, and the first time it saw them."""
    return [event["webhook_id"] for event in consumer.received()["events"]]


def test_a_failing_consumer_recovers_every_event_by_redrive(
    stack: LocalStack, consumers: Callable[..., Consumer]
) -> None:
    tenant_id, tenant_key = stack.new_tenant("recovery")
    tenant = HookrelayClient(stack.api_url, tenant_key)
    producer = HookrelayClient(stack.api_url, stack.producer_key)
    consumer = consumers("recovering", mode="fail")
    endpoint = tenant.create_endpoint(consumer.url, ["order.*"])
    consumer.control(secret=endpoint.secret)

    # 1. A bad deploy: every attempt answers 500, and every delivery dies on the schedule.
    window_start = datetime.now(UTC) - timedelta(seconds=1)
    published = [producer.publish_event(tenant_id, "order.updated", {"order": n}) for n in range(EVENTS)]
    event_ids = {p.event_id for p in published}
    eventually(
        lambda: len(deliveries_of(tenant, endpoint.id, status="dead")) == EVENTS,
        f"all {EVENTS} deliveries are dead",
        timeout=SCHEDULE_WAIT,
    )
    window_end = datetime.now(UTC)
    dead = deliveries_of(tenant, endpoint.id, status="dead")
    assert {d.event_id for d in dead} == event_ids
    # Each was attempted and answered 500, or was parked by the open circuit before its first attempt (which of the
    # two depends on whether a retry of an earlier event came before it: five failures in a row open the circuit).
    assert {d.last_status_code for d in dead} <= {500, None}
    assert sum(1 for d in dead if d.last_status_code == 500) >= 1
    assert accepted_ids(consumer) == []

    # 2. The fix is deployed, and a test delivery confirms it before replaying in bulk.
    consumer.control(mode="ok")
    probe = tenant.send_test_event(endpoint.id)
    eventually(lambda: probe.event_id in accepted_ids(consumer), "the test delivery is accepted")

    # 3. Redrive the window, followed to completion.
    accepted = tenant.redrive(endpoint.id, window_start, window_end, idempotency_key="recovery-story")
    assert accepted.count is None  # counted in the background: `total` below
    progress: list[Redrive] = []
    final = tenant.follow_redrive(
        accepted.redrive_id, poll_interval=0.2, on_progress=progress.append, timeout=REDRIVE_WAIT
    )
    assert (final.state, final.replayed, final.total) == ("completed", EVENTS, EVENTS)
    assert [r.replayed for r in progress] == sorted(r.replayed for r in progress)  # progress never goes back

    # 4. Every event arrives, and the consumer processes each webhook-id once.
    eventually(lambda: event_ids <= set(accepted_ids(consumer)), "every redriven event is accepted", REDRIVE_WAIT)
    # The consumer answers before the platform records the attempt: read the log once it has caught up.
    replays = eventually(
        lambda: deliveries_of(tenant, endpoint.id, status="delivered"),
        "every redriven delivery is recorded delivered",
        predicate=lambda found: {d.event_id for d in found if d.replay_of is not None} == event_ids,
    )
    redriven = [d for d in replays if d.replay_of is not None]
    assert {d.replay_of for d in redriven} == {d.id for d in dead}
    assert {d.event_id for d in redriven} == event_ids

    # 5. A replay overlapping the redrive re-sends a webhook-id the consumer already has: dedup absorbs it.
    again = tenant.replay_delivery(redriven[0].id)
    eventually(
        lambda: any(r["duplicate"] and r["webhook_id"] == again.event_id for r in consumer.received()["requests"]),
        "the overlapping replay reaches the consumer",
    )

    seen = consumer.received()
    processed = [event["webhook_id"] for event in seen["events"]]
    assert sorted(processed) == sorted(event_ids | {probe.event_id})  # each exactly once
    answered = [r for r in seen["requests"] if r["answered"] == 200]
    for request in answered:  # verified here too, from the bytes and headers as they arrived
        envelope = Webhook(endpoint.secret).verify(request["body"], request["signature_headers"])
        assert envelope["id"] == request["webhook_id"]
    assert {r["webhook_id"] for r in answered} == event_ids | {probe.event_id}
    failed = [r for r in seen["requests"] if r["answered"] == 500]
    # The circuit opened after OPEN_AFTER_FAILURES failures in a row: from then on one probe at a time, not every
    # delivery on its own schedule, and no delivery was attempted more often than the schedule allows.
    assert OPEN_AFTER_FAILURES <= len(failed) < EVENTS * FAST_SCHEDULE.max_attempts
    per_event = [sum(1 for r in failed if r["webhook_id"] == event_id) for event_id in event_ids]
    assert max(per_event) <= FAST_SCHEDULE.max_attempts
