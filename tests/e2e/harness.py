"""Starting the local stack and demo consumers as a user does, as processes, and always stopping them.

Each process prints one JSON line when it is ready; its other output goes to a log file that is
shown when something fails. Every wait is bounded; every port is on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import boto3
import requests

from hookrelay.adapters import schema
from local.provision import queue_name

REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0
HTTP_TIMEOUT = 10.0

T = TypeVar("T")

# Lines a test adds for the session's summary (its measured figures), printed by tests/e2e/conftest.py.
SUMMARY: list[str] = []
# Secrets the tests gave the platform (credentials, secret header values, tokens, signing secrets): no line of a local
# stack's log may hold one (checked when the session ends, tests/e2e/conftest.py).
SECRETS: set[str] = set()


class Process:
    """A command run from the repository root, like `make run` runs it; `stop` ends it, SIGTERM first.

    Every process started is tracked until stopped, so `kill_leftovers` can end whatever a failing test or
    fixture left behind (the e2e conftest calls it when the session ends).
    """

    running: ClassVar[set[Process]] = set()
    logs: ClassVar[dict[Path, str]] = {}  # every process's log file, and the process's name

    def __init__(self, name: str, args: list[str], log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        Process.logs[self.log_path] = name
        self._log = self.log_path.open("a")
        self.popen = subprocess.Popen(  # noqa: S603 - our own interpreter and module, fixed arguments
            [sys.executable, *args],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=os.environ | {"PYTHONUNBUFFERED": "1"},
        )
        Process.running.add(self)
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self._lines.put(line)
            self._log.write(line)
            self._log.flush()
        self._lines.put(None)

    def ready_document(self, timeout: float = READY_TIMEOUT) -> dict[str, Any]:
        """The first line the process prints: one JSON object, once it is ready."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise AssertionError(f"{self.name} not ready within {timeout}s\n{self.log()}") from None
        if line is None:
            raise AssertionError(f"{self.name} exited ({self.popen.wait()}) before it was ready\n{self.log()}")
        return json.loads(line)

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(STOP_TIMEOUT)
        Process.running.discard(self)

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text()[-5000:]

    def stop(self, number: int = signal.SIGTERM) -> int:
        Process.running.discard(self)
        if self.popen.poll() is None:
            self.popen.send_signal(number)
            try:
                self.popen.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(STOP_TIMEOUT)
                raise AssertionError(f"{self.name} ignored {signal.Signals(number).name}\n{self.log()}") from None
        self._log.close()
        return self.popen.returncode


def kill_leftovers() -> list[str]:
    """Kill every process still running; returns their names."""
    leftovers = list(Process.running)
    for process in leftovers:
        process.kill()
    return [process.name for process in leftovers]


