"""Making one attempt: claim it, sign the stored body, POST it, record what happened, decide what's next."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from hookrelay.domain.classification import HARD_FAILURE_ATTEMPT_CAP, Outcome, rule_for
from hookrelay.domain.clock import RETENTION_DAYS, epoch_seconds, utcnow
from hookrelay.domain.models import Attempt, Delivery, EndpointState
from hookrelay.domain.schedule import RetrySchedule, parse_retry_after
from hookrelay.domain.signing import signed_headers
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ports import (
    AttemptRecord,
    DeadLetters,
    DeliveryMessage,
    DeliveryRepository,
    EndpointRepository,
    EventRepository,
    RetryTicket,
    RetryWorkflow,
    SendResult,
    WebhookSender,
)


@dataclass(frozen=True)
class AttemptReport:
    delivery_id: str
    status: DeliveryStatus
    attempt: int
    sent: bool  # False when the message was a duplicate or the delivery was cancelled
    next_attempt_at: datetime | None = None


def retention_expiry(ended_at: datetime) -> int:
    return epoch_seconds(ended_at + timedelta(days=RETENTION_DAYS))


@dataclass
class DeliveryService:
    deliveries: DeliveryRepository
    endpoints: EndpointRepository
    events: EventRepository
    sender: WebhookSender
    workflow: RetryWorkflow
    dead_letters: DeadLetters
    schedule: RetrySchedule
    # A claim older than this is presumed abandoned (the worker died mid-attempt); it must exceed the
    # longest an attempt can take, which the queue's visibility timeout already guarantees.
    claim_timeout: timedelta = timedelta(minutes=2)

    def attempt(self, message: DeliveryMessage) -> AttemptReport:
        now = utcnow()
        delivery = self.deliveries.claim(
            message.delivery_id, message.tenant_id, message.attempt, now, now - self.claim_timeout
        )
        if delivery is None:
            return self._duplicate(message)
        endpoint = self.endpoints.get(delivery.tenant_id, delivery.endpoint_id)
        if endpoint is None or endpoint.state is not EndpointState.ENABLED:
            return self._cancel(delivery, message, now)
        event = self.events.get(delivery.event_id)
        if event is None:  # cannot happen while the event outlives its deliveries; never send nothing
            raise LookupError(f"event {delivery.event_id} of delivery {delivery.id} is missing")

        headers = signed_headers(endpoint.active_secrets(now), event.id, now, event.body)
        headers["content-type"] = "application/json"
        result = self.sender.send(endpoint.url, headers, event.body.encode())
        return self._record(delivery, message, now, result)

    def _record(
        self, delivery: Delivery, message: DeliveryMessage, started: datetime, result: SendResult
    ) -> AttemptReport:
        rule = rule_for(result.status_code, result.error)
        finished = utcnow()
        first_attempt_at = delivery.first_attempt_at or started
        retry_after = parse_retry_after(result.retry_after, finished) if rule.honours_retry_after else None
        next_attempt_at: datetime | None = None
        if rule.outcome is Outcome.DELIVERED:
            status = DeliveryStatus.DELIVERED
        elif rule.outcome is Outcome.RETRY_LIMITED and message.attempt >= HARD_FAILURE_ATTEMPT_CAP:
            status = DeliveryStatus.DEAD
        else:
            next_attempt_at = self.schedule.next_attempt_at(
                first_attempt_at=first_attempt_at, attempts_made=message.attempt, now=finished, retry_after=retry_after
            )
            status = DeliveryStatus.RETRYING if next_attempt_at else DeliveryStatus.DEAD
        terminal = status.is_terminal
        attempt = Attempt(
            number=message.attempt,
            started_at=started,
            latency_ms=result.latency_ms,
            status_code=result.status_code,
            error=result.error,
            error_detail=result.error_detail,
            response_excerpt=result.response_excerpt,
            outcome=rule.outcome,
            retry_after=retry_after,
        )
        record = AttemptRecord(
            attempt=attempt,
            status=status,
            next_attempt_at=next_attempt_at,
            completed_at=finished if terminal else None,
            expires_at=retention_expiry(finished) if terminal else None,
        )
        if not self.deliveries.record_attempt(delivery.id, delivery.tenant_id, message.attempt, record):
            # Our claim went stale and another worker took the attempt over: its record stands.
            return self._duplicate(message)
        if status is DeliveryStatus.DEAD:
            self._bury(delivery.model_copy(update={"status": status, "completed_at": finished}), finished)
        self._hand_over(delivery, message, status, next_attempt_at)
        return AttemptReport(delivery.id, status, message.attempt, sent=True, next_attempt_at=next_attempt_at)

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
            self.workflow.report(message.task_token, status, ticket)
        elif ticket is not None:
            self.workflow.start(ticket)

    def _bury(self, delivery: Delivery, ended_at: datetime) -> None:
        self.dead_letters.publish(delivery)
        self.events.extend_expiry(delivery.event_id, retention_expiry(ended_at))

    def _cancel(self, delivery: Delivery, message: DeliveryMessage, now: datetime) -> AttemptReport:
        self.deliveries.set_status(
            delivery.id, delivery.tenant_id, DeliveryStatus.CANCELLED, now, retention_expiry(now)
        )
        self.events.extend_expiry(delivery.event_id, retention_expiry(now))
        if message.task_token:
            self.workflow.report(message.task_token, DeliveryStatus.CANCELLED, None)
        return AttemptReport(delivery.id, DeliveryStatus.CANCELLED, message.attempt, sent=False)

    def _duplicate(self, message: DeliveryMessage) -> AttemptReport:
        """A message for an attempt that is in flight elsewhere or already made: send nothing, record nothing.

        If it carries a task token (the workflow re-sent it), answer with the delivery's current state so
        the execution is never stranded waiting for an attempt that already happened.
        """
        current = self.deliveries.get(message.delivery_id)
        status = current.status if current else DeliveryStatus.CANCELLED
        if message.task_token and current is not None and status is not DeliveryStatus.ATTEMPTING:
            ticket = None
            if status is DeliveryStatus.RETRYING and current.next_attempt_at is not None:
                ticket = RetryTicket(
                    current.id,
                    current.tenant_id,
                    current.message_group_id,
                    current.attempt_count + 1,
                    current.next_attempt_at,
                )
            self.workflow.report(message.task_token, status, ticket)
        return AttemptReport(message.delivery_id, status, message.attempt, sent=False)
