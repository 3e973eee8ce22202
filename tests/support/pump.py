"""Driving the system on moto from a test: the SQS event source on a thread, and waiting for what it does."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import boto3

from local.sqs_source import poll_once

WAIT_LIMIT_SECONDS = 30.0


class QueuePump:
    """The SQS event source in a background thread: keeps feeding the delivery queue to the real handler."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.sqs = boto3.client("sqs")
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            if poll_once(self.sqs, self.url) == 0:
                self.stop.wait(0.05)

    def __enter__(self) -> QueuePump:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)


def wait_until(condition: Callable[[], Any], what: str, limit: float = WAIT_LIMIT_SECONDS) -> Any:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"gave up after {limit}s waiting for {what}")
