"""The local stack's terminal: one readable line per attempt (delivered ones too), heartbeats only when they did
something, every other record one line, and at DEBUG the JSON logs as deployed."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from aws_lambda_powertools import Logger

from hookrelay.domain.classification import FailureKind, Outcome
from hookrelay.domain.models import Attempt
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ports import AttemptReport
from local import terminal

STARTED = datetime(2026, 12, 3, 15, 26, tzinfo=UTC)


def report(attempt: Attempt, status: DeliveryStatus, next_at: datetime | None = None) -> AttemptReport:
    return AttemptReport(
        "dlv_1",
        status,
        attempt.number,
        sent=True,
        next_attempt_at=next_at,
        made=attempt,
        endpoint_id="ep_1",
        event_type="order.created",
    )


def test_a_delivered_attempt_has_its_line() -> None:
    made = Attempt(number=1, started_at=STARTED, latency_ms=12, status_code=200, outcome=Outcome.DELIVERED)
    line = terminal.attempt_line(report(made, DeliveryStatus.DELIVERED))
    assert "attempt 1  ep_1  order.created  -> 200 in 12 ms  delivered  (dlv_1)" in line


def test_a_failed_attempt_says_why_and_when_the_next_comes() -> None:
    made = Attempt(
        number=2,
        started_at=STARTED,
        latency_ms=3,
        error=FailureKind.DNS,
        error_detail="could not resolve host example.invalid",
        outcome=Outcome.RETRY,
    )
    line = terminal.attempt_line(report(made, DeliveryStatus.RETRYING, STARTED + timedelta(seconds=4)), STARTED)
    assert "-> dns_error: could not resolve host example.invalid in 3 ms  retrying, next attempt in 4 s" in line


@pytest.fixture
def sweeper(request: pytest.FixtureRequest) -> Iterator[tuple[Logger, io.StringIO]]:
    """A Powertools logger of a function of its own (named after the test), writing to a buffer."""
    out = io.StringIO()
    name = f"terminal-{request.node.name}"
    logger = Logger(service=name, logger_handler=logging.StreamHandler(out))
    yield logger, out
    logging.getLogger(name).handlers.clear()


def test_heartbeats_print_only_when_they_did_something(sweeper: tuple[Logger, io.StringIO]) -> None:
    logger, out = sweeper
    terminal.install(logger.service, "INFO")
    logger.info("endpoint health sweep", extra={"examined": 3, "notices": 0, "disabled": []})
    logger.info("reconciled", extra={"examined": 9, "resent": [], "surfaced": [], "deleted": 0, "redrives": []})
    assert out.getvalue() == ""
    logger.info("reconciled", extra={"examined": 9, "resent": ["dlv_7"], "surfaced": [], "deleted": 0})
    logger.info("attempt", extra={"delivery_id": "dlv_1", "sent": True})  # printed from its report instead
    logger.info("attempt", extra={"delivery_id": "dlv_2", "sent": False, "parked": True})  # no attempt: its line
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and f"{logger.service} reconciled" in lines[0] and "resent=['dlv_7']" in lines[0]
    assert "attempt  delivery_id=dlv_2 sent=False parked=True" in lines[1]
    assert not any(line.startswith("{") for line in lines)


def test_at_debug_the_logs_are_the_deployed_json(sweeper: tuple[Logger, io.StringIO]) -> None:
    logger, out = sweeper
    terminal.install(logger.service, "DEBUG")
    logger.info("endpoint health sweep", extra={"examined": 0, "notices": 0, "disabled": []})
    assert out.getvalue().startswith("{") and '"message":"endpoint health sweep"' in out.getvalue()
