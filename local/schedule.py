"""Scheduled functions, the way an EventBridge rule invokes them: a timer thread per function until `stop`."""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import UTC, datetime
from typing import Any

from local.lambda_runtime import invoke

log = logging.getLogger("hookrelay.local.schedule")


def scheduled_event(rule_name: str) -> dict[str, Any]:
    """The event EventBridge sends a function on a schedule."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": "us-east-1",
        "resources": [f"arn:aws:events:us-east-1:123456789012:rule/{rule_name}"],
        "detail": {},
    }


class ScheduledFunction:
    """Invokes `function` every `every_seconds` (the first time one interval after `start`) until `stop`, with the
    scheduled event and `extra` in it."""

    def __init__(self, function: str, every_seconds: float, extra: dict[str, Any] | None = None) -> None:
        self.function = function
        self.every_seconds = every_seconds
        self.extra = extra or {}
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{function}-schedule", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping.wait(self.every_seconds):
            try:
                invoke(self.function, self.event())
            except Exception:  # as in Lambda, a failed invocation is logged and the schedule goes on
                log.exception("scheduled %s invocation failed", self.function)

    def event(self) -> dict[str, Any]:
        return {**scheduled_event(f"hookrelay-{self.function}"), **self.extra}

    def stop(self, grace_seconds: float = 30.0) -> None:
        """No more invocations; wait up to `grace_seconds` for one that is running (its thread is a daemon). The
        local stack gives it little: it ends the function workers next, as Lambda ends an environment, and a sweep
        of a long backlog would otherwise hold a stop past what a caller waits for."""
        self._stopping.set()
        self._thread.join(timeout=grace_seconds)
