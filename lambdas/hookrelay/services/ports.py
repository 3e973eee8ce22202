"""The ports the services are written against; `hookrelay.adapters` implements them."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from hookrelay.domain.circuit import Via
from hookrelay.domain.classification import FailureKind, Outcome
from hookrelay.domain.lifecycle import first_attempt_number
from hookrelay.domain.mailbox import MailboxEntry
from hookrelay.domain.models import (
    ApiKey,
    Attempt,
    Delivery,
    Endpoint,
    Event,
    FailureNotice,
    PortalSession,
    Tenant,
)
from hookrelay.domain.paging import BoundedCount, Position
from hookrelay.domain.platform_events import PlatformNotice
from hookrelay.domain.queues import DeliveryLane
from hookrelay.domain.redrive import Redrive
from hookrelay.domain.status import DeadReason, DeliveryStatus
from hookrelay.domain.trace_context import TraceContext

if TYPE_CHECKING:  # the event catalogue's types: only the functions serving the catalogue load them
    from hookrelay.domain.endpoint_auth import EndpointAuth
    from hookrelay.domain.event_types import EventType, Violation


class TenantRepository(Protocol):
    def put(self, tenant: Tenant) -> None: ...
    def get(self, tenant_id: str) -> Tenant | None: ...


class TenantDirectory(Protocol):
    def ids(self) -> Iterator[str]:
        """Every tenant's id (the reconciler's walk; tenants are few beside their deliveries)."""


class Checkpoints(Protocol):
    """Where a scheduled sweep has got to, by the sweep's name."""

    def get(self, name: str) -> datetime | None: ...
    def advance(self, name: str, to: datetime) -> bool:
        """Move the sweep's checkpoint to `to`, never back; False if it was already there or further."""


class ApiKeyRepository(Protocol):
    def put(self, key: ApiKey) -> None: ...
    def get(self, key_id: str) -> ApiKey | None: ...
    def revoke(self, key_id: str, at: datetime) -> bool: ...


class PortalSessionRepository(Protocol):
    def put(self, session: PortalSession) -> None: ...
    def get(self, session_id: str) -> PortalSession | None: ...


class RateCounters(Protocol):
    def take(self, counter_id: str, amount: int, limit: int, expires_at: int) -> bool:
        """Add `amount` requests to the counter; False, adding nothing, when it would then hold more than `limit`."""


class EndpointPacer(Protocol):
    """Each rate-limited endpoint's next free send slot (domain/pacing.py), in microseconds since the epoch."""

    def reserve(self, endpoint_id: str, now_us: int, interval_us: int, latest_us: int | None) -> int | None:
        """Take the endpoint's next free slot (now, if it has passed) and move it on by `interval_us`; None, taking
        nothing, when that slot lies past `latest_us`."""

    def next_free(self, endpoint_id: str) -> int | None:
        """The endpoint's next free slot as stored (None: never paced, or expired); a read, for health."""


class EndpointLists(Protocol):
    def list_for_tenant(self, tenant_id: str) -> list[Endpoint]: ...


class EndpointRepository(Protocol):
    def put(self, endpoint: Endpoint) -> None: ...
    def get(self, tenant_id: str, endpoint_id: str) -> Endpoint | None: ...
    def list_for_tenant(self, tenant_id: str) -> list[Endpoint]: ...
    def replace(self, endpoint: Endpoint, *, expected_updated_at: datetime, read: Endpoint | None = None) -> bool:
        """Write the changed endpoint only if its stored `updated_at` is still the one read; False otherwise.

        Also only if its failing spell (`failing_since`, `failure_notice`) is still the one `read` had (default:
        `endpoint`'s): those are written outside this read-change-write, by the delivery path and the sweeper.
        """

    def mark_failing(self, tenant_id: str, endpoint_id: str, since: datetime) -> bool:
        """Start a failing spell at `since`, unless one is already running or the endpoint is not enabled."""

    def mark_recovered(self, tenant_id: str, endpoint_id: str) -> bool:
        """End the failing spell (a success came through), if there is one."""

    def switch_lane(self, tenant_id: str, endpoint_id: str, to: DeliveryLane) -> bool:
        """Move the endpoint to delivery lane `to` (domain/lanes.py), if it is in the other one."""

    def mark_slow_tail(self, tenant_id: str, endpoint_id: str, mark: str) -> None:
        """Add `mark` (`lanes.tail_mark`) to the endpoint's groups that may have a message in the slow lane."""

    def unmark_slow_tail(self, tenant_id: str, endpoint_id: str, mark: str) -> None:
        """Take `mark` off: its group's tail is settled."""

    def clear_legacy_slow_tail(self, tenant_id: str, endpoint_id: str, group: str, key: str) -> bool:
        """Forget `group`'s tail in the endpoint's own map (as kept before the tails had a table of their own) if it
        is still `key`; False if another came since."""

    def page_for_tenant(
        self, tenant_id: str, limit: int, start: Position | None
    ) -> tuple[list[Endpoint], Position | None]:
        """Up to `limit` of the tenant's live (not deleted) endpoints, newest first, from `start` on; and where the
        next page starts (None: nothing after). UnknownPosition if `start` was not made for this tenant."""


