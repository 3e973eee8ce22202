"""Redrive: replay an endpoint's dead (or cancelled) deliveries in a time range, a page at a time, exactly once.

Also the operator's drain of the dead-letter and poison-message queues back into delivery.

Exactly once, although job messages may arrive twice: every replay has an id derived from (redrive,
original), created with a conditional put, and a page's progress is recorded only if the redrive is
still at that page. A second copy of a job replays nothing new and records nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from hookrelay.domain import ids
from hookrelay.domain.clock import truncate_to_milliseconds, utcnow
from hookrelay.domain.errors import Conflict, Gone, InvalidRequest, NotFound
from hookrelay.domain.lifecycle import ensure_deliverable, retention_expiry
from hookrelay.domain.models import Delivery
from hookrelay.domain.redrive import REDRIVABLE_STATUSES, Redrive, RedriveState
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ports import (
    DeliveryFilter,
    DeliveryLog,
    DeliveryQueue,
    EndpointRepository,
    MessageSource,
    PageDone,
    QueuedMessage,
    RedriveJob,
    RedriveJobs,
    RedriveRepository,
)
from hookrelay.services.replay import ReplayService

PAGE_SIZE = 100  # replays per job message: comfortably inside the redrive function's timeout
REDRIVE_JOB = "redrive"
DEAD_LETTERS_JOB = "dead_letters"
ATTEMPT_LOST = "attempt_lost"  # the retry workflow's dead-letter reason (statemachine/retry.asl.json)


def _scope(redrive: Redrive) -> DeliveryFilter:
    # Only deliveries that had ended when the redrive was asked for: its own replays, and deliveries dying
    # while it runs, are never swept in, so `total` is exactly what gets replayed.
    return DeliveryFilter(
        tenant_id=redrive.tenant_id,
        status=redrive.status_filter,
        endpoint_id=redrive.endpoint_id,
        since=redrive.since,
        until=redrive.until,
        ended_before=redrive.created_at,
    )


@dataclass
class RedriveService:
    redrives: RedriveRepository
    deliveries: DeliveryLog
    endpoints: EndpointRepository
    replays: ReplayService
    jobs: RedriveJobs
    page_size: int = PAGE_SIZE

    def start(
        self,
        tenant_id: str,
        endpoint_id: str,
        *,
        since: datetime,
        until: datetime | None = None,
        status: DeliveryStatus = DeliveryStatus.DEAD,
    ) -> Redrive:
        if status not in REDRIVABLE_STATUSES:
            raise InvalidRequest("only dead or cancelled deliveries can be redriven")
        endpoint = self.endpoints.get(tenant_id, endpoint_id)
        if endpoint is None:
            raise NotFound(f"no endpoint {endpoint_id!r}")
        ensure_deliverable(endpoint)
        # Millisecond precision: the stored timestamps have no more, and the record must filter as it counted.
        now = utcnow()
        now = truncate_to_milliseconds(now)
        until = min(until or now, now)
        if since >= until:
            raise InvalidRequest("since must be before until (and before now)")
        redrive = Redrive(
            id=ids.new_id("rdr"),
            tenant_id=tenant_id,
            endpoint_id=endpoint_id,
            since=since.astimezone(UTC),
            until=until.astimezone(UTC),
            status_filter=status,
            created_at=now,
            expires_at=retention_expiry(now),
        )
        # No count here: over a long window it is many index pages, which the API's time limit cannot wait for.
        # The first job counts (its scope is fixed by `created_at`, so the count is the same whenever it runs).
        self.redrives.put(redrive)
        self.jobs.enqueue(RedriveJob(REDRIVE_JOB, redrive.id, page=0))
        return redrive

    def get(self, tenant_id: str, redrive_id: str) -> Redrive:
        redrive = self.redrives.get(redrive_id) if redrive_id.startswith("rdr_") else None
        if redrive is None or redrive.tenant_id != tenant_id:
            raise NotFound(f"no redrive {redrive_id!r}")
        return redrive

    def run_page(self, redrive_id: str, page: int, *, redelivered: bool = False) -> None:
        """Replay one page of the redrive, record it, and enqueue the next page's job."""
        redrive = self.redrives.get(redrive_id)
        if redrive is None or redrive.state is not RedriveState.RUNNING:
            return
        if page != redrive.page:
            # A copy of a job already done. If this is the retry of a run that recorded its page but died
            # before enqueueing the next one, enqueue it now (a copy of that job is just as harmless).
            if redelivered and page == redrive.page - 1:
                self.jobs.enqueue(RedriveJob(REDRIVE_JOB, redrive.id, page=redrive.page))
            return
        now = utcnow()
        try:
            endpoint = self.replays.deliverable_endpoint(redrive.tenant_id, redrive.endpoint_id)
        except Conflict as refusal:
            self.redrives.fail(redrive.id, refusal.detail, now)
            return
        found = self.deliveries.find(_scope(redrive), self.page_size, redrive.position, now)
        unsent: list[Delivery] = []
        skipped = 0
        for original in found.deliveries:
            replay_id = ids.derived_delivery_id(redrive.created_at, redrive.id, original.id)
            try:
                replay, needs_sending = self.replays.record_replay(original, endpoint, now, replay_id=replay_id)
            except Gone:  # the event expired while the redrive ran: nothing left to send
                skipped += 1
                continue
            if needs_sending:
                unsent.append(replay)
        # Before recording the page: a crash in between re-runs the page, which re-enqueues what never started.
        self.replays.enqueue_first_attempts(unsent)
        replayed = len(found.deliveries) - skipped
        total = self.deliveries.count(_scope(redrive), now) if redrive.total is None else None
        recorded = self.redrives.advance(
            redrive.id, PageDone(page, replayed, skipped, found.resume_after, now, total=total)
        )
        if recorded and found.resume_after is not None:
            self.jobs.enqueue(RedriveJob(REDRIVE_JOB, redrive.id, page=page + 1))


