"""The reconciler: on a schedule, finishes what a crash between two writes left undone, and surfaces dead letters.

Every write sequence of the system either converges when it is re-run (ids derived from the request, conditional
writes) or leaves something this sweep finds. What it repairs, and why nothing else would:

- **Deliveries written but never enqueued** (ingest, a replay, the test event, a redrive page: a crash between
  recording a delivery and sending its first message). It reads the deliveries created since its checkpoint (the
  end of the span of the log the last run finished) up to `RECONCILE_GRACE` ago (so a write still in flight is left
  alone), tenant by tenant, from the `by_tenant` index (eventually consistent reads: no write on the happy path, no
  index of `queued`), enqueues the first message of each that still awaits it, and moves the checkpoint on. So each
  delivery is read once however often the schedule runs, and a run that fails leaves its span to the next one.
  A duplicate of a message still in the queue is harmless: FIFO deduplicates it on the delivery id for five
  minutes, and after that it lands behind the original in the same message group, where the claim admits one first
  attempt.
- **Deliveries parked on arrival that nothing releases** (ingest: a crash between a delivery written parked and its
  lot entry, or between the entry and the read that would have seen its circuit close; `Parking.park_new`). Among
  the same recent deliveries, those parked before their first attempt whose lot entry is missing, or whose
  endpoint's circuit is closed (or the endpoint no longer enabled), are taken back out of the lot (if still marked)
  and their first message sent: the delivery function parks it again, properly, if the circuit is open by then.
  Checking costs a read of their lot entries and one of each such endpoint per run, nothing when none is parked.
- **Dead letters** (the retry workflow's `attempt_lost` messages) and **poison messages** (delivery messages that
  failed processing `maxReceiveCount` times): each is surfaced as a dead delivery with its `dead_reason`, counted
  once (a metric per reason), and its message deleted. The queues are empty in steady state, so their age alarms
  mean "surfacing is broken". A message is deleted only after its delivery's record says so: a crash before the
  delete surfaces it again (a no-op: the record and the count are conditional on not being recorded yet).
- **Redrive jobs that failed repeatedly** (moved to the redrive jobs' dead-letter queue): nothing else would ever
  end their redrive, which `redrives show --follow` waits on: it ends `failed` (or its next page is enqueued again,
  when only the hand-over between two pages failed: `domain.redrive.on_failed_page`). Deleted after, as above;
  again is harmless (`fail` is conditional on `running`, a second job for a page is a no-op).

If the process dies anywhere in a run, the next run (five minutes later) does the same work again; each step is
idempotent. The checkpoint moves only after its span is done: a death between the sends and that write re-reads
the span (re-sending is harmless, as above). Runs that failed for a while are caught up by the next one that works,
`CATCH_UP_STEP` at a time, up to `CATCH_UP_LIMIT` back; further than that (the function failing for a day: its
errors alarm), an operator invokes it with `lookback_minutes` (docs/runbook.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from hookrelay.domain.clock import utcnow
from hookrelay.domain.lifecycle import (
    awaits_first_message,
    circuit_stands,
    parked_before_first_attempt,
    retention_expiry,
)
from hookrelay.domain.models import Delivery, Endpoint
from hookrelay.domain.redrive import REDRIVE_JOB, FailedPage, failed_page_error, on_failed_page
from hookrelay.domain.status import DeadReason, DeliveryStatus
from hookrelay.services.parking import Parking
from hookrelay.services.ports import (
    Checkpoints,
    DeadLetters,
    DeliveryFilter,
    DeliveryLog,
    DeliveryQueue,
    EventRepository,
    MessageSource,
    QueuedMessage,
    RedriveJob,
    RedriveJobs,
    RedriveRepository,
    TenantDirectory,
    first_attempt_message,
)

# How far back the first run looks (no checkpoint yet: a new deployment, or one from before checkpoints).
RECONCILE_LOOKBACK = timedelta(minutes=15)
# Younger deliveries are left to the request still writing them: a delivery is in the log within one write's retries
# of its `created_at` (seconds), and the checkpoint means a span is read once, so the margin is generous.
RECONCILE_GRACE = timedelta(minutes=1)
# The checkpoint's name, and how a run behind it catches up: spans of CATCH_UP_STEP, at most CATCH_UP_STEPS a run (so
# one run's reads stay bounded, about 2 hours of the log), never further back than CATCH_UP_LIMIT.
CHECKPOINT = "reconciler"
CATCH_UP_STEP = timedelta(minutes=15)
CATCH_UP_STEPS = 8
CATCH_UP_LIMIT = timedelta(days=1)
PAGE = 100
# The most messages one run surfaces from each queue (the rest wait for the next run, 5 minutes later).
SURFACE_BUDGET = 1000


@dataclass
class ReconcileReport:
    examined: int = 0  # recent deliveries read
    resent: list[str] = field(default_factory=list)  # deliveries whose first message was sent (again)
    surfaced: list[tuple[str, DeadReason]] = field(default_factory=list)  # dead letters recorded as dead deliveries
    deleted: int = 0  # queue messages handled and deleted
    redrives: list[str] = field(default_factory=list)  # what was done about each failed redrive job
    kept: list[str] = field(default_factory=list)  # messages left for the next run, and why
    spans: list[tuple[datetime, datetime]] = field(default_factory=list)  # the log read: [since, until) each
    skipped_before: datetime | None = None  # a checkpoint further back than CATCH_UP_LIMIT: left for an operator


@dataclass
class Reconciler:
    tenants: TenantDirectory
    deliveries: DeliveryLog
    events: EventRepository
    queue: DeliveryQueue
    dead_letter_queue: MessageSource
    poison_queue: MessageSource
    dead_letters: DeadLetters
    redrives: RedriveRepository
    redrive_jobs: RedriveJobs
    failed_jobs: MessageSource  # the redrive jobs' dead-letter queue
    checkpoints: Checkpoints  # how far the runs have read the delivery log
    parking: Parking | None = None  # for deliveries parked on arrival and stranded (None: not looked for)
    clock: Callable[[], datetime] = field(default=utcnow)
    lookback: timedelta = RECONCILE_LOOKBACK

    def run(self, lookback: timedelta | None = None) -> ReconcileReport:
        """One scheduled run; `lookback`: an operator's catch-up of that span, whatever the checkpoint says."""
        report = ReconcileReport()
        self.surface(report)
        now = self.clock()
        reached = self.checkpoints.get(CHECKPOINT)
        if lookback is not None:
            spans = [(now - lookback, now - RECONCILE_GRACE)]
            # The checkpoint moves with the span only if the span starts at or before it (else a gap would be left
            # between them, which the scheduled runs still read).
            moves = reached is not None and spans[0][0] <= reached
        else:
            spans, moves = self._due(report, now, reached), True
        tenants = list(self.tenants.ids())  # one walk a run, for all its spans
        endpoints: dict[tuple[str, str], Endpoint | None] = {}  # each read once a run
        for since, until in spans:
            if since >= until:
                continue
            self.resend_stranded(report, tenants, since, until, now, endpoints)
            report.spans.append((since, until))
            if moves:
                self.checkpoints.advance(CHECKPOINT, until)  # only once the span is done: a death re-reads it
        return report

    def _due(self, report: ReconcileReport, now: datetime, reached: datetime | None) -> list[tuple[datetime, datetime]]:
        """The spans of the log due, oldest first: from the checkpoint to the grace, `CATCH_UP_STEP` each."""
        until = now - RECONCILE_GRACE
        since = reached if reached is not None else now - self.lookback
        if since < now - CATCH_UP_LIMIT:
            report.skipped_before = since
            since = now - CATCH_UP_LIMIT
        spans: list[tuple[datetime, datetime]] = []
        while since < until and len(spans) < CATCH_UP_STEPS:
            spans.append((since, min(until, since + CATCH_UP_STEP)))
            since = spans[-1][1]
        return spans

    # --- Deliveries written but never enqueued ---

    def resend_stranded(
        self,
        report: ReconcileReport,
        tenants: list[str],
        since: datetime,
        until: datetime,
        now: datetime,
        endpoints: dict[tuple[str, str], Endpoint | None],
    ) -> None:
        for tenant_id in tenants:
            where = DeliveryFilter(tenant_id=tenant_id, since=since, until=until)
            position = None
            while True:
                page = self.deliveries.find(where, PAGE, position, now)
                report.examined += len(page.deliveries)
                stranded = [d for d in page.deliveries if awaits_first_message(d)]
                stranded += self._parked_stranded(
                    [d for d in page.deliveries if parked_before_first_attempt(d)], endpoints
                )
                if stranded:
                    self.queue.enqueue([first_attempt_message(d) for d in stranded])
                    report.resent.extend(d.id for d in stranded)
                if page.resume_after is None:
                    break
                position = page.resume_after

    def _parked_stranded(
        self, parked: list[Delivery], endpoints: dict[tuple[str, str], Endpoint | None]
    ) -> list[Delivery]:
        """Those of `parked` that nothing would release, each taken back out of the lot (unless the drain took it
        meanwhile): its entry missing, or no circuit standing in front of it."""
        if not parked or self.parking is None:
            return []
        missing = self.parking.lot.missing(parked)
        taken_out = []
        for delivery in parked:
            key = (delivery.tenant_id, delivery.endpoint_id)
            if key not in endpoints:
                endpoints[key] = self.parking.endpoints.get(*key)
            if (delivery.id in missing or not circuit_stands(endpoints[key])) and self.parking.lot.unpark(
                delivery.id, delivery.endpoint_id
            ):
                taken_out.append(delivery)
        return taken_out

    # --- Dead letters and poison messages ---

    def surface(self, report: ReconcileReport) -> None:
        sources = (
            (self.dead_letter_queue, self._dead_letter),
            (self.poison_queue, self._poison),
            (self.failed_jobs, self._failed_job),
        )
        for source, handle in sources:
            handled = 0
            while handled < SURFACE_BUDGET and (batch := source.receive(SURFACE_BUDGET - handled)):
                for message in batch:
                    handled += 1
                    kept = handle(message, report)
                    if kept is None:
                        source.delete(message)
                        report.deleted += 1
                    else:
                        report.kept.append(f"{message.message_id}: {kept}")

    def _dead_letter(self, message: QueuedMessage, report: ReconcileReport) -> str | None:
        """A message of the dead-letter queue: the retry workflow's `attempt_lost` (or, from before this release,
        a dead delivery's copy: its record already says dead)."""
        try:
            document = json.loads(message.body)
            delivery_id = str(document["delivery_id"])
        except (ValueError, KeyError, TypeError):
            return None  # not ours to act on; logged by the count of deleted messages
        reason = DeadReason.ATTEMPT_LOST if document.get("reason") == DeadReason.ATTEMPT_LOST else DeadReason.EXHAUSTED
        return self._surface(delivery_id, reason, report)

    def _poison(self, message: QueuedMessage, report: ReconcileReport) -> str | None:
        """A message of the poison queue: a delivery message (first attempt, retry, drain or probe) that failed
        processing repeatedly. A probe workflow's command is dropped: the workflow re-sends it when its task
        times out."""
        if message.delivery is None:
            return None
        return self._surface(message.delivery.delivery_id, DeadReason.POISON, report, message.delivery.tenant_id)

    def _failed_job(self, message: QueuedMessage, report: ReconcileReport) -> str | None:
        """A redrive job that failed repeatedly: its redrive ends (or goes on), never left `running`."""
        if message.job is None:
            return None  # not a job: nothing to act on
        job = message.job
        if job.kind != REDRIVE_JOB or not job.redrive_id:
            return None
        action = on_failed_page(self.redrives.get(job.redrive_id), job.page)
        if action is FailedPage.FAIL:
            self.redrives.fail(job.redrive_id, failed_page_error(job.page), self.clock())
        elif action is FailedPage.RESUME:
            self.redrive_jobs.enqueue(RedriveJob(REDRIVE_JOB, job.redrive_id, page=job.page + 1))
        report.redrives.append(f"{job.redrive_id} page {job.page}: {action.value}")
        return None

    def _surface(
        self, delivery_id: str, reason: DeadReason, report: ReconcileReport, tenant_id: str | None = None
    ) -> str | None:
        """The delivery recorded dead for `reason` (if it has not ended otherwise); None when the message may go.
        `tenant_id`: whose the message says it is (a first attempt's poison message may be of a delivery with no
        record yet, read from its event with it)."""
        delivery = self.deliveries.get(delivery_id, tenant_id)
        if delivery is None or delivery.parked_at is not None:
            return None  # gone (expired), or parked: the probe workflow carries it, and ends it past its horizon
        now = self.clock()
        if not delivery.status.is_terminal and not self._declare_dead(delivery, now):
            return f"delivery {delivery_id} moved on from {delivery.status.value}; the next run looks again"
        if (delivery.status is DeliveryStatus.DEAD or not delivery.status.is_terminal) and self._record(
            delivery, reason, now
        ):
            report.surfaced.append((delivery_id, reason))
        return None

    def _declare_dead(self, delivery: Delivery, now: datetime) -> bool:
        """Nothing will attempt it again (its workflow gave up, or its message is poison): dead, kept for the redrive
        window like every ended delivery. Only if it is still as read: a late attempt's record stands."""
        ended = self.deliveries.set_status(
            delivery.id, delivery.tenant_id, DeliveryStatus.DEAD, now, retention_expiry(now), expected=delivery.status
        )
        if ended:
            self.events.extend_expiry(delivery.tenant_id, delivery.event_id, retention_expiry(now))
        return ended

    def _record(self, delivery: Delivery, reason: DeadReason, now: datetime) -> bool:
        if not self.deliveries.mark_dead_lettered(delivery.id, now, reason):
            return False  # recorded before (its attempt's worker, or an earlier run that died before the delete)
        self.dead_letters.publish(delivery, reason)
        return True