class SlowTails(Protocol):
    """Per message group, the last message forwarded to the slow lane and not yet settled there (domain/lanes.py)."""

    def tail(self, group: str) -> str | None:
        """The group's tail as last written (a strongly consistent read); None if it has none."""

    def name(self, group: str, key: str) -> None:
        """Name `key` the group's tail."""

    def clear(self, group: str, key: str) -> bool:
        """Delete the group's tail if it is still `key`; False if another was named since (or there is none)."""


class EndpointCount(Protocol):
    """Each tenant's count of live endpoints, kept on its tenant record, and the writes that change it: an endpoint's
    creation and its deletion each write the endpoint and the count in one transaction (all or nothing)."""

    def counted(self, tenant_id: str) -> int | None:
        """The tenant's count (read consistently); None while it has never been counted."""

    def start_count(self, tenant_id: str, live: int) -> bool:
        """Set the count to `live` (the endpoints found by listing them) only if it has never been set."""

    def create(self, endpoint: Endpoint, limit: int) -> bool:
        """Put the new endpoint and add one to its tenant's count, only while the count is below `limit`; False
        (nothing written) otherwise, or when a concurrent write to the count cancelled the transaction."""

    def delete(self, endpoint: Endpoint, *, expected_updated_at: datetime, read: Endpoint | None = None) -> bool:
        """`EndpointRepository.replace` with the endpoint deleted, and one taken off the count, in one transaction."""


class CircuitRepository(Protocol):
    """The endpoint's circuit (domain/circuit.py): every change a conditional update, so racing workers agree.

    Each takes the endpoint as read and returns whether the change applied (or the endpoint after it).
    """

    def count_failure(self, tenant_id: str, endpoint_id: str, delivery_id: str) -> Endpoint | None:
        """One more retriable failure in a row (of that delivery), while the circuit is closed and the endpoint
        enabled; the endpoint after the count, or None when the circuit is not closed (or the endpoint not enabled)."""

    def reset_failures(self, tenant_id: str, endpoint_id: str) -> None:
        """A success while closed: the count starts again."""

    def open(self, endpoint: Endpoint, at: datetime, due_at: datetime, threshold: int) -> bool:
        """closed → open, if the failures counted reach `threshold`; a new probe workflow step."""

    def reopen(self, endpoint: Endpoint, due_at: datetime) -> bool:
        """draining → open (a released delivery failed: it counts as a failed probe); the running probe workflow
        carries on probing, on the same outage's schedule (anchored at the first opening, not restarted)."""

    def probed(self, endpoint: Endpoint, step: int, due_at: datetime) -> bool:
        """A probe failed: count it and note when the next is due (while open and still owned by `step`)."""

    def start_drain(self, endpoint: Endpoint, step: int) -> bool:
        """open → draining (a probe got through)."""

    def drained(self, endpoint: Endpoint, step: int, released: int, due_at: datetime) -> bool:
        """Count released deliveries and note when the drain looks again (while draining, owned by `step`)."""

    def pause_drain(self, tenant_id: str, endpoint_id: str, until: datetime) -> bool:
        """Hold the drain until then (a Retry-After answered during it), while draining."""

    def begin_close(self, endpoint: Endpoint, step: int) -> bool:
        """Mark the draining circuit `circuit_closing`, before the lot is read for the last time."""

    def hold_open(self, endpoint: Endpoint) -> bool:
        """Clear `circuit_closing` of a draining circuit (a delivery was parked while it closed); False if it is
        not set or the circuit is not draining any more."""

    def close(self, endpoint: Endpoint, step: int) -> bool:
        """draining → closed, only if `circuit_closing` is still set (services/parking.py)."""

    def take_over(self, endpoint: Endpoint, step: int, due_at: datetime) -> bool:
        """Hand the circuit to a fresh probe workflow (step + 1), if `step` still owns it."""

    def reset(self, endpoint: Endpoint) -> bool:
        """Back to closed for an endpoint no longer enabled (the caller has emptied its lot)."""

    def open_circuits(self) -> Iterator[Endpoint]:
        """Endpoints whose circuit is not closed (a sparse index, never a scan)."""


