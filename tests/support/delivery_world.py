"""The delivery service on the in-memory fakes, with one delivery ready to attempt: the unit tests' world."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from hookrelay.adapters import schema
from hookrelay.domain.classification import FailureKind
from hookrelay.domain.clock import RETENTION_DAYS, epoch_seconds
from hookrelay.domain.models import Delivery, Endpoint, Event, SigningSecret
from hookrelay.domain.schedule import RetrySchedule
from hookrelay.domain.signing import generate_secret
from hookrelay.services.delivery import DeliveryService
from hookrelay.services.parking import Parking
from hookrelay.services.ports import DeliveryMessage, SendResult
from tests.support.fakes import (
    FakeCircuits,
    FakeClock,
    FakeDeliveries,
    FakeEndpoints,
    FakeEvents,
    FakeParkingLot,
    RecordingDeadLetters,
    RecordingTelemetry,
    RecordingWorkflow,
    ScriptedSender,
)

SCHEDULE = RetrySchedule(name="test", gaps=(0, 10, 20, 40), horizon=70, retry_after_cap=30)
OK = SendResult(200, 5)
ERROR_500 = SendResult(500, 5)
NOT_FOUND = SendResult(404, 5)
TIMEOUT = SendResult(None, 2000, FailureKind.TIMEOUT, "ReadTimeout")


@dataclass
class World:
    clock: FakeClock
    deliveries: FakeDeliveries
    endpoints: FakeEndpoints
    events: FakeEvents
    sender: ScriptedSender
    workflow: RecordingWorkflow
    dead_letters: RecordingDeadLetters
    telemetry: RecordingTelemetry
    service: DeliveryService
    delivery: Delivery
    event: Event

    def script(self, *results: SendResult) -> None:
        self.sender.results.extend(results)

    def message(self, attempt: int, token: str | None = None) -> DeliveryMessage:
        return DeliveryMessage(self.delivery.id, self.delivery.tenant_id, attempt, "grp", f"dedup-{attempt}", token)

    def current(self) -> Delivery:
        return self.deliveries.items[self.delivery.id]


def make_world() -> World:
    """One queued delivery of one event to one enabled endpoint, on the fakes, with the service over them."""
    clock = FakeClock()
    now = clock.now
    endpoint = Endpoint(
        id="ep_1",
        tenant_id="tn_1",
        url="https://consumer.example/hook",
        event_types=["*"],
        secrets=[SigningSecret(secret=generate_secret(), created_at=now)],
        created_at=now,
        updated_at=now,
    )
    event = Event(
        id="evt_1",
        tenant_id="tn_1",
        type="order.updated",
        timestamp=now,
        body='{"id":"evt_1","type":"order.updated","data":{"id":1}}',
        expires_at=epoch_seconds(now + timedelta(seconds=SCHEDULE.horizon, days=RETENTION_DAYS)),
    )
    delivery = Delivery(
        id="dlv_1",
        tenant_id="tn_1",
        endpoint_id="ep_1",
        event_id="evt_1",
        event_type="order.updated",
        message_group_id="grp",
        created_at=now,
        updated_at=now,
    )
    deliveries, events = FakeDeliveries(), FakeEvents(event)
    deliveries.put_many([delivery])
    endpoints, sender = FakeEndpoints(endpoint), ScriptedSender(clock)
    workflow, dead_letters, telemetry = RecordingWorkflow(), RecordingDeadLetters(), RecordingTelemetry()
    service = DeliveryService(
        deliveries,
        endpoints,
        events,
        sender,
        workflow,
        dead_letters,
        SCHEDULE,
        telemetry,
        FakeCircuits(endpoints),
        Parking(FakeParkingLot(deliveries), FakeCircuits(endpoints), endpoints),
        claim_timeout=timedelta(seconds=schema.DELIVERY_CLAIM_TIMEOUT_SECONDS),
        clock=clock,
        sleep=clock.sleep,
    )
    return World(
        clock, deliveries, endpoints, events, sender, workflow, dead_letters, telemetry, service, delivery, event
    )


def retry(world: World, attempt: int) -> None:
    """What the workflow does: wait until next_attempt_at, then send the attempt with a task token."""
    world.clock.now = max(world.clock.now, world.current().next_attempt_at)
    world.service.attempt(world.message(attempt, token=f"token-{attempt}"))
