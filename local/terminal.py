"""What the local stack's terminal shows of the functions: one readable line per delivery attempt, heartbeats only
when they did something, every other log record as one line. At `--log-level DEBUG`, the functions' JSON logs as
deployed instead, every record.

In AWS the functions log JSON (Powertools) and a delivered attempt has no line of its own (the invocation's metrics
record lists them); here metrics are off, so each worker of the delivery function prints the attempts its
invocation made (`handlers.delivery.attempts_made`) after it, delivered ones included. Nothing here changes what the
functions log in AWS.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TextIO

from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from hookrelay.services.ports import AttemptReport

# The schedules' summaries, quiet when nothing happened: every few seconds on --fast, they would fill the terminal.
HEARTBEATS: dict[str, Callable[[Mapping[str, Any]], bool]] = {
    "endpoint health sweep": lambda fields: bool(fields.get("notices") or fields.get("disabled")),
    "reconciled": lambda fields: any(
        fields.get(key) for key in ("resent", "surfaced", "deleted", "redrives", "skipped_before")
    ),
}
ATTEMPT_MESSAGE = "attempt"  # the delivery function's line for an undelivered attempt: printed from its report
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def extras(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a handler logged with `extra=`."""
    return {key: value for key, value in vars(record).items() if key not in _STANDARD and not key.startswith("_")}


class Quiet(logging.Filter):
    """Drops heartbeats that did nothing, and the lines of attempts made (printed from their reports instead); a
    message that made no attempt (parked, a duplicate, forwarded to the slow lane) keeps its line."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message == ATTEMPT_MESSAGE:
            return not extras(record).get("sent")
        did_something = HEARTBEATS.get(message)
        return did_something is None or did_something(extras(record))


class OneLine(LambdaPowertoolsFormatter):
    """`HH:MM:SS  function  message  key=value …` (a Powertools formatter still: the Logger keeps appending the
    invocation's keys to it, which this line leaves out)."""

    def __init__(self, function: str) -> None:
        super().__init__()
        self.function = function

    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(f"{key}={value}" for key, value in extras(record).items() if value not in (None, [], ""))
        line = f"{clock(record.created)}  {self.function:<10} {record.getMessage()}" + (f"  {fields}" if fields else "")
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def clock(epoch: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(epoch))


def install(function: str, log_level: str) -> None:
    """In a function's worker: its logger (Powertools', named after the function) prints readable lines, once each
    (not also through the root logger). At DEBUG, left as deployed."""
    if logging.getLevelName(log_level.upper()) == logging.DEBUG:
        return
    logger = logging.getLogger(function)
    logger.propagate = False
    for handler in logger.handlers:
        handler.setFormatter(OneLine(function))
        handler.addFilter(Quiet())


def attempt_line(report: AttemptReport, now: datetime | None = None) -> str:
    """`HH:MM:SS  attempt 2  ep_…  order.created  -> 200 in 12 ms  delivered` (dlv_…), or the error and what next."""
    made = report.made
    if made is None:
        raise ValueError("only an attempt that was made has a line")
    if made.error is not None:
        answer = f"{made.error.value}: {made.error_detail}" if made.error_detail else made.error.value
    else:
        answer = str(made.status_code)
    outcome = report.status.value if report.status is not None else "?"
    if report.next_attempt_at is not None:
        wait = (report.next_attempt_at - (now or made.started_at)).total_seconds()
        outcome += f", next attempt in {max(wait, 0):.0f} s"
    if report.parked:
        outcome += ", parked behind the endpoint's open circuit"
    return (
        f"{clock(made.started_at.timestamp())}  attempt {report.attempt}  {report.endpoint_id}  {report.event_type}"
        f"  -> {answer} in {made.latency_ms} ms  {outcome}  ({report.delivery_id})"
    )


def print_attempts(reports: list[AttemptReport], out: TextIO | None = None) -> None:
    stream = out or sys.stderr
    for report in reports:
        if report.made is not None:
            print(attempt_line(report, datetime.now(tz=report.made.started_at.tzinfo)), file=stream, flush=True)