class FailingEndpoints(Protocol):
    """What the endpoint-health sweeper reads and writes: the failing endpoints and the notices sent."""

    def failing(self, since_before: datetime) -> Iterator[Endpoint]:
        """Enabled endpoints failing since before then, longest failing first (an index read, never a scan)."""

    def record_notice(self, endpoint: Endpoint, notice: FailureNotice) -> bool:
        """Record the notice as sent, only if the endpoint is enabled, in the same spell, and its latest notice is
        still `endpoint.failure_notice`: whoever records it first sends it, and only once."""

    def withdraw_notice(self, endpoint: Endpoint, notice: FailureNotice) -> None:
        """Undo `record_notice` (publishing failed), so that the next sweep sends it again."""


@dataclass(frozen=True)
class EndpointNoticeMessage:
    tenant_id: str
    endpoint_id: str
    kind: FailureNotice
    subject: str
    body: dict[str, object]  # sent as JSON


class EndpointNotices(Protocol):
    """The channel notices go out on, independent of the failing endpoint (SNS in AWS)."""

    def publish(self, message: EndpointNoticeMessage) -> None: ...


PLATFORM_EVENT_ERRORS = "PlatformEventErrors"  # metric: an operational webhook could not be emitted


class PlatformEvents(Protocol):
    """Platform events to the tenant's own subscribed endpoints, through the delivery pipeline
    (services/operational_events.py). Idempotent per notice: emitting one again creates nothing new."""

    def emit(self, notice: PlatformNotice) -> None: ...


class EventRepository(Protocol):
    def put(self, event: Event) -> bool:
        """Store the event unless one with its id exists (a retry of the request that stored it); True if stored."""

    def append(self, events: Sequence[tuple[Event, Sequence[Delivery]]]) -> None:
        """Store new events (ids drawn at random at their own millisecond, never derived from a request) in their
        tenants' event log, each with the deliveries it fanned out to (in one of their endpoint's message groups):
        what lists those deliveries in the delivery log, and what the ones left unstored are read from, so store
        them before the deliveries (`DeliveryRepository.put_many`'s `logged`). In batches: nothing to check, so
        nothing conditional."""

    def get(self, tenant_id: str, event_id: str) -> Event | None:
        """The tenant's event (None for another tenant's)."""

    def next_sequence(self, tenant_id: str, ordering_key: str, count: int = 1) -> int:
        """Draw `count` numbers of the (tenant, ordering key) sequence at once; the last of them (the first is
        `last - count + 1`)."""

    def extend_expiry(self, tenant_id: str, event_id: str, expires_at: int) -> None: ...


@dataclass(frozen=True)
class AttemptRecord:
    """What the delivery path writes after an attempt, conditional on still holding the claim."""

    attempt: Attempt
    status: DeliveryStatus
    next_attempt_at: datetime | None
    completed_at: datetime | None
    expires_at: int | None

    def applied_to(self, delivery: Delivery, attempt_number: int) -> Delivery:
        """The delivery as this record leaves it, recorded as attempt `attempt_number` (what every store writes)."""
        return replace(
            delivery,
            attempt_count=attempt_number,
            first_attempt_at=delivery.first_attempt_at or self.attempt.started_at,
            status=self.status,
            updated_at=self.completed_at or self.attempt.started_at,
            attempts=[*delivery.attempts, self.attempt],
            next_attempt_at=self.next_attempt_at,
            completed_at=self.completed_at,
            expires_at=self.expires_at,
            claimed_at=None,
        )


@dataclass(frozen=True)
class Unclaimed:
    """An attempt made without a claim first (`domain.lifecycle.claims_late`), settled by the record's one write on
    condition that the delivery is still claimable with the attempts before it made and not parked, or, when its
    late claim was tried (`late_claim_at`: the claim's time, whether or not the write is known to have applied),
    `attempting` for it under that very claim."""

    late_claim_at: datetime | None = None
    # The delivery as read when it had no record (`domain.lifecycle.unstored_fan_out`): the record's write creates it
    # (on condition that there is still none, or that the record it finds is as above).
    unstored: Delivery | None = None


