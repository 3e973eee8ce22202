"""An endpoint's outage: the probe workflow's commands (probe, drain, close) and the sweep behind them.

The delivery path opens the circuit and parks deliveries (services/delivery.py); from then on one probe
workflow per outage sends this service one command at a time and gets the next one back: probe the oldest
parked delivery on the schedule; once one gets through, release the parked deliveries oldest first, a window
at a time; close when nothing is parked. The sweep, on the sweeper's schedule, ends parked deliveries whose
own horizon passed (dead, with their dead letters) or whose endpoint was disabled (cancelled), and restarts a
probe workflow that was lost.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from hookrelay.domain import circuit, pacing, platform_events
from hookrelay.domain.circuit import CircuitState, Via
from hookrelay.domain.classification import Outcome
from hookrelay.domain.clock import from_rfc3339, utcnow
from hookrelay.domain.lifecycle import retention_expiry
from hookrelay.domain.models import Endpoint, EndpointState
from hookrelay.domain.platform_events import PlatformNotice
from hookrelay.domain.queues import DeliveryLane
from hookrelay.domain.schedule import RetrySchedule
from hookrelay.domain.status import DeadReason, DeliveryStatus
from hookrelay.services.parking import Parking
from hookrelay.services.ports import (
    PLATFORM_EVENT_ERRORS,
    Attempts,
    CircuitCommand,
    CircuitCommandKind,
    CircuitRepository,
    DeadLetters,
    DeliveryMessage,
    DeliveryQueue,
    DeliveryTelemetry,
    EndpointRepository,
    EventRepository,
    ParkedDelivery,
    PlatformEvents,
    RetryWorkflow,
)

CIRCUIT_CLOSED = "CircuitClosed"
DELIVERIES_DRAINED = "DeliveriesDrained"
PARKED_EXPIRED = "ParkedDeliveriesDead"
PARKED_CANCELLED = "ParkedDeliveriesCancelled"
PROBE_WORKFLOWS_RESTARTED = "ProbeWorkflowsRestarted"
# A probe workflow not running this long after its command was due is lost (its command and re-sends went
# unanswered, or a crash came between opening the circuit and starting it): the sweep starts a fresh one.
LOST_AFTER = timedelta(seconds=60)
SWEEP_PAGE = 100  # parked deliveries read at a time by the sweep


@dataclass
class CircuitReport:
    examined: int = 0  # endpoints with an open or draining circuit
    parked: int = 0  # deliveries parked behind them, each endpoint's counted up to PARKED_COUNT_LIMIT
    expired: int = 0
    cancelled: int = 0
    restarted: list[str] = field(default_factory=list)


@dataclass
class CircuitService:
    endpoints: EndpointRepository
    circuits: CircuitRepository
    parking: Parking
    events: EventRepository
    queue: DeliveryQueue
    workflow: RetryWorkflow
    dead_letters: DeadLetters
    schedule: RetrySchedule
    telemetry: DeliveryTelemetry
    attempts: Attempts  # a probe is a real delivery attempt of the oldest parked delivery
    clock: Callable[[], datetime] = field(default=utcnow)
    # Operational webhooks (circuit opened, closed) to the tenant's subscribed endpoints; None: none.
    platform_events: PlatformEvents | None = None

    # --- The probe workflow's commands ---

    def handle(self, command: CircuitCommand) -> CircuitCommand:
        """Carry out one command and answer the workflow with the next."""
        following = self.step(command)
        if command.reply_to:
            self.workflow.answer(command.reply_to, following)
        return following

    def step(self, command: CircuitCommand) -> CircuitCommand:
        now = self.clock()
        endpoint = self.endpoints.get(command.tenant_id, command.endpoint_id)
        done = replace(command, kind=CircuitCommandKind.DONE, due_at=now, released=(), reply_to=None)
        if endpoint is None or endpoint.circuit_step != command.step:
            return done  # another workflow owns this circuit now
        if endpoint.circuit is CircuitState.CLOSED:
            if command.kind is CircuitCommandKind.DRAIN and endpoint.state is EndpointState.ENABLED:
                # This workflow's drain closed it and died before answering: the re-sent command finishes the close
                # by emitting its webhook (the same event, if the first run got that far).
                self._announce(platform_events.circuit_closed(endpoint, closed_at=now))
            return done  # there is no outage any more
        if endpoint.state is not EndpointState.ENABLED:
            self._release_disabled(endpoint, now)
            return done
        if command.commands == 0 and endpoint.circuit_opened_at is not None:
            # A workflow's first command announces the opening (`hookrelay.endpoint.circuit_opened`), before it is
            # answered: the delivery path that opened the circuit only starts this workflow. A crash before the
            # answer re-sends the command, and a workflow started afresh (hand-over, a lost one restarted) has a first
            # command too: each emits again, and converges on one event (its id is derived from the opening's time).
            # The count that opened it was cleared by the opening: it was the threshold.
            opened = platform_events.circuit_opened(
                endpoint,
                opened_at=endpoint.circuit_opened_at,
                failures=circuit.OPEN_AFTER_FAILURES,
                next_probe_at=endpoint.next_probe_at,
            )
            self._announce(opened)
        if command.commands >= circuit.COMMANDS_PER_EXECUTION:
            self._hand_over(endpoint, now)
            return done
        following = replace(command, commands=command.commands + 1, reply_to=None)
        if endpoint.circuit is CircuitState.OPEN:
            due = endpoint.next_probe_at or now
            if command.kind is CircuitCommandKind.DRAIN or due > now + timedelta(seconds=1):
                # The drain failed and reopened the circuit, or this command came early: wait for the probe.
                return replace(following, kind=CircuitCommandKind.PROBE, due_at=due, released=())
            return self._probe(endpoint, following, now)
        return self._drain(endpoint, following, now)

    def _probe(self, endpoint: Endpoint, following: CircuitCommand, now: datetime) -> CircuitCommand:
        """Attempt the oldest parked delivery: a probe that gets through is a delivery too."""
        oldest = self._oldest_live(endpoint, now)
        if oldest is not None:
            message = DeliveryMessage(
                delivery_id=oldest.id,
                tenant_id=oldest.tenant_id,
                attempt=oldest.attempt_count + 1,
                group_id="",
                deduplication_id="",
                endpoint_id=endpoint.id,
                via=Via.PROBE,
            )
            # The claim keeps the delivery's lot entry until the attempt is settled: a crash in between leaves it
            # the oldest in the lot, so the command, sent again, probes it again (taking the stale claim over).
            report = self.attempts.attempt(message)
            if report.sent and not report.parked:
                self.parking.lot.forget(oldest, endpoint.id)
            if report.outcome is Outcome.RETRY:
                due = circuit.next_probe_after_failure(
                    self.schedule,
                    opened_at=endpoint.circuit_opened_at or now,
                    probes_made=endpoint.probes_made,
                    now=now,
                    retry_after=report.retry_after,
                )
                self.circuits.probed(endpoint, following.step, due)
                return replace(following, kind=CircuitCommandKind.PROBE, due_at=due)
            if not report.sent:  # another message took it first: look again shortly
                return replace(following, kind=CircuitCommandKind.PROBE, due_at=now + timedelta(seconds=1))
        # Through (or nothing left to probe with): drain what is parked, then close.
        self.circuits.start_drain(endpoint, following.step)
        return replace(following, kind=CircuitCommandKind.DRAIN, due_at=now, released=())

    def _drain(self, endpoint: Endpoint, following: CircuitCommand, now: datetime) -> CircuitCommand:
        if endpoint.drain_paused_until is not None and endpoint.drain_paused_until > now:
            # Released messages that arrive meanwhile stay parked; after the pause the window starts afresh.
            return replace(following, kind=CircuitCommandKind.DRAIN, due_at=endpoint.drain_paused_until, released=())
        # Its window, and with a rate limit no more than a few seconds of it (the releases wait for their slots).
        window = pacing.drain_room(circuit.drain_window(endpoint.max_in_flight), endpoint.rate_limit_per_second)
        in_flight = self._in_flight(following.released)
        released: list[ParkedDelivery] = []
        if len(in_flight) <= window // 2:
            released = self._release(endpoint, window - len(in_flight), set(in_flight), following, now)
        due = now + timedelta(seconds=circuit.DRAIN_POLL_SECONDS)
        if not in_flight and not released:
            if self.parking.close_if_empty(endpoint, following.step):
                self.telemetry.count(CIRCUIT_CLOSED)
                # Closed, then announced: a crash in between leaves the command unanswered; the workflow re-sends
                # it, and `step` emits it for the closed circuit (converging on the same event).
                self._announce(platform_events.circuit_closed(endpoint, closed_at=now))
                return replace(following, kind=CircuitCommandKind.DONE, due_at=now, released=())
            return replace(following, kind=CircuitCommandKind.DRAIN, due_at=due, released=())
        self.circuits.drained(endpoint, following.step, len(released), due)
        ids = (*in_flight, *(p.id for p in released))
        return replace(following, kind=CircuitCommandKind.DRAIN, due_at=due, released=ids)

    def _release(
        self, endpoint: Endpoint, room: int, skip: set[str], following: CircuitCommand, now: datetime
    ) -> list[ParkedDelivery]:
        """Send the next `room` parked deliveries, oldest first, at the endpoint's concurrency (its message groups).

        They stay parked until their attempt is claimed, so a crash here loses nothing: the next command
        releases them again, and a second message for one attempt is a no-op."""
        released: list[ParkedDelivery] = []
        for parked in self.parking.lot.parked(endpoint.id, room + len(skip)):
            if parked.id in skip:
                continue
            if self._past_horizon(parked, now):
                self._end_dead(endpoint, parked, now)
                continue
            released.append(parked)
            if len(released) == room:
                break
        self.queue.enqueue(
            [
                DeliveryMessage(
                    delivery_id=p.id,
                    tenant_id=p.tenant_id,
                    attempt=p.attempt_count + 1,
                    group_id=p.message_group_id,
                    deduplication_id=f"{p.id}-{p.attempt_count + 1}-drain-{following.step}-{following.commands}",
                    endpoint_id=endpoint.id,
                    via=Via.DRAIN,
                    # The slow lane of the endpoint's shard: a draining endpoint may still be slow to answer.
                    shard=endpoint.queue_shard,
                    lane=DeliveryLane.SLOW,
                )
                for p in released
            ]
        )
        if released:
            self.telemetry.count(DELIVERIES_DRAINED, len(released))
        return released

    def _in_flight(self, released: tuple[str, ...]) -> list[str]:
        """Released deliveries whose attempt has not ended: still parked (message on its way) or attempting."""
        if not released:
            return []
        current = {d.id: d for d in self.parking.lot.get_many(released)}
        return [
            i
            for i in released
            if i in current and (current[i].parked_at is not None or current[i].status is DeliveryStatus.ATTEMPTING)
        ]

    def _oldest_live(self, endpoint: Endpoint, now: datetime) -> ParkedDelivery | None:
        """The oldest parked delivery still within its horizon; older ones past it end dead on the way."""
        while True:
            page = self.parking.lot.parked(endpoint.id, 10)
            if not page:
                return None
            for parked in page:
                if not self._past_horizon(parked, now):
                    return parked
                self._end_dead(endpoint, parked, now)

    def _hand_over(self, endpoint: Endpoint, now: datetime) -> None:
        """Past COMMANDS_PER_EXECUTION, a fresh workflow takes over (an execution's history is bounded)."""
        probe_due = max(endpoint.next_probe_at or now, now)
        self._start_fresh_workflow(endpoint, probe_due if endpoint.circuit is CircuitState.OPEN else now, now)

    def _start_fresh_workflow(self, endpoint: Endpoint, due: datetime, now: datetime) -> bool:
        """Take the circuit over from its workflow (step + 1) and start the one that carries on from here."""
        if not self.circuits.take_over(endpoint, endpoint.circuit_step, now):
            return False
        kind = CircuitCommandKind.PROBE if endpoint.circuit is CircuitState.OPEN else CircuitCommandKind.DRAIN
        step = endpoint.circuit_step + 1
        self.workflow.start_probe(
            CircuitCommand(endpoint.tenant_id, endpoint.id, step, kind, due, shard=endpoint.queue_shard)
        )
        return True

    def _announce(self, notice: PlatformNotice) -> None:
        """Emit an operational webhook; a failure is counted, never allowed to hold up the outage's handling."""
        if self.platform_events is None:
            return
        try:
            self.platform_events.emit(notice)
        except Exception as error:
            self.telemetry.bookkeeping_failed(PLATFORM_EVENT_ERRORS, notice.about, error)

    # --- The sweep ---

    def sweep(self) -> CircuitReport:
        now = self.clock()
        report = CircuitReport()
        for endpoint in self.circuits.open_circuits():
            report.examined += 1
            report.parked += self.parking.parked_behind(endpoint).counted
            if endpoint.state is not EndpointState.ENABLED:
                report.cancelled += self._release_disabled(endpoint, now)
                continue
            report.expired += self._expire(endpoint, now)
            self._restart_if_lost(endpoint, now, report)
        return report

    def _expire(self, endpoint: Endpoint, now: datetime) -> int:
        """End the parked deliveries whose own horizon has passed, oldest first.

        Reading in event order stops at the first delivery whose *event* is younger than the horizon: its
        horizon, and every later one's, lies ahead (a delivery is never attempted before its event happened)."""
        ended = 0
        while True:
            page = self.parking.lot.parked(endpoint.id, SWEEP_PAGE)
            expired = [p for p in page if self._past_horizon(p, now)]
            for parked in expired:
                ended += self._end_dead(endpoint, parked, now)
            if len(page) < SWEEP_PAGE or not expired or not self._event_past_horizon(page[-1], now):
                return ended

    def _restart_if_lost(self, endpoint: Endpoint, now: datetime, report: CircuitReport) -> None:
        due = endpoint.next_probe_at or endpoint.circuit_opened_at or now
        if due > now - LOST_AFTER or self.workflow.probe_running(endpoint.id, endpoint.circuit_step):
            return
        if self._start_fresh_workflow(endpoint, now, now):
            self.telemetry.count(PROBE_WORKFLOWS_RESTARTED)
            report.restarted.append(endpoint.id)

    def _release_disabled(self, endpoint: Endpoint, now: datetime) -> int:
        """An endpoint disabled or deleted during an outage: its parked deliveries are cancelled (redrivable once
        it is enabled again, as for queued ones), then its circuit closes."""
        cancelled = 0
        while page := self.parking.lot.parked(endpoint.id, SWEEP_PAGE):
            ended = [
                self.parking.lot.end(p, endpoint.id, DeliveryStatus.CANCELLED, now, retention_expiry(now)) for p in page
            ]
            for delivery in filter(None, ended):
                self.events.extend_expiry(delivery.tenant_id, delivery.event_id, retention_expiry(now))
                cancelled += 1
            if not any(ended):
                break  # each moved on under the sweep (claimed, or ended by another): the next sweep finishes
        if cancelled:
            self.telemetry.count(PARKED_CANCELLED, cancelled)
        fresh = self.endpoints.get(endpoint.tenant_id, endpoint.id)
        # A delivery parked after the last read sees the endpoint disabled and takes itself back out.
        if fresh is not None and not self.parking.lot.parked(endpoint.id, 1):
            self.circuits.reset(fresh)
        return cancelled

    def _end_dead(self, endpoint: Endpoint, parked: ParkedDelivery, now: datetime) -> int:
        """A parked delivery past its horizon dies in bulk, not one execution each: the record (dead, kept for the
        redrive window, with why it died, marked counted) in one write, then its event kept as long, then its count.
        Only the write that ends it can succeed (it is conditional on the delivery still parked as read), so it is
        counted once. A crash after it leaves it dead, in the log with its reason and redrivable, and uncounted;
        its event's expiry not pushed on, which only matters by as long as the death came after the horizon (the
        event was stored to live through the horizon and the redrive window after it: `event_expiry`)."""
        ended = self.parking.lot.end(
            parked, endpoint.id, DeliveryStatus.DEAD, now, retention_expiry(now), dead_reason=DeadReason.HORIZON
        )
        if ended is None:
            return 0
        self.events.extend_expiry(ended.tenant_id, ended.event_id, retention_expiry(now))
        self.dead_letters.publish(ended, DeadReason.HORIZON)
        self.telemetry.count(PARKED_EXPIRED)
        return 1

    def _past_horizon(self, parked: ParkedDelivery, now: datetime) -> bool:
        return circuit.horizon_passed(parked.first_attempt_at or parked.created_at, self.schedule, now)

    def _event_past_horizon(self, parked: ParkedDelivery, now: datetime) -> bool:
        event_at = from_rfc3339(parked.event_order.split("#", 1)[0])
        return circuit.horizon_passed(event_at, self.schedule, now)
