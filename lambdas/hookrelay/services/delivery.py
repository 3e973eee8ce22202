"""Making one attempt: claim it, sign the stored body, POST it, record what happened, decide what's next."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as StillSending
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial

from hookrelay.domain import circuit, lanes, mailbox, pacing, platform_events, trace_context
from hookrelay.domain.circuit import CircuitState, Gate, Via
from hookrelay.domain.classification import HARD_FAILURE_ATTEMPT_CAP, FailureKind, Outcome, ResponseRule, rule_for
from hookrelay.domain.clock import utcnow
from hookrelay.domain.custom_headers import outbound_headers
from hookrelay.domain.destinations import DestinationKind, external_id, is_aws_target, kind_of, session_name
from hookrelay.domain.envelope import retry_group_id
from hookrelay.domain.lifecycle import (
    attemptable_unclaimed,
    claims_late,
    may_stay_unstored,
    retention_expiry,
    unstored_fan_out,
)
from hookrelay.domain.mailbox import MailboxEntry
from hookrelay.domain.models import Attempt, Delivery, Endpoint, EndpointState, Event
from hookrelay.domain.queues import DeliveryLane
from hookrelay.domain.redrive import recovers
from hookrelay.domain.schedule import RetrySchedule, parse_retry_after
from hookrelay.domain.signing import signed_headers
from hookrelay.domain.status import LATE_CLAIM_AFTER, DeadReason, DeliveryStatus
from hookrelay.domain.trace_context import TraceContext
from hookrelay.services.pacing import Pacing
from hookrelay.services.parking import Parking
from hookrelay.services.ports import (
    DELIVERIES_PARKED,
    DELIVERIES_POSTED,
    AttemptRecord,
    AttemptReport,
    CircuitCommand,
    CircuitCommandKind,
    CircuitRepository,
    DeadLetters,
    DeliveryMessage,
    DeliveryQueue,
    DeliveryRepository,
    DeliveryTelemetry,
    DestinationMessage,
    DestinationSender,
    EndpointRepository,
    EndpointSender,
    EventRepository,
    Mailbox,
    ParkOutcome,
    PlatformEvents,
    RetryTicket,
    RetryWorkflow,
    SendResult,
    SlowTails,
    Unclaimed,
    WebhookSender,
)

# Step Functions wakes a Wait in whole seconds (moto truncates twice, so up to 2 s early); the attempt
# waits out that remainder itself so that no retry is ever made before its `next_attempt_at`.
EARLY_WAKE_TOLERANCE = timedelta(seconds=3)
FAILING_SPELL_ERRORS = "FailingSpellErrors"  # metric: the endpoint's failing-spell bookkeeping failed
LANE_ERRORS = "LaneErrors"  # metric: switching the endpoint's delivery lane failed
# Metrics of the lanes: messages forwarded to a slow lane, endpoints moved to it and back.
DELIVERIES_FORWARDED = "DeliveriesForwarded"
LANE_SLOWED = "EndpointsSlowed"
LANE_QUICKENED = "EndpointsQuickened"
# Metrics of the circuit (Powertools EMF, namespace and service as the function's).
CIRCUIT_OPENED = "CircuitOpened"
CIRCUIT_REOPENED = "CircuitReopened"
DRAIN_PAUSED = "DrainPaused"
# Metrics of the rate limit (domain/pacing.py): sends that waited for their slot, and those with none in their budget.
DELIVERIES_PACED = "DeliveriesPaced"
DELIVERIES_PACED_ELSEWHERE = "DeliveriesPacedElsewhere"
LATE_CLAIM_ERRORS = "LateClaimErrors"  # metric: a late claim's write failed (the settle still accepts either form)
# Sends waited on with a deadline (`_send`) run on these threads, one per attempt in flight in the process.
SEND_THREADS = 16


@dataclass(frozen=True)
class Lanes:
    queue: DeliveryQueue  # the delivery queues: a forwarded message goes to its endpoint's shard's slow lane
    tails: SlowTails  # per message group, the last message forwarded and not yet settled in the slow lane
    slow_after_ms: int = lanes.DEFAULT_SLOW_LANE_AFTER_MS


class BatchReads:
    """Endpoints read once for the first messages of one batch's message groups, instead of once per group.

    A group's message is handed out only after the one before it was deleted, so by the time the batch arrived,
    everything its group had written (a tail's mark, a lane's switch, a circuit's change) was written: one consistent
    read made after the batch arrived sees all of it, as each group's own read would. The groups start together and
    would read at about the same moment anyway. A group's later messages in the batch read afresh, after what its own
    first ones wrote (the handler hands this to each group's first call only)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reads: dict[tuple[str, str], Future[Endpoint | None]] = {}

    def read(self, key: tuple[str, str], read: Callable[[], Endpoint | None]) -> Endpoint | None:
        with self._lock:
            made = self._reads.get(key)
            if made is None:
                mine: Future[Endpoint | None] = Future()
                self._reads[key] = mine
        if made is not None:
            return made.result()  # a failed read fails each message that waited on it: they come back
        try:
            mine.set_result(read())
        except BaseException as error:  # whatever ends the read, no other group is left waiting on it
            mine.set_exception(error)
            raise
        return mine.result()


@dataclass(frozen=True)
class Decision:
    status: DeliveryStatus
    next_attempt_at: datetime | None = None
    retry_after: float | None = None


@dataclass
class DeliveryService:
    deliveries: DeliveryRepository
    endpoints: EndpointRepository
    events: EventRepository
    sender: WebhookSender
    workflow: RetryWorkflow
    dead_letters: DeadLetters
    schedule: RetrySchedule
    telemetry: DeliveryTelemetry
    circuits: CircuitRepository
    parking: Parking
    # A claim older than this is presumed abandoned (the invocation died mid-attempt): the delivery function's
    # timeout, after which Lambda has ended the invocation that made it; no longer than the queue's visibility timeout
    # less that, so the message that comes back takes it over (schema.DELIVERY_CLAIM_TIMEOUT_SECONDS, derived there).
    claim_timeout: timedelta
    clock: Callable[[], datetime] = field(default=utcnow)
    sleep: Callable[[float], None] = field(default=time.sleep)
    # `hookrelay.endpoint.recovered` to the tenant's subscribed endpoints; None: none.
    platform_events: PlatformEvents | None = None
    # Where a slow endpoint's messages go, and when an endpoint is slow (domain/lanes.py); None: one lane.
    lanes: Lanes | None = None
    # How long an unclaimed attempt may go unanswered before it is claimed (domain.status.LATE_CLAIM_AFTER).
    claim_after: timedelta = LATE_CLAIM_AFTER
    # Sends to endpoints whose url is an AWS destination (domain/destinations.py); None: such attempts fail.
    destinations: DestinationSender | None = None
    # Poll endpoints' mailboxes (domain/mailbox.py); None: this function posts to none.
    mailbox: Mailbox | None = None
    # Sends an attempt with the endpoint's auth (services/endpoint_requests.py), through `sender`; None: endpoints
    # without auth only.
    requests: EndpointSender | None = None
    # Rate-limited endpoints' send slots (domain/pacing.py); None: limits are not kept (a test's choice only).
    pacing: Pacing | None = None
    _senders: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(SEND_THREADS, thread_name_prefix="send"), repr=False
    )

    def attempt(
        self,
        message: DeliveryMessage,
        *,
        late: bool = False,
        spare_seconds: float | None = None,
        reads: BatchReads | None = None,
    ) -> AttemptReport:
        """Make the attempt the message asks for, or park it behind the endpoint's open circuit, or forward it to the
        endpoint's slow lane (domain/lanes.py). `late`: its batch has no time left for an attempt: forward it if it
        would be sent (a message that is parked, cancelled or found made sends nothing, and is handled here).
        `spare_seconds`: how long the invocation may spend waiting for a rate-limited endpoint's slot, beyond the
        message's own longest path (None: its lane's whole budget, domain/pacing.py). `reads`: its endpoint as read
        for its batch's groups' first messages (it is one of them)."""
        now = self.clock()
        return self._handle(message, self._endpoint_of(message, reads), now, late=late, spare_seconds=spare_seconds)

    def attempt_run(
        self,
        first: DeliveryMessage,
        following: Iterable[DeliveryMessage],
        spare_seconds: float | None = None,
        reads: BatchReads | None = None,
    ) -> list[AttemptReport]:
        """A fast lane's next messages of one group, in order, the ones after the first read only as needed: if the
        first is to be forwarded, it and the ones after it that are too, forwarded together: one tail and one send
        for the run instead of one each (while an endpoint turns slow, its group's messages queue up behind its first
        slow attempt; at volume each of them was one more write to the endpoint's item). Otherwise the first alone is
        handled, as `attempt` handles it, with the endpoint read once. The reports, in order."""
        now = self.clock()
        endpoint = self._endpoint_of(first, reads)
        if endpoint is None or not self._forwards(first, endpoint, late=False):
            return [self._handle(first, endpoint, now, late=False, spare_seconds=spare_seconds)]
        run = [first]
        for message in following:  # the group's, behind the first: it forwards them too if they are forwardable
            ours = (message.tenant_id, message.endpoint_id, message.group_id) == (
                first.tenant_id,
                endpoint.id,
                first.group_id,
            )
            if not (ours and self._forwardable(message, endpoint)):
                break
            run.append(message)
        return self._forward(run, endpoint)

    def _handle(
        self,
        message: DeliveryMessage,
        endpoint: Endpoint | None,
        now: datetime,
        *,
        late: bool,
        spare_seconds: float | None,
    ) -> AttemptReport:
        if endpoint is not None and self._forwards(message, endpoint, late=late):
            return self._forward_one(message, endpoint)
        report = self._attempt(message, endpoint, now, spare_seconds)
        if endpoint is not None and message.lane is DeliveryLane.SLOW:
            self._settle_forwarded(message, endpoint)
        return report

    def _attempt(
        self, message: DeliveryMessage, endpoint: Endpoint | None, now: datetime, spare_seconds: float | None = None
    ) -> AttemptReport:
        if endpoint is not None and endpoint.state is EndpointState.ENABLED:
            paused = endpoint.drain_paused_until is not None and endpoint.drain_paused_until > now
            if circuit.gate(endpoint.circuit, message.via, drain_paused=paused) is Gate.PARK:
                parked = self._park_message(message, endpoint, now)
                if parked is not None:
                    return parked
                endpoint = self.endpoints.get(endpoint.tenant_id, endpoint.id)  # it closed meanwhile: attempt
            if endpoint is not None and endpoint.rate_limit_per_second is not None:
                paced = self._paced(message, endpoint, now, spare_seconds)
                if isinstance(paced, AttemptReport):
                    return paced
                now = paced
        delivery = self._claim(message, now, endpoint)
        if delivery is None:
            current = self._current(message)  # read once, for both of what follows
            delivery = self._claim_stranded(message, endpoint, current, now)
            if delivery is None:
                return self._not_claimed(message, current)
        if endpoint is None or endpoint.id != delivery.endpoint_id:
            endpoint = self.endpoints.get(delivery.tenant_id, delivery.endpoint_id)
        if endpoint is None or endpoint.state is not EndpointState.ENABLED:
            return self._cancel(delivery, message, now)
        if kind_of(endpoint.url) is DestinationKind.POLL:
            return self._post(delivery, message, endpoint, now)
        event = self._event_of(message, delivery)

        started = self._not_before(delivery.next_attempt_at, now)
        if started > now and endpoint.rate_limit_per_second is not None:
            started = self._repaced(endpoint, started)
        headers = signed_headers(endpoint.active_secrets(started), event.id, started, event.body)
        headers["content-type"] = "application/json"
        # The attempt's own span in the event's trace (domain/trace_context.py): derived, so nothing records it.
        span = trace_context.child(event.trace, trace_context.attempt_span_id(delivery.id, message.attempt))
        headers |= span.headers()
        # The endpoint's custom headers under the platform's: the rule refuses clashes, and this keeps it so for a
        # header stored before the rule did (domain/custom_headers.py).
        headers = outbound_headers(endpoint.headers, has_auth=endpoint.auth is not None) | headers
        result, delivery = self._send(delivery, message, self._transmission(endpoint, delivery, event, headers))
        report = self._record(delivery, event, message, endpoint, started, result, span)
        if report.sent:
            delivered = report.status is DeliveryStatus.DELIVERED
            try:
                self._track_failing_spell(endpoint, delivered=delivered, at=started)
            except Exception as error:  # the attempt is recorded and handed over: the message is done
                self.telemetry.bookkeeping_failed(FAILING_SPELL_ERRORS, delivery.id, error)
            try:
                self._follow_lane(endpoint, message, result)
            except Exception as error:  # likewise: the next attempt's result switches it
                self.telemetry.bookkeeping_failed(LANE_ERRORS, delivery.id, error)
        return report

    def _post(self, delivery: Delivery, message: DeliveryMessage, endpoint: Endpoint, now: datetime) -> AttemptReport:
        """A poll endpoint's delivery: posted to its mailbox, where the consumer reads it (domain/mailbox.py).

        The entry first, then the delivery's mark: if the process dies between the two, the message comes back and
        posts it again under a new number, so the consumer may read it twice (at least once), never not at all. A
        delivery marked posted already (a duplicate message, the reconciler's copy) posts nothing."""
        if delivery.posted_at is None and delivery.status is DeliveryStatus.QUEUED:
            if self.mailbox is None:
                raise LookupError(f"delivery {delivery.id} is for a poll endpoint and this function has no mailbox")
            seq = self.events.next_sequence(endpoint.tenant_id, mailbox.sequence_space(endpoint.id))
            readable_until = retention_expiry(now + timedelta(seconds=self.schedule.horizon))
            entry = MailboxEntry(endpoint.id, seq, delivery.id, delivery.event_id, now, delivery.replay_of)
            self.mailbox.post(entry, readable_until)
            self.deliveries.mark_posted(delivery.id, delivery.tenant_id, seq, now, readable_until)
            self.telemetry.count(DELIVERIES_POSTED)
        return AttemptReport(delivery.id, DeliveryStatus.QUEUED, message.attempt, sent=False)

    # --- The rate limit (domain/pacing.py) ---

    def _paced(
        self, message: DeliveryMessage, endpoint: Endpoint, now: datetime, spare_seconds: float | None
    ) -> datetime | AttemptReport:
        """Wait for the endpoint's next send slot, before anything is claimed: the time the send starts at; or, with no
        slot within the message's budget (nothing reserved), what became of the message instead, never a hand-back:

        - a fast lane's message (a first attempt or a retry) is forwarded to its slow lane, as a late one is;
        - a drain's release pauses the drain that long (the delivery stays parked, and is released again in order);
        - a probe is not made (the probe workflow looks again a second later).
        A queue message in its slow lane (or with one lane only) always takes its slot: domain/pacing.py bounds it.
        A crash after the reservation loses its slot (one send fewer that second) and the message comes back."""
        if self.pacing is None:
            return now
        forwardable = self.lanes is not None and message.lane is DeliveryLane.FAST
        bounded = message.via is not Via.QUEUE or forwardable
        budget = pacing.wait_budget_us(pacing.WAIT_SECONDS, spare_seconds) / pacing.MICROS if bounded else None
        slot = self.pacing.slot(endpoint, now, budget)
        if slot is None:
            self.telemetry.count(DELIVERIES_PACED_ELSEWHERE)
            return self._paced_elsewhere(message, endpoint, now)
        if slot > now:
            self.telemetry.count(DELIVERIES_PACED)
            self.sleep((slot - now).total_seconds())
            return max(slot, self.clock())
        return now

    def _repaced(self, endpoint: Endpoint, now: datetime) -> datetime:
        """An attempt that waited out its early wake-up after its slot (`_not_before`) takes a fresh slot: its first
        one has passed, and sending now could crowd the slots after it. Claimed already, it takes the next slot
        however far (the endpoint's reserved horizon is near: domain/pacing.py); the first slot is lost, harmlessly."""
        if self.pacing is None:
            return now
        slot = self.pacing.slot(endpoint, now, None)
        if slot is not None and slot > now:
            self.sleep((slot - now).total_seconds())
            return max(slot, self.clock())
        return now

    def _paced_elsewhere(self, message: DeliveryMessage, endpoint: Endpoint, now: datetime) -> AttemptReport:
        if message.via is Via.QUEUE:
            return self._forward_one(message, endpoint)
        if message.via is Via.DRAIN:
            self.circuits.pause_drain(endpoint.tenant_id, endpoint.id, now + timedelta(seconds=pacing.WAIT_SECONDS))
            return AttemptReport(message.delivery_id, None, message.attempt, sent=False, parked=True)
        return AttemptReport(message.delivery_id, None, message.attempt, sent=False)

    # --- Delivery lanes (domain/lanes.py) ---

    def _forwards(self, message: DeliveryMessage, endpoint: Endpoint, *, late: bool) -> bool:
        """A fast lane's message for an endpoint that is slow, or whose message group has a message waiting in the
        slow lane, or that its batch has no time left to attempt. (An open circuit parks it where it is instead: no
        send at all.)"""
        return self._forwardable(message, endpoint) and (
            late or endpoint.lane is DeliveryLane.SLOW or self._behind_tail(message, endpoint)
        )

    def _forwardable(self, message: DeliveryMessage, endpoint: Endpoint) -> bool:
        return (
            self.lanes is not None
            and message.lane is DeliveryLane.FAST
            and message.via is Via.QUEUE
            and endpoint.state is EndpointState.ENABLED
            and endpoint.circuit is CircuitState.CLOSED
        )

    def _behind_tail(self, message: DeliveryMessage, endpoint: Endpoint) -> bool:
        """Whether the group has a message waiting in the slow lane: its tail is read only if the endpoint marks it.
        A mark whose tail is settled is taken off, so the group's next messages read nothing (only this group's
        messages, one at a time, write its tail and mark: none can be added between this read and the attempt)."""
        assert self.lanes is not None  # _forwardable said so
        group = message.group_id
        if group in endpoint.slow_tails:  # kept in the endpoint's item before the tails' table
            return True
        mark = lanes.tail_mark(endpoint.id, group)
        if mark not in endpoint.tail_marks:
            return False
        if self.lanes.tails.tail(group) is not None:
            return True
        try:
            self.endpoints.unmark_slow_tail(endpoint.tenant_id, endpoint.id, mark)
        except Exception as error:  # a mark left on costs the group's next message one read, nothing else
            self.telemetry.bookkeeping_failed(LANE_ERRORS, message.delivery_id, error)
        return False

    def _forward_one(self, message: DeliveryMessage, endpoint: Endpoint) -> AttemptReport:
        [report] = self._forward([message], endpoint)
        return report

    def _forward(self, run: Sequence[DeliveryMessage], endpoint: Endpoint) -> list[AttemptReport]:
        """The group's tail first (naming the run's last message), then its mark on the endpoint if it has none, then
        one send of the run, in order: a crash before the send leaves the messages in the fast lane, to come back
        first in their group and be forwarded again (same tail, same deduplication ids); a crash after the send,
        likewise: the slow lane's queue drops the copies it already holds (deduplication), and a copy that gets
        through finds its attempt made and sends nothing. The mark as read stands: only this group's messages take
        it off, and this one is theirs."""
        assert self.lanes is not None  # _forwards said so
        last = run[-1]
        self.lanes.tails.name(last.group_id, lanes.message_key(last.delivery_id, last.attempt))
        mark = lanes.tail_mark(endpoint.id, last.group_id)
        if mark not in endpoint.tail_marks:
            self.endpoints.mark_slow_tail(endpoint.tenant_id, endpoint.id, mark)
        self.lanes.queue.enqueue([replace(m, lane=DeliveryLane.SLOW, shard=endpoint.queue_shard) for m in run])
        self.telemetry.count(DELIVERIES_FORWARDED, len(run))
        return [AttemptReport(m.delivery_id, None, m.attempt, sent=False, forwarded=True) for m in run]

    def _settle_forwarded(self, message: DeliveryMessage, endpoint: Endpoint) -> None:
        """The message is settled in the slow lane: its group has nothing waiting there any more, unless a later
        message was forwarded since (the tail then names that one, and stays). Only after the settling, so a crash
        first brings the message back (it sends nothing again) and clears the tail then. A forwarded message waits
        behind its group's mark, and the mark stays while its tail does: an endpoint read after the message came
        without the mark means the message was no forward (a probe's or a drain's), with nothing to clear."""
        key = lanes.message_key(message.delivery_id, message.attempt)
        if endpoint.slow_tails.get(message.group_id) == key:
            self.endpoints.clear_legacy_slow_tail(endpoint.tenant_id, endpoint.id, message.group_id, key)
        if self.lanes is not None and lanes.tail_mark(endpoint.id, message.group_id) in endpoint.tail_marks:
            self.lanes.tails.clear(message.group_id, key)

    def _follow_lane(self, endpoint: Endpoint, message: DeliveryMessage, result: SendResult) -> None:
        """Move the endpoint to the slow lane after a slow attempt in the fast lane; back after a quick one in the
        slow lane (a probe's and a drain's are there too)."""
        if self.lanes is None:
            return
        threshold = self.lanes.slow_after_ms
        in_slow_lane = message.lane is DeliveryLane.SLOW or message.via is not Via.QUEUE
        if endpoint.lane is DeliveryLane.FAST and not in_slow_lane:
            to, metric = DeliveryLane.SLOW, LANE_SLOWED
            switches = lanes.slows(result.latency_ms, result.error, threshold)
        elif endpoint.lane is DeliveryLane.SLOW and in_slow_lane:
            to, metric = DeliveryLane.FAST, LANE_QUICKENED
            switches = lanes.quickens(result.latency_ms, result.error, threshold)
        else:
            return
        if switches and self.endpoints.switch_lane(endpoint.tenant_id, endpoint.id, to):
            self.telemetry.count(metric)

    def _event_of(self, message: DeliveryMessage, delivery: Delivery) -> Event:
        """The event the message carries (ingest sends small ones along with the first attempt), or the stored one.
        Events never change once stored but for their expiry, which only grows: a carried copy's may be short of
        the stored one, and `_keep_event` then asks to extend it, conditionally, which cannot shorten it."""
        if message.event is not None and message.event.id == delivery.event_id:
            return message.event
        event = self.events.get(delivery.tenant_id, delivery.event_id)
        if event is None:  # cannot happen while the event outlives its deliveries; never send nothing
            raise LookupError(f"event {delivery.event_id} of delivery {delivery.id} is missing")
        return event

    def _endpoint_of(self, message: DeliveryMessage, reads: BatchReads | None = None) -> Endpoint | None:
        """The endpoint the message's delivery goes to, read before any claim (the circuit decides first); shared
        with the batch's other groups' first messages when `reads` is given."""
        endpoint_id = message.endpoint_id
        if endpoint_id is None:  # a message from before the circuit: one more read
            delivery = self._current(message)
            if delivery is None:
                return None
            endpoint_id = delivery.endpoint_id
        read = partial(self.endpoints.get, message.tenant_id, endpoint_id)
        return read() if reads is None else reads.read((message.tenant_id, endpoint_id), read)

    def _current(self, message: DeliveryMessage) -> Delivery | None:
        """The message's delivery as it is now (a consistent read), if it is the message's tenant's."""
        return self.deliveries.get(message.delivery_id, message.tenant_id)

    def _claim(self, message: DeliveryMessage, now: datetime, endpoint: Endpoint | None = None) -> Delivery | None:
        """The delivery, claimed for the message's attempt; or, for a first attempt off the queue, read and left
        unclaimed (`domain.lifecycle.claims_late`: `_send` claims it if it runs long, `_record` settles it). None if
        the attempt is not this message's to make."""
        if claims_late(message.via, message.attempt, message.reply_to):
            # Eventually consistent first, at half the price. What could have moved the delivery on within the last
            # second is another worker holding a copy of this message, which the queue does not hand out (FIFO drops
            # copies for five minutes; a message comes back only after its visibility timeout): a read showing it
            # awaiting this attempt is as good as a consistent one, and the settle write's condition checks again.
            # No record at all is the happy path's: a logged event's fan-out, read from the event the message carries
            # (`_unstored`), its record written by the settle. Anything else may be a read a moment behind (a delivery
            # just written): read it again, consistently.
            current = self.deliveries.peek(message.delivery_id) or self._unstored(message, endpoint)
            if current is None or not attemptable_unclaimed(current, message.tenant_id, message.attempt):
                current = self._current(message)
            if current is not None and attemptable_unclaimed(current, message.tenant_id, message.attempt):
                return replace(current, claimed_at=None)
            if current is None or current.status is not DeliveryStatus.ATTEMPTING:
                return None  # made, ended, parked or not the tenant's: no claim write would pass
            # `attempting`: a worker died holding its (late) claim; the claim below takes it over once stale.
        if message.via is Via.QUEUE or message.endpoint_id is None:
            return self.deliveries.claim(
                message.delivery_id, message.tenant_id, message.attempt, now, now - self.claim_timeout
            )
        # The drain's and the probe's: the delivery is parked, and leaves the lot (the probe's keeps its entry).
        claimed = self.parking.lot.claim(
            message.delivery_id,
            message.tenant_id,
            message.endpoint_id,
            message.attempt,
            now,
            keep_entry=message.via is Via.PROBE,
        )
        if claimed is not None:
            return claimed
        # Not parked any more. If a drain or probe worker died after claiming it and before recording the attempt,
        # it is `attempting` with nothing else to carry it: this message (come back after its visibility timeout,
        # or the probe's command sent again) takes the stale claim over, as a queue message's claim does.
        return self.deliveries.claim(
            message.delivery_id, message.tenant_id, message.attempt, now, now - self.claim_timeout
        )

    def _unstored(self, message: DeliveryMessage, endpoint: Endpoint | None) -> Delivery | None:
        """The delivery of a first message whose delivery has no record, as its logged event made it (with the group
        the message was sent in, and its endpoint's queue shard: both what ingest gave it), from the event the
        message carries; None when it carries none, or not this delivery's event. If the delivery was stored after
        all (written a moment ago, not yet readable here), the settle's write finds its record and its condition
        decides, as after any read."""
        event = message.event
        if event is None or endpoint is None or event.tenant_id != message.tenant_id:
            return None
        unstored = unstored_fan_out(event, endpoint.id, message.group_id, endpoint.queue_shard)
        # A keyed event's deliveries are always stored by ingest: nothing to create (`may_stay_unstored`, the rule
        # the late claim and the adapter keep too).
        return unstored if unstored.id == message.delivery_id and may_stay_unstored(unstored) else None

    def _transmission(
        self, endpoint: Endpoint, delivery: Delivery, event: Event, headers: dict[str, str]
    ) -> Callable[[], SendResult]:
        """The attempt's send, to a webhook or to an AWS destination (domain/destinations.py), not yet made."""
        body = event.body.encode()
        if endpoint.role_arn is None or not is_aws_target(endpoint.url):
            post = self.requests.send if self.requests is not None else self._unauthenticated
            return partial(post, endpoint, headers, body)
        if self.destinations is None:  # a deployment always has them; a fake without them fails the attempt
            return lambda: SendResult(None, 0, FailureKind.BLOCKED, "AWS destinations are not available")
        message = DestinationMessage(
            body=body,
            headers=headers,
            event_type=event.type,
            group=event.ordering_key or endpoint.id,
            deduplication_id=delivery.id,
        )
        return partial(
            self.destinations.send,
            endpoint.url,
            endpoint.role_arn,
            external_id(endpoint.tenant_id),
            session_name(endpoint.id),
            message,
        )

    def _send(
        self, delivery: Delivery, message: DeliveryMessage, transmit: Callable[[], SendResult]
    ) -> tuple[SendResult, Delivery]:
        """Send the attempt; one made unclaimed is claimed if it has not answered within `claim_after`, so that
        it is seen `attempting` while it runs long. Returns the delivery as `_record` settles it: claimed (late or
        before), or unclaimed with `claimed_at` the late claim's time when its write failed (it may have applied).

        The claim is written here, on the invocation's own thread, while the send waits on another. If the process
        dies before the claim, the delivery is still `queued`; after it, `attempting` until the claim is stale: either
        way the message comes back and the attempt is made again (domain/lifecycle.py, the crash rules)."""
        if delivery.status is DeliveryStatus.ATTEMPTING:
            return transmit(), delivery
        sending = self._senders.submit(contextvars.copy_context().run, transmit)
        try:
            return sending.result(timeout=self.claim_after.total_seconds()), delivery
        except StillSending:
            pass
        delivery = self._late_claim(delivery, message)  # while the send goes on
        return sending.result(), delivery

    def _unauthenticated(self, endpoint: Endpoint, headers: dict[str, str], body: bytes) -> SendResult:
        """The send of a service wired without `requests`: for endpoints without auth only, never sent without it."""
        if endpoint.auth is not None:
            raise RuntimeError("an endpoint with auth needs the delivery service's `requests` (wiring.py)")
        return self.sender.send(endpoint.url, headers, body)

    def _late_claim(self, delivery: Delivery, message: DeliveryMessage) -> Delivery:
        """Claim an unclaimed attempt in flight. Its claim is the usual one (so a stale one is taken over as any
        is); a condition that fails leaves it unclaimed (the settle's own condition then decides), and a write that
        errs leaves it unclaimed with the claim's time, which the settle accepts too, in case the write applied."""
        now = self.clock()
        try:
            # A delivery read as its event made it may have no record yet: the claim then creates it, claimed.
            unstored = delivery if may_stay_unstored(delivery) else None
            claimed = self.deliveries.claim(
                delivery.id, delivery.tenant_id, message.attempt, now, now - self.claim_timeout, unstored
            )
        except Exception as error:  # the attempt is in flight: recording it matters more than showing it
            self.telemetry.bookkeeping_failed(LATE_CLAIM_ERRORS, delivery.id, error)
            return replace(delivery, claimed_at=now)
        return claimed or delivery

    def _claim_stranded(
        self, message: DeliveryMessage, endpoint: Endpoint | None, current: Delivery | None, now: datetime
    ) -> Delivery | None:
        """A queue message whose delivery is still marked parked although the circuit was just read closed: its
        parker died between its lot entry and the read that would have seen the close (services/parking.py), and
        nothing else would release it, since only open circuits are swept and drained. Taken back out, it is claimed
        and attempted now, as that parker would have had it. Read only when the claim failed (rare: a duplicate or
        a message whose attempt is taken)."""
        if (
            message.via is not Via.QUEUE
            or endpoint is None
            or endpoint.state is not EndpointState.ENABLED
            or endpoint.circuit is not CircuitState.CLOSED
        ):
            return None
        if current is None or current.parked_at is None or not self.parking.lot.unpark(current.id, endpoint.id):
            return None
        return self._claim(message, now)

    def _park_message(self, message: DeliveryMessage, endpoint: Endpoint, now: datetime) -> AttemptReport | None:
        """Park the delivery instead of attempting it; None if the circuit closed meanwhile (attempt it then)."""
        status = DeliveryStatus.RETRYING if message.attempt > 1 else DeliveryStatus.QUEUED
        held = AttemptReport(message.delivery_id, status, message.attempt, sent=False, parked=True)
        if message.via is Via.DRAIN:
            return held  # released but held back (a pause, or the circuit reopened): it never left the index
        # A first message's delivery may have no record yet: read from its event, the park stores it parked.
        unstored = self._unstored(message, endpoint)
        outcome = self.parking.park(message.delivery_id, message.tenant_id, endpoint.id, message.attempt, now, unstored)
        if outcome is ParkOutcome.CIRCUIT_CLOSED:
            return None
        if outcome is ParkOutcome.NOT_PARKABLE:
            return self._not_claimed(message, self._current(message))
        if outcome is ParkOutcome.PARKED:
            self.telemetry.count(DELIVERIES_PARKED)
        if message.reply_to:
            self.workflow.parked(message.reply_to)  # the retry execution ends: the probe workflow carries it
        return held

    def _track_failing_spell(self, endpoint: Endpoint, *, delivered: bool, at: datetime) -> None:
        """Start the endpoint's failing spell on a failure while healthy, end it on a success while failing.

        The endpoint record changes only on those transitions, never on every attempt; both writes are
        conditional, so racing workers agree on the spell's start. A missed transition is caught up by the
        next attempt's, so an error here is counted, not retried.
        """
        if delivered and endpoint.failing_since is not None:
            self._announce_recovery(endpoint, at)
            self.endpoints.mark_recovered(endpoint.tenant_id, endpoint.id)
        elif not delivered and endpoint.failing_since is None:
            self.endpoints.mark_failing(endpoint.tenant_id, endpoint.id, at)

    def _announce_recovery(self, endpoint: Endpoint, at: datetime) -> None:
        """`hookrelay.endpoint.recovered`, for a spell the tenant was told about (`failure_notice`, read fresh: the
        sweeper may have noticed the spell since this attempt read the endpoint).

        Emitted before the spell is cleared: if the process dies between the two (or the emit fails: the caller
        counts it), the spell still runs and the next success emits again, converging on the same event (its id is
        derived from the spell), then clears it. Cleared first, a crash would lose the event for good."""
        if self.platform_events is None:
            return
        fresh = self.endpoints.get(endpoint.tenant_id, endpoint.id)
        if fresh is not None and fresh.failing_since == endpoint.failing_since and fresh.failure_notice is not None:
            self.platform_events.emit(platform_events.recovered(fresh, at=at))

    def _not_before(self, due: datetime | None, now: datetime) -> datetime:
        """Wait out an early wake-up (bounded): a retry is never made before its next_attempt_at."""
        if due is None or due <= now:
            return now
        self.sleep(min(due - now, EARLY_WAKE_TOLERANCE).total_seconds())
        return self.clock()

    def _record(
        self,
        delivery: Delivery,
        event: Event,
        message: DeliveryMessage,
        endpoint: Endpoint,
        started: datetime,
        result: SendResult,
        span: TraceContext | None = None,
    ) -> AttemptReport:
        rule = rule_for(result.status_code, result.error)
        finished = self.clock()
        failed_hard = rule.outcome is Outcome.RETRY_LIMITED or any(
            earlier.outcome is Outcome.RETRY_LIMITED for earlier in delivery.attempts
        )
        decision = self._decide(
            rule, message.attempt, failed_hard, delivery.first_attempt_at or started, started, finished, result
        )
        terminal = decision.status.is_terminal
        attempt = Attempt(
            number=message.attempt,
            started_at=started,
            latency_ms=result.latency_ms,
            status_code=result.status_code,
            error=result.error,
            error_detail=result.error_detail,
            response_excerpt=result.response_excerpt,
            outcome=rule.outcome,
            retry_after=decision.retry_after,
        )
        record = AttemptRecord(
            attempt=attempt,
            status=decision.status,
            next_attempt_at=decision.next_attempt_at,
            completed_at=finished if terminal else None,
            expires_at=retention_expiry(finished) if terminal else None,
        )
        # Unclaimed (a first attempt that answered in time, or whose late claim was not known to apply): this one
        # write claims and records it. `_claim` says why no other worker can have made it meanwhile.
        # A first attempt's delivery may have no record yet (`_unstored`): this write then creates it, settled.
        unclaimed = (
            Unclaimed(delivery.claimed_at, self._unstored(message, endpoint))
            if delivery.status is not DeliveryStatus.ATTEMPTING
            else None
        )
        if not self.deliveries.record_attempt(delivery.id, delivery.tenant_id, message.attempt, record, unclaimed):
            # Our claim went stale and another worker took the attempt over: its record stands.
            return self._not_claimed(message, self._current(message))
        if terminal:
            self._keep_event(event, finished)
        if decision.status is DeliveryStatus.DEAD:
            ended = replace(
                delivery, status=decision.status, completed_at=finished, attempts=[*delivery.attempts, attempt]
            )
            self._dead_letter(ended)
        parked = self._settle(delivery, message, endpoint, rule, decision, finished)
        if decision.status is DeliveryStatus.DELIVERED:
            self._recover_original(delivery, finished)
        return AttemptReport(
            delivery.id,
            decision.status,
            message.attempt,
            sent=True,
            next_attempt_at=decision.next_attempt_at,
            parked=parked,
            outcome=rule.outcome,
            retry_after=decision.retry_after,
            span=span,
            made=attempt,
            endpoint_id=endpoint.id,
            event_type=event.type,
        )

    def _settle(
        self,
        delivery: Delivery,
        message: DeliveryMessage,
        endpoint: Endpoint,
        rule: ResponseRule,
        decision: Decision,
        now: datetime,
    ) -> bool:
        """The one exit after an attempt is recorded: the circuit learns the outcome, then the delivery is either
        parked behind it or handed to its retry workflow. True if it was parked.

        A crash after the record and before the park or the hand-over leaves the delivery `retrying` with nothing
        carrying it: the message comes back (it was not deleted) and `_not_claimed` starts its retry workflow,
        which parks it on waking if the circuit is open then.
        """
        if rule.outcome is Outcome.DELIVERED:
            if endpoint.circuit_failures and message.via is Via.QUEUE:
                self.circuits.reset_failures(endpoint.tenant_id, endpoint.id)
        elif (
            decision.status is DeliveryStatus.RETRYING
            and circuit.counts_toward_opening(rule.outcome)
            and self._circuit_failed(endpoint, message, decision, now)
        ):
            outcome = self.parking.park(delivery.id, delivery.tenant_id, endpoint.id, message.attempt + 1, now)
            if outcome is not ParkOutcome.CIRCUIT_CLOSED:
                if message.reply_to:
                    self.workflow.parked(message.reply_to)
                return True
        self._hand_over(delivery, message, decision.status, decision.next_attempt_at)
        return False

    def _circuit_failed(self, endpoint: Endpoint, message: DeliveryMessage, decision: Decision, now: datetime) -> bool:
        """A retriable failure: count it, open the circuit at the threshold, reopen or pause a drain. True when
        the delivery should be parked (the circuit is open or draining now) rather than retried on its own."""
        if message.via is Via.PROBE:
            return True  # the probe workflow decides what the circuit does; the delivery goes back to the lot
        if message.via is Via.DRAIN or endpoint.circuit is CircuitState.DRAINING:
            if decision.retry_after is not None:
                until = now + timedelta(seconds=min(decision.retry_after, self.schedule.effective_retry_after_cap))
                if self.circuits.pause_drain(endpoint.tenant_id, endpoint.id, until):
                    self.telemetry.count(DRAIN_PAUSED)
                    return True
            # The same outage: its probes go on where the schedule was, never back to its short first gaps.
            due = circuit.next_probe_after_failure(
                self.schedule,
                opened_at=endpoint.circuit_opened_at or now,
                probes_made=endpoint.probes_made,
                now=now,
                retry_after=decision.retry_after,
            )
            if self.circuits.reopen(endpoint, due):
                self.telemetry.count(CIRCUIT_REOPENED)
            return True
        counted = self.circuits.count_failure(endpoint.tenant_id, endpoint.id, message.delivery_id)
        if counted is None:  # not closed any more (a racing worker opened it) or not enabled: the park decides
            return True
        if counted.circuit_failures < circuit.OPEN_AFTER_FAILURES:
            return False
        due = circuit.next_probe_at(
            self.schedule, opened_at=now, probes_made=0, now=now, retry_after=decision.retry_after
        )
        if self.circuits.open(counted, now, due, circuit.OPEN_AFTER_FAILURES):
            # A crash before the start leaves the circuit open with no workflow: the sweeper restarts it.
            step = counted.circuit_step + 1
            kind = CircuitCommandKind.PROBE
            command = CircuitCommand(counted.tenant_id, counted.id, step, kind, due, shard=counted.queue_shard)
            self.workflow.start_probe(command)
            self.telemetry.count(CIRCUIT_OPENED)
            self._park_earlier_failures(counted, message.delivery_id, now)
            # Its webhook (`hookrelay.endpoint.circuit_opened`) is the probe workflow's to emit, on its first command
            # (services/circuit.py): nothing more here, where parking the failures races their retry workflows.
        return True

    def _park_earlier_failures(self, endpoint: Endpoint, opener: str, now: datetime) -> None:
        """The deliveries whose failures opened the circuit wait in their own retry workflows: park them now, so the
        probe starts with the oldest event. (A crash first leaves them to park when their workflows wake.)"""
        for delivery_id in dict.fromkeys(endpoint.circuit_failed):
            parked = delivery_id != opener and self.parking.park(
                delivery_id, endpoint.tenant_id, endpoint.id, None, now
            )
            if parked is ParkOutcome.PARKED:
                self.workflow.stop(delivery_id)

    def _decide(
        self,
        rule: ResponseRule,
        attempt_number: int,
        failed_hard: bool,
        first_attempt_at: datetime,
        started: datetime,
        finished: datetime,
        result: SendResult,
    ) -> Decision:
        """The response table and the schedule, applied to one attempt's result.

        `failed_hard`: this attempt or an earlier one was a hard failure (3xx, most 4xx), after which the
        delivery gets at most HARD_FAILURE_ATTEMPT_CAP attempts in all, whatever the later ones answer.
        """
        if rule.outcome is Outcome.DELIVERED:
            return Decision(DeliveryStatus.DELIVERED)
        if failed_hard and attempt_number >= HARD_FAILURE_ATTEMPT_CAP:
            return Decision(DeliveryStatus.DEAD)
        retry_after = parse_retry_after(result.retry_after, finished) if rule.honours_retry_after else None
        next_attempt_at = self.schedule.next_attempt_at(
            first_attempt_at=first_attempt_at,
            attempts_made=attempt_number,
            now=finished,
            attempt_started=started,
            retry_after=retry_after,
        )
        if next_attempt_at is None:
            return Decision(DeliveryStatus.DEAD, retry_after=retry_after)
        return Decision(DeliveryStatus.RETRYING, next_attempt_at, retry_after)

    def _keep_event(self, event: Event, ended_at: datetime) -> None:
        """The event must outlive every delivery of it by the redrive window; extend it only when it would not."""
        expires_at = retention_expiry(ended_at)
        if expires_at > event.expires_at:
            self.events.extend_expiry(event.tenant_id, event.id, expires_at)

    def _recover_original(self, replay: Delivery, at: datetime) -> None:
        """A replay delivered recovers the delivery it replays: the original (if dead or cancelled) is marked
        `recovered_by` it, a conditional update of the original, so that later redrives skip it.

        Two writes, the replay's record (delivered) and then this one, not a transaction. If the process dies
        between them (or this write fails: it raises, and the invocation with it), the message was not deleted and
        comes back; its claim fails (the attempt is recorded) and `_not_claimed` marks the original then, once
        (conditional on not being marked). Should the message never come back, the next redrive of the original's
        window finds the delivered replay among its event's deliveries and marks it then, skipping it
        (services/redrive.py): a replay delivered is never sent again by a redrive that did not ask for it."""
        if replay.replay_of is not None:
            self.deliveries.mark_recovered(replay.replay_of, replay.tenant_id, replay.id, at)

    def _dead_letter(self, dead: Delivery) -> None:
        """Record why the delivery died, then count it (a metric and a log line; no queue message: the record is
        the one truth of "dead"). Whoever records it counts it, so a message received again counts nothing. If
        the process dies between the attempt's record and this one, the message comes back and `_not_claimed`
        records it; between this record and the count, the count is one short (a metric, never a delivery)."""
        if self.deliveries.mark_dead_lettered(dead.id, self.clock(), DeadReason.EXHAUSTED):
            self.dead_letters.publish(dead, DeadReason.EXHAUSTED)

    def _hand_over(
        self, delivery: Delivery, message: DeliveryMessage, status: DeliveryStatus, next_attempt_at: datetime | None
    ) -> None:
        """Start the retry workflow after a first failure, or answer the execution that sent this attempt."""
        ticket = (
            RetryTicket(
                delivery.id,
                delivery.tenant_id,
                retry_group_id(delivery.id),
                message.attempt + 1,
                next_attempt_at,
                delivery.endpoint_id,
                shard=delivery.queue_shard,
            )
            if next_attempt_at is not None
            else None
        )
        if message.reply_to:
            self._answer(message.reply_to, status, ticket)
        elif ticket is not None:
            self.workflow.start(ticket)

    def _answer(
        self, reply_to: str, status: DeliveryStatus, ticket: RetryTicket | None, *, may_resume: bool = True
    ) -> None:
        """Answer the execution that sent the attempt; if it no longer listens while the delivery is still
        retrying, start a fresh execution for the next attempt, since nothing else ever would.

        The token dies when its task times out: the execution then re-sends the attempt (a message that is
        answered too, so for a while two executions may carry the delivery; an attempt is still made once),
        or, after its last re-send, fails with AttemptLost.
        """
        if not self.workflow.report(reply_to, status, ticket) and ticket is not None and may_resume:
            self.workflow.resume(ticket)

    def _cancel(self, delivery: Delivery, message: DeliveryMessage, now: datetime) -> AttemptReport:
        self.deliveries.set_status(
            delivery.id, delivery.tenant_id, DeliveryStatus.CANCELLED, now, retention_expiry(now)
        )
        self.events.extend_expiry(delivery.tenant_id, delivery.event_id, retention_expiry(now))
        if message.reply_to:
            self._answer(message.reply_to, DeliveryStatus.CANCELLED, None)
        return AttemptReport(delivery.id, DeliveryStatus.CANCELLED, message.attempt, sent=False)

    def _not_claimed(self, message: DeliveryMessage, current: Delivery | None) -> AttemptReport:
        """A message for an attempt in flight elsewhere or already made: send nothing, record nothing.

        What the delivery is now still gets passed on, so that nothing is stranded: a re-sent workflow
        message is answered with the current state, and a first-attempt message that comes back after its
        attempt was recorded (the worker died before starting the workflow) starts it — a harmless no-op
        when it is already running, since the execution is named after the delivery. Likewise a message for
        the attempt that killed the delivery publishes the dead letter if the worker died before it could, and one
        for the attempt that delivered a replay marks its original recovered (`_recover_original`) likewise.
        `current`: the delivery as read after the claim failed.
        """
        if current is None or current.tenant_id != message.tenant_id:
            if message.reply_to:
                self.workflow.delivery_missing(message.reply_to, message.delivery_id)
            return AttemptReport(message.delivery_id, None, message.attempt, sent=False)
        status = current.status
        if current.parked_at is not None:  # the probe workflow carries it; a retry execution ends here
            if message.reply_to:
                self.workflow.parked(message.reply_to)
            return AttemptReport(message.delivery_id, status, message.attempt, sent=False, parked=True)
        ticket = None
        if status is DeliveryStatus.RETRYING and current.next_attempt_at is not None:
            ticket = RetryTicket(
                current.id,
                current.tenant_id,
                retry_group_id(current.id),
                current.attempt_count + 1,
                current.next_attempt_at,
                current.endpoint_id,
                shard=current.queue_shard,
            )
        latest = current.attempt_count == message.attempt  # a message for the attempt made last
        if status is DeliveryStatus.DEAD and latest and current.dead_lettered_at is None:
            self._dead_letter(current)
        if latest and recovers(current):  # its worker may have died before marking the original: again, harmless
            self._recover_original(current, current.completed_at or self.clock())
        if message.reply_to:
            # While the attempt is in flight its worker answers; this token's task times out and re-sends.
            # Only a message for the latest attempt may resume the workflow: whoever made a later one handed over.
            if status is not DeliveryStatus.ATTEMPTING:
                self._answer(message.reply_to, status, ticket, may_resume=latest)
        elif ticket is not None and latest and message.via is Via.QUEUE:
            self.workflow.start(ticket)
        elif ticket is not None and latest:
            # A drain's or probe's attempt recorded by a worker that died before parking it again: a fresh execution
            # (the delivery's first may have run already, and its name is taken) wakes it, to be parked or made.
            self.workflow.resume(ticket)
        return AttemptReport(message.delivery_id, status, message.attempt, sent=False)