class ParkOutcome(StrEnum):
    PARKED = "parked"
    ALREADY_PARKED = "already_parked"
    CIRCUIT_CLOSED = "circuit_closed"  # the circuit closed (or the endpoint was disabled) since it was read
    NOT_PARKABLE = "not_parkable"  # the delivery moved on: this message's attempt is taken or made


@dataclass(frozen=True)
class ParkedDelivery:
    """A delivery as its endpoint's lot shows it (written when it was parked: the claim re-checks)."""

    id: str
    tenant_id: str
    status: DeliveryStatus
    attempt_count: int
    created_at: datetime
    first_attempt_at: datetime | None
    event_order: str
    message_group_id: str


class DeliveryRepository(Protocol):
    def put_many(self, deliveries: Sequence[Delivery], logged: Collection[str] = frozenset()) -> None:
        """Store new deliveries; those in `logged` (ids) are listed by their event in the event log already, and of
        those, the ones `domain.lifecycle.may_stay_unstored` are read from it until their first write changes them.
        Every write below creates such a delivery's record as read before it changes it."""

    def get(self, delivery_id: str, tenant_id: str | None = None) -> Delivery | None:
        """The delivery. With `tenant_id` (whose it must be), also one not stored yet: a logged event's fan-out
        delivery, queued as ingest made it, is stored by the first write that changes it (adapters/event_log.py),
        and until then read from its event (a read of the tenant's events of the id's millisecond)."""

    def peek(self, delivery_id: str, tenant_id: str | None = None) -> Delivery | None:
        """`get`, eventually consistent (half the read's price): it may miss a write made within the last second."""

    def claim(
        self,
        delivery_id: str,
        tenant_id: str,
        attempt_number: int,
        now: datetime,
        stale_before: datetime,
        unstored: Delivery | None = None,
    ) -> Delivery | None:
        """Mark the delivery `attempting` for this attempt number; None if another holds or made it, or if it is
        parked behind its endpoint's circuit (only the drain and the probe take those, through the ParkingLot).
        `unstored`: the delivery as read when it may have no record (`domain.lifecycle.may_stay_unstored`): the
        claim creates it, claimed, if there is none."""

    def record_attempt(
        self,
        delivery_id: str,
        tenant_id: str,
        attempt_number: int,
        record: AttemptRecord,
        unclaimed: Unclaimed | None = None,
    ) -> bool:
        """Append the attempt and move the status on; False if the claim was lost. `unclaimed`: the attempt was made
        without a claim, and this write claims and records it at once (on that condition instead)."""

    def mark_posted(self, delivery_id: str, tenant_id: str, seq: int, at: datetime, expires_at: int) -> bool:
        """Record that the queued delivery was posted to its poll endpoint's mailbox as `seq`, to expire with its
        entry unless acknowledged before; once: False if it was posted already, or is not the tenant's or queued."""
        ...

    def set_status(
        self,
        delivery_id: str,
        tenant_id: str,
        status: DeliveryStatus,
        now: datetime,
        expires_at: int | None,
        *,
        expected: DeliveryStatus | None = None,
    ) -> bool:
        """Move the delivery to `status`; only if it is still `expected` when given. False if it was not."""

    def mark_dead_lettered(self, delivery_id: str, at: datetime, reason: DeadReason) -> bool:
        """Record why the dead delivery died, once: False if it is not dead or its death was recorded already
        (whoever records it first counts it, so a death is counted once however often it is surfaced)."""

    def mark_recovered(self, delivery_id: str, tenant_id: str, replay_id: str, at: datetime) -> bool:
        """Record that a replay of the dead (or cancelled) delivery was delivered (`recovered_by`, `recovered_at`),
        its status unchanged; once: False if it is not dead or cancelled, not the tenant's, or already recovered
        (by this replay or another: the first delivered replay is the one named)."""


class ParkedCounter(Protocol):
    def count(self, endpoint_id: str, up_to: int) -> BoundedCount:
        """How many deliveries are parked behind the endpoint's circuit, counted up to `up_to` (strongly consistent,
        reading one entry of its lot more): exact, or at least `up_to`."""


