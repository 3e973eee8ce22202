"""Operational webhooks on the in-memory fakes: who receives a platform event, that emitting again converges on one
event and one delivery each, the catalogue as the one definition of the types and their fields (and the consumer
guide's table of them), and the emits at the sweeper's notices, at recovery and at a crash between the two writes."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hookrelay.domain import platform_events
from hookrelay.domain.circuit import CircuitState
from hookrelay.domain.models import Endpoint, EndpointState, Event, FailureNotice, SigningSecret
from hookrelay.domain.platform_events import (
    CATALOGUE,
    PlatformEventType,
    PlatformNotice,
    catalogue_table,
    is_reserved,
    notice,
    subscribes,
)
from hookrelay.domain.schedule import RetrySchedule
from hookrelay.domain.signing import generate_secret
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.auto_disable import AutoDisableSweeper
from hookrelay.services.circuit import CircuitService
from hookrelay.services.endpoints import EndpointService
from hookrelay.services.ingest import IngestService
from hookrelay.services.operational_events import OperationalEvents
from hookrelay.services.parking import Parking
from hookrelay.services.ports import (
    PLATFORM_EVENT_ERRORS,
    AttemptReport,
    CircuitCommand,
    CircuitCommandKind,
    DeliveryMessage,
    EndpointNoticeMessage,
)
from hookrelay.services.reconcile import RECONCILE_GRACE
from tests.support.delivery_world import OK, World, make_world
from tests.support.fakes import (
    ConditionalEndpoints,
    FakeCircuits,
    FakeDeliveries,
    FakeEvents,
    FakeParkingLot,
    KnownTenants,
    NoDeliveries,
    RecordingDeadLetters,
    RecordingQueue,
    RecordingTelemetry,
    RecordingWorkflow,
    nothing_parked,
)

ROOT = Path(__file__).resolve().parents[2]
SCHEDULE = RetrySchedule(name="test", gaps=(0, 10, 20, 40), horizon=70, retry_after_cap=30)
SINCE = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
DAY, HOUR = timedelta(days=1), timedelta(hours=1)
FAILING = PlatformEventType.ENDPOINT_FAILING


def endpoint(endpoint_id: str, event_types: list[str], **fields: Any) -> Endpoint:
    now = datetime(2025, 3, 1, tzinfo=UTC)
    values: dict[str, Any] = {
        "id": endpoint_id,
        "tenant_id": "tn_1",
        "url": f"https://consumer.example/{endpoint_id}",
        "event_types": event_types,
        "secrets": [SigningSecret(secret=generate_secret(), created_at=now)],
        "created_at": now,
        "updated_at": now,
    }
    return Endpoint(**(values | fields))


@dataclass
class Pipeline:
    endpoints: ConditionalEndpoints
    events: FakeEvents = field(default_factory=FakeEvents)
    deliveries: FakeDeliveries = field(default_factory=FakeDeliveries)
    queue: RecordingQueue = field(default_factory=RecordingQueue)

    @property
    def emitter(self) -> OperationalEvents:
        ingest = IngestService(
            KnownTenants("tn_1", created_at=SINCE),
            self.endpoints,
            self.events,
            self.deliveries,
            self.queue,
            SCHEDULE,
            writer_window=RECONCILE_GRACE,
        )
        return OperationalEvents(ingest)

    def of_type(self, kind: PlatformEventType) -> list[Event]:
        return [e for e in self.events.items.values() if e.type == kind.value]

    def recipients(self, event: Event) -> list[str]:
        return sorted(d.endpoint_id for d in self.deliveries.items.values() if d.event_id == event.id)


def pipeline(*endpoints: Endpoint) -> Pipeline:
    return Pipeline(ConditionalEndpoints(*endpoints))


def failing_notice(about: str = "ep_down", key: str = "ep_down:2025-03-01T12:00:00.000Z:failing_1d") -> PlatformNotice:
    return notice(
        "tn_1",
        FAILING,
        about=about,
        key=key,
        endpoint_id=about,
        url="https://consumer.example/down",
        reason="failing",
        failing_since="2025-03-01T12:00:00.000Z",
        failing_for_seconds=86400,
        notice_id=key,
        last_failure=None,
        notice="failing_1d",
        disable_at="2025-03-06T12:00:00.000Z",
    )


# --- who receives a platform event ---


@pytest.mark.parametrize(
    ("filters", "receives"),
    [
        (["hookrelay.*"], True),
        (["hookrelay.endpoint.*"], True),
        (["hookrelay.endpoint.failing"], True),
        (["order.*", "hookrelay.endpoint.failing"], True),
        (["*"], False),  # a catch-all never asked for platform events
        (["*.failing"], False),
        (["hookrelay.redrive.*"], False),
        (["hookrelay.endpoint.recovered"], False),
    ],
)
def test_an_endpoint_receives_platform_events_only_through_a_filter_that_names_them(
    filters: list[str], receives: bool
) -> None:
    assert subscribes(filters, FAILING) is receives


def test_the_event_goes_to_the_subscribed_endpoints_never_to_the_one_it_is_about() -> None:
    world = pipeline(
        endpoint("ep_down", ["hookrelay.*", "*"]),  # subscribed, but the notice is about it
        endpoint("ep_ops", ["hookrelay.endpoint.*"]),
        endpoint("ep_all", ["*"]),
        endpoint("ep_gone", ["hookrelay.*"], state=EndpointState.DELETED),
        endpoint("ep_off", ["hookrelay.*"], state=EndpointState.DISABLED),
    )
    world.emitter.emit(failing_notice())
    [event] = world.of_type(FAILING)
    assert world.recipients(event) == ["ep_off", "ep_ops"]
    statuses = {d.endpoint_id: d.status for d in world.deliveries.items.values()}
    assert statuses == {"ep_ops": DeliveryStatus.QUEUED, "ep_off": DeliveryStatus.CANCELLED}  # as ingest does
    assert [m.delivery_id for m in world.queue.sent] == [
        d.id for d in world.deliveries.items.values() if d.endpoint_id == "ep_ops"
    ]
    assert event.ordering_key == "hookrelay.ep_down" and event.sequence == 1
    assert event.data["endpoint_id"] == "ep_down" and "secrets" not in event.body


def test_emitting_the_same_transition_again_converges_on_one_event_and_one_delivery_each() -> None:
    world = pipeline(endpoint("ep_down", ["*"]), endpoint("ep_ops", ["hookrelay.*"]))
    for _ in range(3):
        world.emitter.emit(failing_notice())
    [event] = world.of_type(FAILING)
    assert world.recipients(event) == ["ep_ops"] and len(world.deliveries.items) == 1
    world.emitter.emit(failing_notice(key="ep_down:2025-03-01T12:00:00.000Z:failing_3d"))  # another transition
    assert len(world.of_type(FAILING)) == 2 and len(world.deliveries.items) == 2


def test_another_tenants_same_transition_is_another_event() -> None:
    mine, theirs = failing_notice(), PlatformNotice("tn_2", FAILING, "ep_down", failing_notice().key, {})
    assert mine.request_key != theirs.request_key


# --- the catalogue: one definition of the types and their fields ---


def test_a_payload_must_have_exactly_the_catalogues_fields() -> None:
    with pytest.raises(ValueError, match="secret"):
        notice("tn_1", FAILING, about="ep", key="k", secret="whsec_x", **dict.fromkeys(CATALOGUE[FAILING].fields))
    with pytest.raises(ValueError, match="url"):
        fields = dict.fromkeys(set(CATALOGUE[FAILING].fields) - {"url"})
        notice("tn_1", FAILING, about="ep", key="k", **fields)


def test_every_type_is_in_the_catalogue_and_reserved() -> None:
    assert set(CATALOGUE) == set(PlatformEventType)
    assert all(is_reserved(kind.value) for kind in PlatformEventType)
    assert not is_reserved("order.created") and not is_reserved("hookrelayx.created")


def test_the_consumer_guide_shows_the_catalogue_as_the_code_defines_it() -> None:
    guide = (ROOT / "docs" / "consumer-guide.md").read_text()
    assert catalogue_table() in guide


# --- the sweeper's notices as webhooks ---


@dataclass
class RecordingNotices:
    published: list[EndpointNoticeMessage] = field(default_factory=list)

    def publish(self, message: EndpointNoticeMessage) -> None:
        self.published.append(message)


def sweeper(world: Pipeline, notices: RecordingNotices, moment: datetime) -> AutoDisableSweeper:
    return AutoDisableSweeper(
        endpoints=world.endpoints,
        management=EndpointService(world.endpoints, NoDeliveries(), nothing_parked(world.endpoints)),
        deliveries=NoDeliveries(),
        notices=notices,
        clock=lambda: moment,
        platform_events=world.emitter,
    )


def test_each_notice_of_a_spell_is_one_webhook_to_the_ops_endpoint_and_the_disable_is_one_more() -> None:
    world = pipeline(endpoint("ep_down", ["*"], failing_since=SINCE), endpoint("ep_ops", ["hookrelay.endpoint.*"]))
    notices = RecordingNotices()
    for hours in range(0, 6 * 24 + 1):
        sweeper(world, notices, SINCE + hours * HOUR).sweep()
    failing = world.of_type(FAILING)
    [disabled] = world.of_type(PlatformEventType.ENDPOINT_DISABLED)
    assert sorted(e.data["notice"] for e in failing) == ["failing_1d", "failing_3d"]
    assert [world.recipients(e) for e in [*failing, disabled]] == [["ep_ops"]] * 3
    assert {e.data["notice_id"] for e in [*failing, disabled]} == {m.body["notice_id"] for m in notices.published}
    assert disabled.data["disabled_at"] == notices.published[-1].body["disable_at"]


class Died(BaseException):
    """The process died (not an Exception: nothing in the code under test may catch it)."""


def test_a_sweep_that_dies_between_the_webhook_and_the_record_sends_one_delivery_all_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = pipeline(endpoint("ep_down", ["*"], failing_since=SINCE), endpoint("ep_ops", ["hookrelay.*"]))
    notices = RecordingNotices()

    def die(*args: object) -> bool:
        raise Died

    monkeypatch.setattr(world.endpoints, "record_notice", die)
    with pytest.raises(Died):
        sweeper(world, notices, SINCE + DAY).sweep()
    monkeypatch.undo()
    [event] = world.of_type(FAILING)
    assert world.endpoints.get("tn_1", "ep_down").failure_notice is None  # emitted, not recorded

    sweeper(world, notices, SINCE + DAY + HOUR).sweep()  # the next sweep: the notice is still owed
    sweeper(world, notices, SINCE + DAY + 2 * HOUR).sweep()
    assert world.of_type(FAILING) == [event] and world.recipients(event) == ["ep_ops"]
    assert len(world.deliveries.items) == 1
    assert world.endpoints.get("tn_1", "ep_down").failure_notice is FailureNotice.FAILING_1D


class UnreachableEvents(FakeEvents):
    def put(self, event: Event) -> bool:
        raise ConnectionError("DynamoDB unreachable")


def test_a_webhook_that_cannot_be_emitted_holds_the_notice_back_for_the_next_sweep() -> None:
    world = pipeline(endpoint("ep_down", ["*"], failing_since=SINCE), endpoint("ep_ops", ["hookrelay.*"]))
    notices = RecordingNotices()
    healthy_events, world.events = world.events, UnreachableEvents()
    report = sweeper(world, notices, SINCE + DAY).sweep()
    assert [endpoint_id for endpoint_id, _ in report.unsent] == ["ep_down"] and notices.published == []
    world.events = healthy_events
    sweeper(world, notices, SINCE + DAY + HOUR).sweep()
    assert len(notices.published) == 1 and len(world.of_type(FAILING)) == 1


# --- recovery, on the delivery path ---


@pytest.fixture
def world() -> World:
    return make_world()


def with_ops_endpoint(world: World) -> Pipeline:
    ops = endpoint("ep_ops", ["hookrelay.endpoint.*"])
    world.endpoints.put(ops)
    ops_pipeline = Pipeline(world.endpoints)  # type: ignore[arg-type]
    world.service.platform_events = ops_pipeline.emitter
    return ops_pipeline


def test_a_success_ends_a_noticed_spell_with_one_recovered_webhook(world: World) -> None:
    ops = with_ops_endpoint(world)
    down = world.endpoints.get("tn_1", "ep_1")
    world.endpoints.put(replace(down, failing_since=SINCE, failure_notice=FailureNotice.FAILING_1D))
    world.script(OK)
    world.service.attempt(world.message(1))
    [event] = ops.of_type(PlatformEventType.ENDPOINT_RECOVERED)
    assert ops.recipients(event) == ["ep_ops"]
    assert event.data["failing_since"] == "2025-03-01T12:00:00.000Z" and event.data["endpoint_id"] == "ep_1"
    assert world.endpoints.get("tn_1", "ep_1").failing_since is None


def test_a_spell_nobody_was_told_about_ends_quietly(world: World) -> None:
    ops = with_ops_endpoint(world)
    down = world.endpoints.get("tn_1", "ep_1")
    world.endpoints.put(replace(down, failing_since=SINCE))
    world.script(OK)
    world.service.attempt(world.message(1))
    assert ops.events.items == {} and world.endpoints.get("tn_1", "ep_1").failing_since is None


def test_a_crash_between_the_recovered_webhook_and_the_spells_end_is_finished_by_the_next_success(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    ops = with_ops_endpoint(world)
    down = world.endpoints.get("tn_1", "ep_1")
    world.endpoints.put(replace(down, failing_since=SINCE, failure_notice=FailureNotice.FAILING_3D))

    def die(*args: object) -> bool:
        raise Died

    monkeypatch.setattr(world.endpoints, "mark_recovered", die)
    world.script(OK)
    with pytest.raises(Died):
        world.service.attempt(world.message(1))
    monkeypatch.undo()
    assert world.endpoints.get("tn_1", "ep_1").failing_since == SINCE  # announced, not cleared

    # The next success (another delivery) announces the same spell's end again, and clears it.
    again = replace(world.delivery, id="dlv_2")
    world.deliveries.put_many([again])
    world.script(OK)
    world.service.attempt(DeliveryMessage("dlv_2", "tn_1", 1, "grp", "dedup-2"))
    [event] = ops.of_type(PlatformEventType.ENDPOINT_RECOVERED)
    assert ops.recipients(event) == ["ep_ops"] and len(ops.deliveries.items) == 1
    assert world.endpoints.get("tn_1", "ep_1").failing_since is None


def test_the_builders_key_each_transition_once() -> None:
    down = endpoint("ep_down", ["*"], failing_since=SINCE, circuit_opened_at=SINCE)
    opened = platform_events.circuit_opened(down, opened_at=SINCE, failures=5, next_probe_at=None)
    repaired = platform_events.circuit_opened(down, opened_at=SINCE, failures=9, next_probe_at=SINCE + HOUR)
    closed = platform_events.circuit_closed(down, closed_at=SINCE + DAY)
    assert opened.request_key == repaired.request_key != closed.request_key
    recovered = platform_events.recovered(down, at=SINCE + DAY)
    assert recovered.request_key == platform_events.recovered(down, at=SINCE + 2 * DAY).request_key


# --- the circuit's webhooks, on the probe workflow's commands ---


def circuit_world(down: Endpoint) -> tuple[CircuitService, Pipeline, RecordingTelemetry]:
    ops = pipeline(down, endpoint("ep_ops", ["hookrelay.endpoint.*"]))
    endpoints = ops.endpoints
    deliveries = FakeDeliveries()
    lot = FakeParkingLot(deliveries)
    telemetry = RecordingTelemetry()
    service = CircuitService(
        endpoints=endpoints,
        circuits=FakeCircuits(endpoints),
        parking=Parking(lot, FakeCircuits(endpoints), endpoints),
        events=FakeEvents(),
        queue=RecordingQueue(),
        workflow=RecordingWorkflow(),
        dead_letters=RecordingDeadLetters(),
        schedule=SCHEDULE,
        telemetry=telemetry,
        attempts=NoAttempts(),
        clock=lambda: SINCE + HOUR,
        platform_events=ops.emitter,
    )
    return service, ops, telemetry


class NoAttempts:
    def attempt(self, message: DeliveryMessage) -> AttemptReport:
        raise AssertionError("nothing is parked: nothing to attempt")


def draining(**fields: Any) -> Endpoint:
    values = {"circuit": CircuitState.DRAINING, "circuit_step": 2, "circuit_opened_at": SINCE, "probes_made": 3}
    return endpoint("ep_down", ["*", "hookrelay.*"], **(values | fields))


def drain(step: int = 2, commands: int = 4) -> CircuitCommand:
    return CircuitCommand("tn_1", "ep_down", step, CircuitCommandKind.DRAIN, SINCE + HOUR, commands=commands)


def test_the_drain_that_closes_the_circuit_sends_one_closed_webhook() -> None:
    service, ops, _ = circuit_world(draining())
    assert service.step(drain()).kind is CircuitCommandKind.DONE
    [event] = ops.of_type(PlatformEventType.CIRCUIT_CLOSED)
    assert ops.recipients(event) == ["ep_ops"]
    assert (event.data["opened_at"], event.data["probes_made"]) == ("2025-03-01T12:00:00.000Z", 3)
    service.step(drain())  # the same command again (its answer was lost): still one
    assert len(ops.of_type(PlatformEventType.CIRCUIT_CLOSED)) == 1 and len(ops.deliveries.items) == 1


def test_a_drain_that_dies_between_the_close_and_its_webhook_is_finished_by_the_re_sent_command() -> None:
    service, ops, _ = circuit_world(draining())
    emitter = service.platform_events

    class DiesOnce:
        def emit(self, notice: PlatformNotice) -> None:
            raise Died

    service.platform_events = DiesOnce()
    with pytest.raises(Died):
        service.step(drain())
    assert ops.endpoints.get("tn_1", "ep_down").circuit is CircuitState.CLOSED and ops.events.items == {}

    service.platform_events = emitter
    assert service.step(drain()).kind is CircuitCommandKind.DONE  # the workflow re-sends the unanswered command
    [event] = ops.of_type(PlatformEventType.CIRCUIT_CLOSED)
    assert ops.recipients(event) == ["ep_ops"]


def test_a_probe_workflows_first_command_sends_the_opened_webhook_whoever_opened_it_died_before_sending() -> None:
    opened = draining(circuit=CircuitState.OPEN, next_probe_at=SINCE + 2 * HOUR, probes_made=0)
    service, ops, _ = circuit_world(opened)
    first = CircuitCommand("tn_1", "ep_down", 2, CircuitCommandKind.PROBE, SINCE + 2 * HOUR)
    service.step(first)
    service.step(first)  # re-sent
    service.step(replace(first, commands=1))  # later commands do not emit it
    [event] = ops.of_type(PlatformEventType.CIRCUIT_OPENED)
    assert ops.recipients(event) == ["ep_ops"] and event.data["opened_at"] == "2025-03-01T12:00:00.000Z"


def test_a_webhook_that_fails_never_holds_up_the_circuit() -> None:
    service, ops, telemetry = circuit_world(draining())
    ops.events = UnreachableEvents()
    service.platform_events = ops.emitter
    assert service.step(drain()).kind is CircuitCommandKind.DONE
    assert ops.endpoints.get("tn_1", "ep_down").circuit is CircuitState.CLOSED
    assert [metric for metric, *_ in telemetry.errors] == [PLATFORM_EVENT_ERRORS]


def test_a_tenant_without_subscribers_gets_nothing_written() -> None:
    world = pipeline(endpoint("ep_down", ["hookrelay.*"]), endpoint("ep_all", ["*"]))
    world.emitter.emit(failing_notice())
    assert world.events.items == {} and world.events.sequences == {} and world.queue.sent == []
