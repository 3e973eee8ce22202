"""Holding a rate-limited endpoint to its deliveries per second (domain/pacing.py): the slot a send may start at."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from hookrelay.domain import pacing
from hookrelay.domain.models import Endpoint
from hookrelay.services.ports import EndpointPacer


def _us(moment: datetime) -> int:
    return round(moment.timestamp() * pacing.MICROS)


def _at(us: int) -> datetime:
    return datetime.fromtimestamp(us / pacing.MICROS, UTC)


@dataclass(frozen=True)
class Pacing:
    pacer: EndpointPacer

    def slot(self, endpoint: Endpoint, now: datetime, budget_seconds: float | None) -> datetime | None:
        """When this send to the endpoint may start: now for an endpoint with no limit (nothing is read or written),
        else its reserved slot; None when no slot is free within `budget_seconds` (nothing was reserved). A budget
        of None takes the next slot however far (a slow lane's first attempt: domain/pacing.py says why it is near).

        A crash after the reservation loses the slot: one send fewer than the limit that second, nothing else."""
        limit = endpoint.rate_limit_per_second
        if limit is None:
            return now
        now_us = _us(now)
        latest = None if budget_seconds is None else now_us + round(budget_seconds * pacing.MICROS)
        slot = self.pacer.reserve(endpoint.id, now_us, pacing.slot_interval_us(limit), latest)
        return None if slot is None else _at(slot)

    def backlog_seconds(self, endpoint: Endpoint, now: datetime) -> float | None:
        """How far ahead the endpoint's slots are taken (sends waiting for their turn); None with no limit."""
        if endpoint.rate_limit_per_second is None:
            return None
        return pacing.backlog_seconds(self.pacer.next_free(endpoint.id), _us(now))