class ParkingLot(ParkedCounter, Protocol):
    """Deliveries parked behind their endpoint's circuit: each marked parked on its record, with an entry in its
    endpoint's lot that is read back in event order, strongly consistent. The two writes are not one
    transaction: a crash between them is repaired when the delivery is parked, claimed or ended again (each
    re-writes or drops the lot entry from the record's mark), and services/parking.py makes closing safe."""

    def park(
        self,
        delivery_id: str,
        tenant_id: str,
        endpoint_id: str,
        attempt_number: int | None,
        at: datetime,
        unstored: Delivery | None = None,
    ) -> ParkOutcome:
        """Park the delivery, if it still waits for attempt `attempt_number` (claimable, with attempt_number - 1
        made); with None, whichever attempt it waits for (a delivery whose retry workflow is waiting: the
        workflow ends when it wakes). PARKED, ALREADY_PARKED (its lot entry written again) or NOT_PARKABLE:
        whether the circuit still stands is the caller's to check after (services/parking.py). `unstored`: the
        delivery as read with no record (`domain.lifecycle.unstored_fan_out`), which the park stores parked."""

    def enter(self, deliveries: Sequence[Delivery]) -> None:
        """The lot entries of deliveries written parked (`parked_at` set, so their records carry the mark): ingest's
        second write of a delivery parked on arrival, in batches (services/parking.py, `park_new`)."""

    def missing(self, deliveries: Sequence[Delivery]) -> set[str]:
        """The ids of those parked deliveries whose lot entry is not there (eventually consistent reads): a crash
        came between their mark and their entry."""

    def unpark(self, delivery_id: str, endpoint_id: str) -> bool:
        """Take a parked delivery back out, unattempted (its circuit closed as it was parked); False if it was not
        parked behind that endpoint any more (the drain took it)."""

    def parked(self, endpoint_id: str, limit: int) -> list[ParkedDelivery]:
        """The endpoint's parked deliveries, oldest event first."""

    def claim(
        self,
        delivery_id: str,
        tenant_id: str,
        endpoint_id: str,
        attempt_number: int,
        now: datetime,
        *,
        keep_entry: bool = False,
    ) -> Delivery | None:
        """Claim a parked delivery for the drain or the probe, taking it out of the lot (its mark; its entry too
        unless `keep_entry`: the probe's stays until its attempt is settled, see services/circuit.py); None if it is
        not parked behind that endpoint waiting for attempt `attempt_number` (another message took it first)."""

    def forget(self, parked: ParkedDelivery, endpoint_id: str) -> None:
        """Drop the delivery's lot entry, kept by a probe's claim, once its attempt is settled (not parked again)."""

    def end(
        self,
        parked: ParkedDelivery,
        endpoint_id: str,
        status: DeliveryStatus,
        now: datetime,
        expires_at: int,
        dead_reason: DeadReason | None = None,
    ) -> Delivery | None:
        """Take a parked delivery out of the lot and end it (`dead` or `cancelled`); the ended delivery, or None
        if it was no longer parked as read. A `dead` ending's `dead_reason` is written with it, the death marked
        counted (`dead_lettered_at`) in the same write: the caller counts it next."""

    def get_many(self, delivery_ids: Sequence[str]) -> list[Delivery]:
        """Strongly consistent reads of those of `delivery_ids` that exist, in no particular order."""


@dataclass(frozen=True)
class DeliveryMessage:
    delivery_id: str
    tenant_id: str
    attempt: int
    group_id: str
    deduplication_id: str
    reply_to: str | None = None  # opaque to services: where the workflow that sent this attempt waits
    endpoint_id: str | None = None  # None in messages sent before the circuit existed: read from the delivery
    via: Via = Via.QUEUE
    # The event itself, when the message carries it (`first_attempt_message`): the attempt then reads no event.
    event: Event | None = None
    # Which delivery queue it goes to (domain/queues.py): its endpoint's shard (`Endpoint.queue_shard`, copied onto
    # each delivery), and the lane. Where it is sent only: a message read from a queue does not say its shard.
    shard: int = 0
    lane: DeliveryLane = DeliveryLane.FAST


@dataclass(frozen=True)
class AttemptReport:
    """What came of one delivery message."""

    delivery_id: str
    status: DeliveryStatus | None  # None: the delivery record does not exist
    attempt: int
    sent: bool  # False when the message was a duplicate, the delivery was cancelled, or it was parked
    next_attempt_at: datetime | None = None
    parked: bool = False  # the delivery waits behind its endpoint's circuit (after this attempt, if one was made)
    outcome: Outcome | None = None  # how the endpoint answered, when an attempt was made
    retry_after: float | None = None  # seconds, from the answer's Retry-After (429 and 503 only)
    forwarded: bool = False  # sent on to its endpoint's slow lane, unattempted (domain/lanes.py)
    span: TraceContext | None = None  # the W3C trace context the attempt sent (its trace and its own span)
    # The attempt made, when one was (`sent`), and whose: what its log line (and the local stack's terminal) shows.
    made: Attempt | None = None
    endpoint_id: str | None = None
    event_type: str | None = None


