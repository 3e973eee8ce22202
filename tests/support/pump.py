"""Driving the system on moto from a test: the SQS event source on a thread, and waiting for what it does."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import boto3

from local.provision import delivery_queue_urls
from local.sqs_source import poll_once

WAIT_LIMIT_SECONDS = 30.0


class QueuePump:
    """The SQS event source in a background thread: keeps feeding queues to the real handler."""

    def __init__(self, *urls: str) -> None:
        self.urls = urls
        self.sqs = boto3.client("sqs")
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    @classmethod
    def delivery(cls, env: Mapping[str, str]) -> QueuePump:
        """Feeding every delivery queue (each shard's fast and slow lanes)."""
        return cls(*delivery_queue_urls(env).all())

    def _run(self) -> None:
        while not self.stop.is_set():
            if sum(poll_once(self.sqs, url) for url in self.urls) == 0:
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