@dataclass
class DrainReport:
    replayed: int = 0  # dead deliveries replayed from the dead-letter queue
    resent: int = 0  # poison messages put back on the delivery queue
    kept: list[str] = field(default_factory=list)  # why messages were left where they were
    exhausted: bool = True  # False when the run stopped at its message budget with more to go


@dataclass
class DeadLetterDrain:
    """Moves everything in the dead-letter queue (a replay of each dead delivery) and the poison queue
    (the original message, as it was) back into delivery. Messages it cannot act on stay put, reported."""

    dead_letters: MessageSource
    poison: MessageSource
    delivery_queue: DeliveryQueue
    deliveries: DeliveryLog
    replays: ReplayService

    def drain(self, max_messages: int = 1000) -> DrainReport:
        """Handle up to `max_messages` from each queue; `exhausted` says whether both were emptied."""
        report = DrainReport()
        for source, handle in ((self.dead_letters, self._replay_dead), (self.poison, self._resend_poison)):
            handled = 0
            while True:
                if handled >= max_messages:
                    report.exhausted = False
                    break
                batch = source.receive(max_messages - handled)  # at most; the adapter knows SQS's own limit
                if not batch:
                    break
                for message in batch:
                    handled += 1
                    kept = handle(message, report)
                    if kept is None:
                        source.delete(message)
                    else:
                        report.kept.append(f"{message.message_id}: {kept}")
        return report

    def _replay_dead(self, message: QueuedMessage, report: DrainReport) -> str | None:
        try:
            document = json.loads(message.body)
            delivery_id = str(document["delivery_id"])
        except (ValueError, KeyError, TypeError):
            return "not a dead-letter message"
        original = self.deliveries.get(delivery_id)
        if original is None:
            return f"delivery {delivery_id} no longer exists"
        now = utcnow()
        if document.get("reason") == ATTEMPT_LOST:
            if original.status is DeliveryStatus.DELIVERED:
                return None  # a late attempt got through after the workflow gave up: nothing to replay
            if not original.status.is_terminal and not self._declare_dead(original, now):
                return f"delivery {delivery_id} moved on from {original.status.value} while draining; drain again"
        try:
            endpoint = self.replays.deliverable_endpoint(original.tenant_id, original.endpoint_id)
            # Derived from the message: a message received again (after a crash) replays once.
            replay_id = ids.derived_delivery_id(
                datetime.fromtimestamp(message.sent_at_ms / 1000, UTC), "dead-letter", message.message_id
            )
            self.replays.resend(original, endpoint, now, replay_id=replay_id)
        except (Conflict, Gone) as refusal:
            return refusal.detail
        report.replayed += 1
        return None

    def _declare_dead(self, delivery: Delivery, now: datetime) -> bool:
        """Its retry workflow gave up on an unanswered attempt: the delivery will never be attempted again, so
        it is dead (and, like every ended delivery, expires after the redrive window), its dead letter being
        the one in hand. Only if it is still as read: a late attempt's record (delivered, say) stands."""
        dead = self.deliveries.set_status(
            delivery.id, delivery.tenant_id, DeliveryStatus.DEAD, now, retention_expiry(now), expected=delivery.status
        )
        if dead:
            self.deliveries.mark_dead_lettered(delivery.id, now)
        return dead

    def _resend_poison(self, message: QueuedMessage, report: DrainReport) -> str | None:
        if message.delivery is None:
            return "not a delivery message"
        # A fresh deduplication id: the original's may still be inside SQS's five-minute window.
        self.delivery_queue.enqueue([replace(message.delivery, deduplication_id=f"poison-{message.message_id}")])
        report.resent += 1
        return None


# Messages a dead-letter drain handles per job before handing the rest to a fresh job (and invocation).
DRAIN_BUDGET = 500


@dataclass
class RedriveJobRunner:
    """Runs one job from the redrive jobs queue: one page of a redrive, or a share of the dead-letter drain.

    Long work is a chain of short jobs, each enqueueing the next, so none outlasts the function's timeout.
    """

    redrives: RedriveService
    drain: DeadLetterDrain
    jobs: RedriveJobs
    drain_budget: int = DRAIN_BUDGET

    def run(self, job: RedriveJob, *, redelivered: bool = False) -> DrainReport | None:
        """Run the job; the drain's report when it was a drain. `redelivered`: this job message came before."""
        if job.kind == REDRIVE_JOB and job.redrive_id:
            self.redrives.run_page(job.redrive_id, job.page, redelivered=redelivered)
            return None
        if job.kind == DEAD_LETTERS_JOB:
            report = self.drain.drain(max_messages=self.drain_budget)
            if not report.exhausted:
                self.jobs.enqueue(RedriveJob(DEAD_LETTERS_JOB))
            return report
        raise ValueError(f"unknown redrive job {job}")