class Attempts(Protocol):
    def attempt(self, message: DeliveryMessage, *, late: bool = False) -> AttemptReport:
        """Make the attempt the message asks for, or park it behind the endpoint's open circuit."""


class DeliveryQueue(Protocol):
    def enqueue(self, messages: Sequence[DeliveryMessage]) -> None: ...


class DeadLetters(Protocol):
    """What operators see of a death beside its record: a metric and a log line (never a queue message: the
    record is the one truth of "dead", and the tenant's redrive its one way back)."""

    def publish(self, delivery: Delivery, reason: DeadReason) -> None: ...


@dataclass(frozen=True)
class SendResult:
    status_code: int | None
    latency_ms: int
    error: FailureKind | None = None
    error_detail: str | None = None
    response_excerpt: str | None = None
    retry_after: str | None = None


class WebhookSender(Protocol):
    def send(self, url: str, headers: dict[str, str], body: bytes, timeout: float | None = None) -> SendResult:
        """POST the webhook within the attempt timeout, or within `timeout` seconds when that is shorter (what is
        left of an attempt that fetched an OAuth2 token first)."""


class EndpointSender(Protocol):
    def send(self, endpoint: Endpoint, headers: dict[str, str], body: bytes) -> SendResult:
        """POST an attempt to the endpoint as it asks to be called (its auth), within the attempt timeout."""


class TokenSource(Protocol):
    """OAuth2 access tokens for endpoints' client credentials (domain/endpoint_auth.py), cached per endpoint and
    credential version until shortly before they expire."""

    def token(self, endpoint_id: str, auth: EndpointAuth, *, timeout: float, stale: str | None = None) -> str:
        """The cached token, or a new one fetched within `timeout` seconds; `stale`: a token the endpoint refused,
        never given again (a new one is fetched, unless another attempt has replaced it already). Raises
        TokenUnavailable, whose message is safe to record."""


class Mailbox(Protocol):
    """A poll endpoint's mailbox (domain/mailbox.py)."""

    def post(self, entry: MailboxEntry, expires_at: int) -> None: ...

    def after(self, endpoint_id: str, after: int, limit: int) -> list[MailboxEntry]:
        """The entries posted after `after`, oldest first."""
        ...

    def through(self, endpoint_id: str, through: int, limit: int) -> list[MailboxEntry]:
        """The entries up to `through` (the acknowledged ones still there), oldest first."""
        ...

    def remove(self, endpoint_id: str, seq: int) -> None: ...


@dataclass(frozen=True)
class DestinationMessage:
    """One attempt for an AWS destination (domain/destinations.py): the webhook's body and signature headers (as
    message attributes where the destination has them), and what a FIFO queue or topic needs."""

    body: bytes
    headers: dict[str, str]
    event_type: str
    # The FIFO message group: the event's ordering key, else the endpoint's (its deliveries arrive in our order).
    group: str
    # The delivery's id: an attempt made again after an answer was lost is not delivered twice (FIFO's 5 minutes).
    deduplication_id: str


class DestinationSender(Protocol):
    def send(self, url: str, role_arn: str, external_id: str, session: str, message: DestinationMessage) -> SendResult:
        """Send to the destination `url` (an ARN) as `role_arn`, assumed with `external_id`."""
        ...


@dataclass(frozen=True)
class RetryTicket:
    """What the retry workflow needs to schedule the next attempt."""

    delivery_id: str
    tenant_id: str
    group_id: str
    attempt: int  # the number of the next attempt
    next_attempt_at: datetime
    endpoint_id: str | None = None
    shard: int = 0  # the delivery's queue shard: the workflow sends each attempt to that shard's fast lane


class CircuitCommandKind(StrEnum):
    PROBE = "probe"  # attempt the oldest parked delivery
    DRAIN = "drain"  # release the next window of parked deliveries, or close the circuit
    DONE = "done"  # the workflow ends: the circuit closed, or another workflow owns it now


@dataclass(frozen=True)
class CircuitCommand:
    """One step of an endpoint's probe workflow, and (as the answer) the next one and when it is due."""

    tenant_id: str
    endpoint_id: str
    step: int  # the circuit_step of the workflow that sends it: a stale workflow's command does nothing
    kind: CircuitCommandKind
    due_at: datetime
    released: tuple[str, ...] = ()  # deliveries the drain released that had not ended at the last look
    commands: int = 0  # commands this workflow has run (it hands over to a fresh one past a limit)
    reply_to: str | None = None
    shard: int = 0  # the endpoint's queue shard: the workflow sends each command to that shard's slow lane


