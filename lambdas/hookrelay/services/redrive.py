"""Redrive: replay an endpoint's dead (or cancelled) deliveries in a time range, a page at a time, exactly once.

Also the operator's redrive of the deliveries the platform itself killed (poison messages, lost attempts).

Exactly once, although job messages may arrive twice: every replay has an id derived from (redrive,
original), created with a conditional put, and a page's progress is recorded only if the redrive is
still at that page. A second copy of a job replays nothing new and records nothing.

Idempotent in effect, too: a dead delivery whose replay was delivered is marked `recovered_by` it (by the delivery
function, services/delivery.py), and a redrive skips recovered deliveries unless asked to include them, so
redriving the same window again re-sends only what is still undelivered. Should the mark be missing (the process
died between the replay's record and the mark, and its message never came back; or the replay was delivered before
marks existed), a page looks each original's replays up among its event's deliveries (the sparse event_extras
index: one query per original, usually empty) and, finding one delivered, marks the original then and skips it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from hookrelay.domain import ids, platform_events
from hookrelay.domain.clock import truncate_to_milliseconds, utcnow
from hookrelay.domain.errors import Conflict, Gone, InvalidRequest, NotFound
from hookrelay.domain.lifecycle import ensure_deliverable, retention_expiry
from hookrelay.domain.models import Delivery
from hookrelay.domain.paging import BoundedCount
from hookrelay.domain.redrive import REDRIVABLE_STATUSES, REDRIVE_COUNT_LIMIT, REDRIVE_JOB, Redrive, RedriveState
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ports import (
    DeliveryFilter,
    DeliveryLog,
    EndpointRepository,
    PageDone,
    PlatformEvents,
    RedriveJob,
    RedriveJobs,
    RedriveRepository,
    TenantDirectory,
)
from hookrelay.services.replay import ReplayService

PAGE_SIZE = 100  # replays per job message: comfortably inside the redrive function's timeout
DEAD_LETTERS_JOB = "dead_letters"  # an operator drain's job before the reconciler surfaced dead letters: ignored


def _scope(redrive: Redrive) -> DeliveryFilter:
    # Only deliveries that had ended when the redrive was asked for: its own replays, and deliveries dying
    # while it runs, are never swept in, so `total` is exactly what gets replayed or skipped. Recovered ones are in
    # scope (and counted) but skipped by the page (`_skips`): a mark made while the redrive runs, by its own replay
    # or another, moves nothing in or out of its pages.
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
    count_limit: int = REDRIVE_COUNT_LIMIT  # the log entries its first job counts at most
    # `hookrelay.redrive.completed` to the tenant's subscribed endpoints (None: none).
    platform_events: PlatformEvents | None = None

    def start(
        self,
        tenant_id: str,
        endpoint_id: str,
        *,
        since: datetime,
        until: datetime | None = None,
        status: DeliveryStatus = DeliveryStatus.DEAD,
        include_recovered: bool = False,
        request_key: str | None = None,
    ) -> Redrive:
        """Record the redrive and enqueue its first job.

        The job is sent first and carries the redrive, and the record is created only if missing (by whichever of
        the two comes first): if the process dies between the two writes, the job creates the record and the
        redrive runs; if it dies before the job, nothing was written. Never a record `running` with no job. Under an
        `Idempotency-Key` (`request_key`) the redrive's id is derived from it, so a retry converges on it.
        """
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
            id=ids.keyed_id("rdr", request_key) if request_key else ids.new_id("rdr"),
            tenant_id=tenant_id,
            endpoint_id=endpoint_id,
            since=since.astimezone(UTC),
            until=until.astimezone(UTC),
            status_filter=status,
            include_recovered=include_recovered,
            created_at=now,
            expires_at=retention_expiry(now),
        )
        # No count here: over a long window it is many index pages, which the API's time limit cannot wait for.
        # The first job counts (its scope is fixed by `created_at`, so the count is the same whenever it runs).
        self.jobs.enqueue(RedriveJob(REDRIVE_JOB, redrive.id, page=0, redrive=redrive))
        if self.redrives.put(redrive):
            return redrive
        return self.redrives.get(redrive.id) or redrive  # its job (or a first run of this request) made it

    def get(self, tenant_id: str, redrive_id: str) -> Redrive:
        redrive = self.redrives.get(redrive_id) if redrive_id.startswith("rdr_") else None
        if redrive is None or redrive.tenant_id != tenant_id:
            raise NotFound(f"no redrive {redrive_id!r}")
        return redrive

    def run_page(
        self, redrive_id: str, page: int, *, redelivered: bool = False, carried: Redrive | None = None
    ) -> None:
        """Replay one page of the redrive, record it, and enqueue the next page's job. `carried`: the redrive as
        the first job carries it, recorded here if the API died before recording it (see `start`)."""
        redrive = self.redrives.get(redrive_id)
        if redrive is None and carried is not None and carried.id == redrive_id:
            self.redrives.put(carried)
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
        order_of = {d.id: (d.created_at, d.id) for d in found.deliveries}
        for original in found.deliveries:
            replay_id = ids.derived_delivery_id(redrive.created_at, redrive.id, original.id)
            if not redrive.include_recovered and self._skips(original, replay_id, now):
                skipped += 1
                continue
            try:
                replay, needs_sending = self.replays.record_replay(original, endpoint, now, replay_id=replay_id)
            except Gone:  # the event expired while the redrive ran: nothing left to send
                skipped += 1
                continue
            if needs_sending:
                unsent.append(replay)
        # In the page's event order (the log reads newest first): one message group (a poll endpoint's, or
        # max_in_flight 1) then gets them oldest first, page by page.
        unsent.sort(key=lambda replay: order_of[replay.replay_of or ""])
        # Before recording the page: a crash in between re-runs the page, which re-enqueues what never started.
        self.replays.enqueue_first_attempts(unsent)
        replayed = len(found.deliveries) - skipped
        total = self._total(redrive, now, replayed=replayed, skipped=skipped, last=found.resume_after is None)
        if found.resume_after is None and self.platform_events is not None:
            # The last page: announced before it is recorded. If the process dies between the two, the job message
            # comes back, re-runs the page (its replays converge) and emits again: the same event, its id derived
            # from the redrive. Recorded first, a crash would leave the redrive completed and never announced.
            done = platform_events.redrive_completed(
                redrive,
                total=total.counted if total is not None else (redrive.total or 0),
                replayed=redrive.replayed + replayed,
                skipped=redrive.skipped + skipped,
                at=now,
            )
            self.platform_events.emit(done)
        recorded = self.redrives.advance(
            redrive.id, PageDone(page, replayed, skipped, found.resume_after, now, total=total)
        )
        if recorded and found.resume_after is not None:
            self.jobs.enqueue(RedriveJob(REDRIVE_JOB, redrive.id, page=page + 1))

    def _total(
        self, redrive: Redrive, now: datetime, *, replayed: int, skipped: int, last: bool
    ) -> BoundedCount | None:
        """The count a page records (None: none): the first page counts the window, up to `count_limit` entries;
        the last makes a floor exact, as every delivery in scope was replayed or skipped by one of its pages."""
        counted = self.deliveries.count(_scope(redrive), now, self.count_limit) if redrive.total is None else None
        if last and not (counted.exact if counted is not None else redrive.total_exact):
            return BoundedCount(redrive.replayed + replayed + redrive.skipped + skipped, exact=True)
        return counted

    def _skips(self, original: Delivery, own_replay: str, now: datetime) -> bool:
        """Whether the page skips `original`: another request's replay of it (an earlier redrive's, a single
        replay's) was delivered. Marked `recovered_by` that replay if the mark is missing (see the module's doc).
        This redrive's own replay (`own_replay`) recovering it is no reason: a page re-run after a crash converges on
        its replays and counts them again, as before the crash."""
        if original.recovered_by is not None:
            return original.recovered_by != own_replay
        replay = self.replays.delivered_replay(original, now, other_than=own_replay)
        if replay is None:
            return False
        self.deliveries.mark_recovered(original.id, original.tenant_id, replay.id, replay.completed_at or now)
        return True


@dataclass
class OperatorReport:
    found: list[str] = field(default_factory=list)  # dead deliveries the platform killed (poison, attempt lost)
    replayed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # why some were not replayed (endpoint disabled, event expired)


@dataclass
class OperatorRedrive:
    """After a platform fault is fixed: replay the dead deliveries the platform killed (`dead_reason` poison or
    attempt_lost), across tenants, to endpoints that are enabled. Never a tenant's own dead deliveries (its
    endpoint's failures): those are the tenant's to redrive once its endpoint works. Safe to re-run: each replay's
    id is derived from the dead delivery, so a delivery is replayed once however often this runs."""

    tenants: TenantDirectory
    deliveries: DeliveryLog
    replays: ReplayService

    def run(self, since: datetime, until: datetime | None = None, *, apply: bool = False) -> OperatorReport:
        report = OperatorReport()
        now = utcnow()
        for tenant_id in self.tenants.ids():
            # Not those recovered since (a tenant's redrive or replay of them delivered): nothing left to send.
            where = DeliveryFilter(
                tenant_id=tenant_id, status=DeliveryStatus.DEAD, since=since, until=until, recovered=False
            )
            position = None
            while True:
                page = self.deliveries.find(where, PAGE_SIZE, position, now)
                for dead in page.deliveries:
                    if dead.dead_reason is not None and dead.dead_reason.is_ours:
                        report.found.append(dead.id)
                        if apply:
                            self._replay(dead, now, report)
                if page.resume_after is None:
                    break
                position = page.resume_after
        return report

    def _replay(self, dead: Delivery, now: datetime, report: OperatorReport) -> None:
        try:
            endpoint = self.replays.deliverable_endpoint(dead.tenant_id, dead.endpoint_id)
            replay_id = ids.derived_delivery_id(dead.created_at, "operator", dead.id)
            self.replays.resend(dead, endpoint, now, replay_id=replay_id)
        except (Conflict, Gone) as refusal:
            report.kept.append(f"{dead.id}: {refusal.detail}")
            return
        report.replayed.append(dead.id)


@dataclass
class RedriveJobRunner:
    """Runs one job from the redrive jobs queue: one page of a redrive.

    Long work is a chain of short jobs, each enqueueing the next, so none outlasts the function's timeout.
    """

    redrives: RedriveService

    def run(self, job: RedriveJob, *, redelivered: bool = False) -> None:
        """Run the job. `redelivered`: this job message came before."""
        if job.kind == REDRIVE_JOB and job.redrive_id:
            self.redrives.run_page(job.redrive_id, job.page, redelivered=redelivered, carried=job.redrive)
            return
        if job.kind == DEAD_LETTERS_JOB:
            return  # from before the reconciler surfaced dead letters: nothing to do any more
        raise ValueError(f"unknown redrive job {job}")
