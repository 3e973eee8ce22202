"""A redrive: the record of one request to replay an endpoint's ended deliveries in a time range."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from hookrelay.domain.models import Record
from hookrelay.domain.paging import Position
from hookrelay.domain.status import DeliveryStatus

REDRIVABLE_STATUSES = frozenset({DeliveryStatus.DEAD, DeliveryStatus.CANCELLED})


class RedriveState(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


class Redrive(Record):
    id: str
    tenant_id: str
    endpoint_id: str
    since: datetime
    until: datetime
    status_filter: DeliveryStatus
    state: RedriveState = RedriveState.RUNNING
    # Deliveries that matched (those that had ended when the redrive was requested), counted by its first job in
    # the background, not by the API: None until then.
    total: int | None = None
    replayed: int = 0
    skipped: int = 0  # matched, but their event left the retention window before their page ran
    page: int = 0  # the page the next job message must carry: makes a duplicate job message a no-op
    position: Position | None = None  # where the next page starts
    created_at: datetime
    completed_at: datetime | None = None
    error: str | None = None
    expires_at: int