def eventually(
    probe: Callable[[], T],
    what: str,
    timeout: float = 30.0,
    predicate: Callable[[T], Any] = bool,
    interval: float = 0.2,
) -> T:
    """Poll `probe` until `predicate` holds for what it returns (returned), or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if predicate(last):
            return last
        time.sleep(interval)
    raise AssertionError(f"not within {timeout}s: {what} (last seen: {last!r})")


class LocalStack:
    """`python -m local --json [--fast] --port 0`, driven over HTTP like any API client."""

    def __init__(self, log_dir: Path, *options: str, fast: bool = True) -> None:
        """`options`: more of `python -m local`'s flags (e.g. `--api-key-rate 0` for a load from one key); `fast`:
        the fast retry schedule and sweeps (else the deployed ones, as `make run` starts the stack)."""
        command = ["-m", "local", "--json", *(["--fast"] if fast else []), "--port", "0", *options]
        self.process = Process("local-stack", command, log_dir)
        ready = self.process.ready_document()
        self.api_url: str = ready["api_url"]
        self.admin_key: str = ready["admin_key"]
        self.producer_key: str = ready["producer_key"]
        self.tenant_id: str = ready["tenant_id"]
        self.tenant_key: str = ready["tenant_key"]
        self.aws_endpoint_url: str = ready["aws_endpoint_url"]
        self.dynamodb_endpoint_url: str = ready["dynamodb_endpoint_url"]  # DynamoDB has a server of its own
        self.portal_url: str = ready["portal_url"]  # the demo tenant's portal link
        self.delivery_role_arn: str = ready["delivery_role_arn"]  # what an AWS destination's role trusts
        self.http = requests.Session()

    def call(self, method: str, path: str, token: str, body: Any = None) -> requests.Response:
        return self.http.request(
            method,
            self.api_url + path,
            json=body,
            headers={"authorization": f"Bearer {token}"},
            timeout=HTTP_TIMEOUT,
        )

    def created(self, path: str, token: str, body: Any) -> dict[str, Any]:
        response = self.call("POST", path, token, body)
        assert response.status_code in (201, 202), f"POST {path}: {response.status_code} {response.text}"
        document: dict[str, Any] = response.json()
        # What the API shows once and the platform must never log: a new signing secret, a new tenant's API key.
        SECRETS.update(
            value
            for value in (document.get("secret"), (document.get("api_key") or {}).get("token"))
            if isinstance(value, str)
        )
        return document

    def new_tenant(self, name: str) -> tuple[str, str]:
        tenant = self.created("/v1/tenants", self.admin_key, {"name": name})
        return tenant["tenant_id"], tenant["api_key"]["token"]

    def publish(self, tenant_id: str, event_type: str, data: dict[str, Any]) -> dict[str, Any]:
        return self.created("/v1/events", self.producer_key, {"tenant_id": tenant_id, "type": event_type, "data": data})

    def delivery(self, tenant_key: str, delivery_id: str) -> dict[str, Any]:
        """The delivery with its attempts, as its tenant reads it (GET /v1/deliveries/{id})."""
        response = self.call("GET", f"/v1/deliveries/{delivery_id}", tenant_key)
        assert response.status_code == 200, f"GET delivery {delivery_id}: {response.status_code} {response.text}"
        return response.json()

    def deliveries(self, tenant_key: str, query: str) -> list[dict[str, Any]]:
        response = self.call("GET", f"/v1/deliveries?{query}", tenant_key)
        assert response.status_code == 200, f"GET deliveries?{query}: {response.status_code} {response.text}"
        return response.json()["data"]

    def portal_link(self, tenant_key: str, **body: Any) -> str:
        """A new consumer portal link for the key's tenant (POST /v1/portal-sessions)."""
        return str(self.created("/v1/portal-sessions", tenant_key, body)["portal_url"])

    # Looking inside "AWS" (moto's server), read-only, for what the API does not show.
    def _aws(self, service: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=self.dynamodb_endpoint_url if service == "dynamodb" else self.aws_endpoint_url,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )

    def dead_letters(self) -> list[dict[str, Any]]:
        sqs = self._aws("sqs")
        url = sqs.get_queue_url(QueueName=queue_name(schema.DEAD_LETTER_QUEUE))["QueueUrl"]
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=schema.SQS_MAX_BATCH, VisibilityTimeout=0)
        return [json.loads(message["Body"]) for message in received.get("Messages", [])]

    def stop(self, number: int = signal.SIGTERM) -> int:
        self.http.close()
        return self.process.stop(number)


class Consumer:
    """`python -m local.consumer --json`: the demo consumer, which can be stopped and brought back on its port."""

    def __init__(self, name: str, log_dir: Path, port: int = 0, mode: str = "ok") -> None:
        self.name = name
        self.log_dir = log_dir
        self.mode = mode
        self.port = port
        self.process: Process | None = None
        self.secret: str | None = None
        self.start()

    def start(self) -> None:
        args = ["-m", "local.consumer", "--json", "--port", str(self.port), "--mode", self.mode]
        self.process = Process(self.name, args, self.log_dir)
        ready = self.process.ready_document()
        self.url: str = ready["url"]
        self.control_url: str = ready["control_url"]
        self.port = int(self.url.split(":")[2].split("/")[0])

    def control(self, **change: Any) -> None:
        requests.post(self.control_url, json=change, timeout=HTTP_TIMEOUT).raise_for_status()
        self.mode = change.get("mode", self.mode)
        self.secret = change.get("secret", self.secret)

    def received(self) -> dict[str, Any]:
        return requests.get(self.control_url.replace("/_control", "/_received"), timeout=HTTP_TIMEOUT).json()

    def stop(self) -> int:
        assert self.process is not None
        return self.process.stop()

    def restart(self, secret: str) -> None:
        """Back on the same port (the endpoint's URL), with the secret it verifies with."""
        self.start()
        self.control(secret=secret)


@contextmanager
def stack_and_consumers(prefix: str, *, fast: bool = True) -> Iterator[tuple[LocalStack, Callable[..., Consumer]]]:
    """A local stack (`LocalStack`'s `fast`), and `consumer(name, mode=…)` to start demo consumers beside it, logging
    to a temporary directory; every one of them stopped at the end (the benchmarks' set-up)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as logs:
        log_dir = Path(logs)
        stack = LocalStack(log_dir, fast=fast)
        started: list[Consumer] = []

        def consumer(name: str, mode: str = "ok") -> Consumer:
            started.append(Consumer(name, log_dir, mode=mode))
            return started[-1]

        try:
            yield stack, consumer
        finally:
            for running in started:
                running.stop()
            stack.stop()