class RetryWorkflow(Protocol):
    """The retry protocol: per-delivery retry workflows and per-endpoint probe workflows (Step Functions in AWS).

    How a workflow is named, started and answered is the adapter's business; services pass `reply_to` back.
    """

    def start(self, ticket: RetryTicket) -> None:
        """Start the retry execution for a delivery (idempotent per delivery)."""

    def resume(self, ticket: RetryTicket) -> None:
        """Start a fresh execution for the ticket's attempt, when the one that asked for the attempt before no
        longer listens (idempotent per delivery and attempt)."""

    def report(self, reply_to: str, status: DeliveryStatus, ticket: RetryTicket | None) -> bool:
        """Tell a waiting execution how the attempt it asked for ended; False if nothing waits on this token any
        more (its task timed out: the execution re-sent the attempt, or has failed since)."""

    def parked(self, reply_to: str) -> bool:
        """Tell a waiting retry execution that its delivery is parked behind the circuit: it ends, the probe
        workflow carries the delivery from here."""

    def delivery_missing(self, reply_to: str, delivery_id: str) -> None:
        """Tell a waiting execution its attempt cannot be made at all (the delivery is gone)."""

    def stop(self, delivery_id: str) -> None:
        """End a delivery's first retry execution early: its delivery was parked while the execution waited, and
        it would only wake to be told so (each wake is paid for in state transitions). Nothing if it has ended."""

    def start_probe(self, command: CircuitCommand) -> None:
        """Start the probe workflow of an endpoint's circuit at `command` (idempotent per endpoint and step)."""

    def probe_running(self, endpoint_id: str, step: int) -> bool:
        """Whether the probe workflow of that endpoint and step is still running."""

    def answer(self, reply_to: str, command: CircuitCommand) -> bool:
        """Give the probe workflow its next command; False if it no longer waits on `reply_to`."""


# Metric: deliveries that went into the lot, counted by the function that parked them (ingest, on arrival; the
# delivery function, a queued message), each under its own service: the total is the sum of both.
DELIVERIES_PARKED = "DeliveriesParked"
DELIVERIES_POSTED = "DeliveriesPosted"  # a poll endpoint's, to its mailbox (domain/mailbox.py)
# Metrics: what ingest takes in, per request, counted by its handler and graphed by the stack's dashboard (the intake).
EVENTS_ACCEPTED = "EventsAccepted"
DELIVERIES_CREATED = "DeliveriesCreated"
BATCH_ITEMS_REFUSED = "BatchItemsRefused"
INTAKE_METRICS = (EVENTS_ACCEPTED, DELIVERIES_CREATED, BATCH_ITEMS_REFUSED)


class DeliveryTelemetry(Protocol):
    """What operators see of the delivery path beside its records: logs and metrics."""

    def count(self, metric: str, value: int = 1) -> None:
        """Add to a count metric (the circuit's opens, closes, parked and drained deliveries)."""

    def bookkeeping_failed(self, metric: str, delivery_id: str, error: Exception) -> None:
        """A secondary write failed after the attempt was recorded and handed over: log it, count it, carry on."""


# --- The delivery log, replay and redrive ---


@dataclass(frozen=True)
class DeliveryFilter:
    """Which deliveries a log read or a redrive covers; always within one tenant."""

    tenant_id: str
    status: DeliveryStatus | None = None
    endpoint_id: str | None = None
    event_id: str | None = None
    since: datetime | None = None  # inclusive, over created_at
    until: datetime | None = None  # exclusive, over created_at
    ended_before: datetime | None = None  # only deliveries that had ended by then (a redrive's snapshot)
    # Only deliveries recovered (True: `recovered_by` set, a replay of them delivered) or not yet recovered (False).
    recovered: bool | None = None


@dataclass(frozen=True)
class DeliveryPage:
    deliveries: list[Delivery]
    resume_after: Position | None  # where the next page starts; None when there is nothing after this page


class UnknownPosition(ValueError):
    """A position the log did not make for this filter (another query's, or forged)."""


class DeliverySearch(Protocol):
    """Reading deliveries by index, newest first, never returning expired records: all that health and the
    auto-disable notices need of the log."""

    def find(self, where: DeliveryFilter, limit: int, start: Position | None, now: datetime) -> DeliveryPage:
        """Up to `limit` deliveries from `start` on; UnknownPosition if `start` did not come from `find(where, …)`.
        Not for an event's deliveries (`where.event_id`): see `DeliveryLog.find_of_event`."""


