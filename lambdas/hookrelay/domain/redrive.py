"""A redrive: the record of one request to replay an endpoint's ended deliveries in a time range."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from hookrelay.domain.models import Delivery
from hookrelay.domain.paging import Position
from hookrelay.domain.status import DeliveryStatus

REDRIVABLE_STATUSES = frozenset({DeliveryStatus.DEAD, DeliveryStatus.CANCELLED})
REDRIVE_JOB = "redrive"  # the kind of a redrive jobs queue message carrying one page of a redrive
# A redrive's first job counts its window (services/redrive.py) reading at most this many of the log's entries, each
# match read back from its record: a window of millions read whole would take the job past its function's timeout,
# on every retry of it, and the redrive would never record its first page. Past them, `total` is a floor ("at least")
# until the last page makes it exact. This many is about a hundred index pages and a hundred batch reads.
REDRIVE_COUNT_LIMIT = 10_000


class RedriveState(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


@dataclass(kw_only=True)
class Redrive:
    id: str
    tenant_id: str
    endpoint_id: str
    since: datetime
    until: datetime
    status_filter: DeliveryStatus
    # Also replay deliveries already recovered (a replay of them delivered): by default a redrive skips them, so
    # that redriving a window again re-sends only what is still undelivered.
    include_recovered: bool = False
    state: RedriveState = RedriveState.RUNNING
    # Deliveries that matched (those that had ended when the redrive was requested), counted by its first job in
    # the background, not by the API: None until then. A floor while `total_exact` is False (more entries in the
    # window than REDRIVE_COUNT_LIMIT): the last page then records how many its pages found.
    total: int | None = None
    total_exact: bool = True
    replayed: int = 0
    # Matched, but not replayed: their event left the retention window before their page ran, or a replay of them
    # was found delivered as it ran (recovered, not yet marked: services/redrive.py).
    skipped: int = 0
    page: int = 0  # the page the next job message must carry: makes a duplicate job message a no-op
    position: Position | None = None  # where the next page starts
    created_at: datetime
    completed_at: datetime | None = None
    error: str | None = None
    expires_at: int


def recovers(replay: Delivery) -> bool:
    """Whether the delivery, as it stands, recovers the delivery it replays: a replay, delivered. Its original, if
    it is dead or cancelled (REDRIVABLE_STATUSES), is then marked `recovered_by` it (the first such replay's id),
    keeping its status: the record of what happened to it stays true, and redrives skip it."""
    return replay.replay_of is not None and replay.status is DeliveryStatus.DELIVERED


class FailedPage(StrEnum):
    """What becomes of a redrive whose job for a page failed repeatedly (moved to the jobs' dead-letter queue)."""

    FAIL = "fail"  # its current page failed: it ends failed (what was replayed stays replayed)
    RESUME = "resume"  # the page before failed after being recorded, handing over: its current page is sent again
    NOTHING = "nothing"  # an older page's copy, or the redrive ended: another job carries it, or none needs to


def on_failed_page(redrive: Redrive | None, page: int) -> FailedPage:
    """A failed page never leaves its redrive `running` with nothing carrying it. Resuming is bounded: the resumed
    page's job, failing too, comes back as the current page and fails the redrive."""
    if redrive is None or redrive.state is not RedriveState.RUNNING:
        return FailedPage.NOTHING
    if page == redrive.page:
        return FailedPage.FAIL
    return FailedPage.RESUME if page == redrive.page - 1 else FailedPage.NOTHING


def failed_page_error(page: int) -> str:
    """The `error` of a redrive ended by a failed page."""
    return f"page {page} of the redrive failed repeatedly; redrive the rest again once the fault is fixed"
