"""Making one attempt: claim it, sign the stored body, POST it, record what happened, decide what's next."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from hookrelay.domain.classification import HARD_FAILURE_ATTEMPT_CAP, Outcome, ResponseRule, rule_for
from hookrelay.domain.clock import RETENTION_DAYS, epoch_seconds, utcnow
from hookrelay.domain.models import Attempt, Delivery, Endpoint, EndpointState, Event
from hookrelay.domain.schedule import RetrySchedule, parse_retry_after
from hookrelay.domain.signing import signed_headers
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ports import (
    AttemptRecord,
    DeadLetters,
    DeliveryMessage,
    DeliveryRepository,
    DeliveryTelemetry,
    EndpointRepository,
    EventRepository,
    RetryTicket,
    RetryWorkflow,
    SendResult,
    WebhookSender,
)

# Step Functions wakes a Wait in whole seconds (moto truncates twice, so up to 2 s early); the attempt
# waits out that remainder itself so that no retry is ever made before its `next_attempt_at`.
EARLY_WAKE_TOLERANCE = timedelta(seconds=3)
DELIVERY_MISSING = "hookrelay.DeliveryMissing"  # the ASL routes this task failure to a Fail state
FAILING_SPELL_ERRORS = "FailingSpellErrors"  # metric: the endpoint's failing-spell bookkeeping failed


@dataclass(frozen=True)
class AttemptReport:
    delivery_id: str
    status: DeliveryStatus | None  # None: the delivery record does not exist
    attempt: int
    sent: bool  # False when the message was a duplicate or the delivery was cancelled
    next_attempt_at: datetime | None = None


def retention_expiry(ended_at: datetime) -> int:
    return epoch_seconds(ended_at + timedelta(days=RETENTION_DAYS))


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
    # A claim older than this is presumed abandoned (the worker died mid-attempt); it must exceed the
    # longest an attempt can take, which the queue's visibility timeout already guarantees.
    claim_timeout: timedelta = timedelta(minutes=2)
    clock: Callable[[], datetime] = field(default=utcnow)
    sleep: Callable[[float], None] = field(default=time.sleep)

    def attempt(self, message: DeliveryMessage) -> AttemptReport:
        now = self.clock()
        delivery = self.deliveries.claim(
            message.delivery_id, message.tenant_id, message.attempt, now, now - self.claim_timeout
        )
        if delivery is None:
            return self._not_claimed(message)
        endpoint = self.endpoints.get(delivery.tenant_id, delivery.endpoint_id)
        if endpoint is None or endpoint.state is not EndpointState.ENABLED:
            return self._cancel(delivery, message, now)
        event = self.events.get(delivery.event_id)
        if event is None:  # cannot happen while the event outlives its deliveries; never send nothing
            raise LookupError(f"event {delivery.event_id} of delivery {delivery.id} is missing")

        started = self._not_before(delivery.next_attempt_at, now)
        headers = signed_headers(endpoint.active_secrets(started), event.id, started, event.body)
        headers["content-type"] = "application/json"
        result = self.sender.send(endpoint.url, headers, event.body.encode())
        report = self._record(delivery, event, message, started, result)
        if report.sent:
            delivered = report.status is DeliveryStatus.DELIVERED
            try:
                self._track_failing_spell(endpoint, delivered=delivered, at=started)
            except Exception as error:  # the attempt is recorded and handed over: the message is done
                self.telemetry.bookkeeping_failed(FAILING_SPELL_ERRORS, delivery.id, error)
        return report

    def _track_failing_spell(self, endpoint: Endpoint, *, delivered: bool, at: datetime) -> None:
        """Start the endpoint's failing spell on a failure while healthy, end it on a success while failing.

        The endpoint record changes only on those transitions, never on every attempt; both writes are
        conditional, so racing workers agree on the spell's start. A missed transition is caught up by the
        next attempt's, so an error here is counted, not retried.
        """
        if delivered and endpoint.failing_since is not None:
            self.endpoints.mark_recovered(endpoint.tenant_id, endpoint.id)
        elif not delivered and endpoint.failing_since is None:
            self.endpoints.mark_failing(endpoint.tenant_id, endpoint.id, at)

    def _not_before(self, due: datetime | None, now: datetime) -> datetime:
        """Wait out an early wake-up (bounded): a retry is never made before its next_attempt_at."""
        if due is None or due <= now:
            return now
        self.sleep(min(due - now, EARLY_WAKE_TOLERANCE).total_seconds())
        return self.clock()

    def _record(
        self, delivery: Delivery, event: Event, message: DeliveryMessage, started: datetime, result: SendResult
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
        if not self.deliveries.record_attempt(delivery.id, delivery.tenant_id, message.attempt, record):
            # Our claim went stale and another worker took the attempt over: its record stands.
            return self._not_claimed(message)
        if terminal:
            self._keep_event(event, finished)
        if decision.status is DeliveryStatus.DEAD:
            ended = delivery.model_copy(
                update={"status": decision.status, "completed_at": finished, "attempts": [*delivery.attempts, attempt]}
            )
            self._dead_letter(ended)
        self._hand_over(delivery, message, decision.status, decision.next_attempt_at)
        return AttemptReport(
            delivery.id, decision.status, message.attempt, sent=True, next_attempt_at=decision.next_attempt_at
        )

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
            self.events.extend_expiry(event.id, expires_at)

    def _dead_letter(self, dead: Delivery) -> None:
        """Publish the dead delivery's dead-letter message, then note it: a redelivered message publishes only
        what was never noted (a crash in between), and a message received again after the note publishes nothing."""
        self.dead_letters.publish(dead)
        self.deliveries.mark_dead_lettered(dead.id, self.clock())

    def _hand_over(
        self, delivery: Delivery, message: DeliveryMessage, status: DeliveryStatus, next_attempt_at: datetime | None
    ) -> None:
        """Start the retry workflow after a first failure, or answer the execution that sent this attempt."""
        ticket = (
            RetryTicket(
                delivery.id, delivery.tenant_id, delivery.message_group_id, message.attempt + 1, next_attempt_at
            )
            if next_attempt_at is not None
            else None
        )
        if message.task_token:
            self._answer(message.task_token, status, ticket)
        elif ticket is not None:
            self.workflow.start(ticket)

    def _answer(
        self, task_token: str, status: DeliveryStatus, ticket: RetryTicket | None, *, may_resume: bool = True
    ) -> None:
        """Answer the execution that sent the attempt; if it no longer listens while the delivery is still
        retrying, start a fresh execution for the next attempt, since nothing else ever would.

        The token dies when its task times out: the execution then re-sends the attempt (a message that is
        answered too, so for a while two executions may carry the delivery; an attempt is still made once),
        or, after its last re-send, fails with AttemptLost.
        """
        if not self.workflow.report(task_token, status, ticket) and ticket is not None and may_resume:
            self.workflow.resume(ticket)

    def _cancel(self, delivery: Delivery, message: DeliveryMessage, now: datetime) -> AttemptReport:
        self.deliveries.set_status(
            delivery.id, delivery.tenant_id, DeliveryStatus.CANCELLED, now, retention_expiry(now)
        )
        self.events.extend_expiry(delivery.event_id, retention_expiry(now))
        if message.task_token:
            self._answer(message.task_token, DeliveryStatus.CANCELLED, None)
        return AttemptReport(delivery.id, DeliveryStatus.CANCELLED, message.attempt, sent=False)

    def _not_claimed(self, message: DeliveryMessage) -> AttemptReport:
        """A message for an attempt in flight elsewhere or already made: send nothing, record nothing.

        What the delivery is now still gets passed on, so that nothing is stranded: a re-sent workflow
        message is answered with the current state, and a first-attempt message that comes back after its
        attempt was recorded (the worker died before starting the workflow) starts it — a harmless no-op
        when it is already running, since the execution is named after the delivery. Likewise a message for
        the attempt that killed the delivery publishes the dead letter if the worker died before it could.
        """
        current = self.deliveries.get(message.delivery_id)
        if current is None or current.tenant_id != message.tenant_id:
            if message.task_token:
                self.workflow.fail(message.task_token, DELIVERY_MISSING, f"no delivery {message.delivery_id}")
            return AttemptReport(message.delivery_id, None, message.attempt, sent=False)
        status = current.status
        ticket = None
        if status is DeliveryStatus.RETRYING and current.next_attempt_at is not None:
            ticket = RetryTicket(
                current.id,
                current.tenant_id,
                current.message_group_id,
                current.attempt_count + 1,
                current.next_attempt_at,
            )
        latest = current.attempt_count == message.attempt  # a message for the attempt made last
        if status is DeliveryStatus.DEAD and latest and current.dead_lettered_at is None:
            self._dead_letter(current)
        if message.task_token:
            # While the attempt is in flight its worker answers; this token's task times out and re-sends.
            # Only a message for the latest attempt may resume the workflow: whoever made a later one handed over.
            if status is not DeliveryStatus.ATTEMPTING:
                self._answer(message.task_token, status, ticket, may_resume=latest)
        elif ticket is not None and latest:
            self.workflow.start(ticket)
        return AttemptReport(message.delivery_id, status, message.attempt, sent=False)