class DeliveryLog(DeliveryRepository, DeliverySearch, Protocol):
    """The deliveries, written and read by index."""

    def count(self, where: DeliveryFilter, now: datetime, up_to: int) -> BoundedCount:
        """The deliveries matching `where` among at most `up_to` of its log entries (newest first): exact when the
        entries ran out before, else a floor."""

    def find_of_event(
        self, where: DeliveryFilter, fan_out: Sequence[str], limit: int, start: Position | None, now: datetime
    ) -> DeliveryPage:
        """As `find`, for `where.event_id`: `fan_out` are the ids of the event's fan-out deliveries (derived from the
        event and each of the tenant's endpoints), which are found by key rather than by index."""

    def put_new(self, delivery: Delivery) -> bool:
        """Create the delivery unless one with its id exists (idempotent creation); True if created."""


@dataclass(frozen=True)
class PageDone:
    """A redrive page's outcome, written only if the redrive is still at `page` (exactly once per page)."""

    page: int
    replayed: int
    skipped: int
    position: Position | None
    now: datetime
    total: BoundedCount | None = None  # the redrive's count, recorded with its first page (and its last, if a floor)


class RedriveRepository(Protocol):
    def put(self, redrive: Redrive) -> bool:
        """Record the redrive unless it is recorded already; True if this call recorded it."""

    def get(self, redrive_id: str) -> Redrive | None: ...
    def advance(self, redrive_id: str, done: PageDone) -> bool:
        """Record the page and move on (completing the redrive when `position` is None); False if already done."""

    def fail(self, redrive_id: str, reason: str, now: datetime) -> bool:
        """End the running redrive as failed; False if it had already ended."""


@dataclass(frozen=True)
class RedriveJob:
    kind: str  # "redrive" (one page of a redrive)
    redrive_id: str | None = None
    page: int = 0
    redrive: Redrive | None = None  # the first page's job carries the redrive, in case the API died before its put


class RedriveJobs(Protocol):
    def enqueue(self, job: RedriveJob) -> None: ...


@dataclass(frozen=True)
class QueuedMessage:
    message_id: str
    receipt_handle: str
    body: str
    sent_at_ms: int
    delivery: DeliveryMessage | None = None  # set when the message is a well-formed delivery message
    job: RedriveJob | None = None  # set when the message is a well-formed redrive job (the jobs' dead letters)


class MessageSource(Protocol):
    """A queue an operator drains: receive a batch (hidden from other readers meanwhile), delete what was handled."""

    def receive(self, max_messages: int) -> list[QueuedMessage]: ...
    def delete(self, message: QueuedMessage) -> None: ...


def first_attempt_message(delivery: Delivery, event: Event | None = None) -> DeliveryMessage:
    """The message asking for a new delivery's first attempt; FIFO deduplicates it on the delivery id. `event`: the
    delivery's event, for the queue to carry when it is small enough (adapters/sqs.py: CARRIED_EVENT_MAX_BYTES), so
    that the attempt reads none."""
    inline = event is not None and event.id == delivery.event_id
    return DeliveryMessage(
        delivery_id=delivery.id,
        tenant_id=delivery.tenant_id,
        attempt=first_attempt_number(delivery),
        group_id=delivery.message_group_id,
        deduplication_id=delivery.id,
        endpoint_id=delivery.endpoint_id,  # the circuit is read before any claim, without reading the delivery
        event=event if inline else None,
        shard=delivery.queue_shard,
    )


# --- The event-type catalogue ---


class EventTypeRepository(Protocol):
    def put(self, event_type: EventType) -> None: ...
    def get(self, name: str) -> EventType | None: ...
    def delete(self, name: str) -> bool:
        """Remove it; False if there was none."""

    def page(self, limit: int, after: str | None) -> tuple[list[EventType], str | None]:
        """Up to `limit` types by name, after the name `after`; and the last name returned if there may be more."""

    def names(self) -> list[str]:
        """Every registered name (the catalogue is capped: domain/event_types.MAX_EVENT_TYPES)."""


# A compiled schema: where a document breaks it (a pointer into the document), or None.
SchemaCheck = Callable[[object], "Violation | None"]


class JsonSchemas(Protocol):
    def schema_problems(self, schema: dict[str, object]) -> list[Violation]:
        """Why the schema is not valid JSON Schema (pointers into the schema); empty when it is."""

    def compile(self, schema: dict[str, object]) -> SchemaCheck: ...
