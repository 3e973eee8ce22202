"""Workers killed under load: nothing accepted is lost, no request fails for a worker that was already dead, and a
crash costs at most the delivery queue's visibility timeout.

The local stack runs every invocation in a worker process of its function (`local.function_workers`), as Lambda runs
it in an execution environment. Here delivery, ingest and API workers are killed (SIGKILL: nothing in them runs)
at random while events arrive at about 20 a second for two endpoints (two demo consumers on 127.0.0.1), and the
API is read meanwhile. Then:

- every event the API accepted (202) reaches both consumers (each counts a webhook-id once);
- at most one request fails per ingest or API worker killed (the one it was running, as on Lambda; a producer retries
  it under its Idempotency-Key): a worker killed while idle costs no request, and none is handed to a dead worker;
- every delivery is made within the delivery queue's visibility timeout and a minute of the last kill: the design's
  bound on what a crash costs (an invocation killed mid-attempt holds its message, and its endpoint's message group,
  until the visibility timeout has passed; the message then comes back and takes the dead invocation's claim over).
  The real derived value is used (`schema.DELIVERY_QUEUE`), so the test takes a few minutes.

The figures are printed in the session's summary (tests/e2e/conftest.py).
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from hookrelay.adapters import schema
from local import gateway
from tests.e2e.harness import HTTP_TIMEOUT, SUMMARY, Consumer, LocalStack, eventually
from tests.e2e.test_local_stack_processes import descendants

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

EVENTS = 200
PER_SECOND = 20.0
PRODUCERS = 4
KILLED = ("delivery", "ingest", "api", "delivery", "ingest", "api", "delivery")  # one kill each, spread over the load
GIVE_UP_SECONDS = 120.0  # a producer's retries of one event (5xx, or 409 while a killed request's key is in flight)
# The contract bound: a crash holds a delivery's message for the visibility timeout, then it is attempted again.
CRASH_BOUND_SECONDS = schema.DELIVERY_QUEUE.visibility_timeout_seconds + 60


def workers_of(stack: LocalStack, function: str) -> list[int]:
    """The pids of the function's live worker processes (each names itself fn-<function>: local.processes)."""
    found = []
    for pid in descendants(stack.process.popen.pid):
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:  # exited meanwhile
            continue
        if name == f"fn-{function}":
            found.append(pid)
    return found


class Producer:
    """Publishes events at a steady rate, retrying a failed request under its Idempotency-Key as the README asks."""

    def __init__(self, stack: LocalStack, tenant_id: str) -> None:
        self.stack = stack
        self.tenant_id = tenant_id
        self.accepted: list[str] = []
        self.failures: Counter[int] = Counter()  # status -> answers that were not 202, by status
        self.lock = threading.Lock()

    def publish(self, number: int) -> None:
        key = str(uuid.uuid4())
        body = {"tenant_id": self.tenant_id, "type": "order.updated", "data": {"n": number}}
        headers = {"authorization": f"Bearer {self.stack.producer_key}", "idempotency-key": key}
        deadline = time.monotonic() + GIVE_UP_SECONDS
        while time.monotonic() < deadline:
            try:
                response = requests.post(self.stack.api_url + "/v1/events", json=body, headers=headers, timeout=30)
            except requests.RequestException:
                self._failed(0)
                time.sleep(1)
                continue
            if response.status_code == 202:
                with self.lock:
                    self.accepted.append(response.json()["event_id"])
                return
            self._failed(response.status_code)
            time.sleep(1)

    def _failed(self, status: int) -> None:
        with self.lock:
            self.failures[status] += 1


def read_the_api(stack: LocalStack, tenant_key: str, stop: threading.Event, answers: Counter[int]) -> None:
    """A tenant reading its deliveries meanwhile, so API workers are busy when some of them are killed."""
    session = requests.Session()
    while not stop.is_set():
        try:
            response = session.get(
                stack.api_url + "/v1/deliveries?limit=5",
                headers={"authorization": f"Bearer {tenant_key}"},
                timeout=HTTP_TIMEOUT,
            )
            answers[response.status_code] += 1
        except requests.RequestException:
            answers[0] += 1
        stop.wait(0.05)


def test_killing_workers_under_load_loses_nothing_and_costs_at_most_the_visibility_timeout(tmp_path: Path) -> None:
    stack = LocalStack(tmp_path)
    consumers = [Consumer(f"consumer-{n}", tmp_path) for n in range(2)]
    try:
        tenant_id, tenant_key = stack.tenant_id, stack.tenant_key
        for consumer in consumers:
            endpoint = stack.created("/v1/endpoints", tenant_key, {"url": consumer.url, "event_types": ["*"]})
            consumer.control(secret=endpoint["secret"])
        producer = Producer(stack, tenant_id)
        reads: Counter[int] = Counter()
        stop_reading = threading.Event()
        reader = threading.Thread(target=read_the_api, args=(stack, tenant_key, stop_reading, reads), daemon=True)
        reader.start()
        kills: Counter[str] = Counter()
        chooser = random.Random()
        kill_at = {int(EVENTS * (k + 1) / (len(KILLED) + 1)): function for k, function in enumerate(KILLED)}
        last_kill = time.time()
        start = time.monotonic()
        with ThreadPoolExecutor(PRODUCERS) as pool:
            for number in range(EVENTS):
                time.sleep(max(0.0, start + number / PER_SECOND - time.monotonic()))
                pool.submit(producer.publish, number)
                if number in kill_at:
                    function = kill_at[number]
                    victims = workers_of(stack, function)
                    assert victims, f"no {function} worker to kill"
                    os.kill(chooser.choice(victims), signal.SIGKILL)
                    kills[function] += 1
                    last_kill = time.time()
        stop_reading.set()
        reader.join(HTTP_TIMEOUT + 5)

        accepted = set(producer.accepted)

        def missing() -> dict[str, set[str]]:
            return {
                c.name: accepted - {e["webhook_id"] for e in c.received()["events"]}
                for c in consumers
                if accepted - {e["webhook_id"] for e in c.received()["events"]}
            }

        wait = max(1.0, last_kill + CRASH_BOUND_SECONDS - time.time())
        eventually(missing, "every accepted event delivered to both consumers", timeout=wait, predicate=lambda m: not m)
        received = [c.received() for c in consumers]
        delivered_at = [e["at"] for r in received for e in r["events"] if e["webhook_id"] in accepted]
        duplicates = sum(1 for r in received for request in r["requests"] if request["duplicate"])
        answers = producer.failures + reads
        server_errors = sum(n for status, n in answers.items() if status >= 500 or status == 0)
        function_errors = answers[gateway.FUNCTION_ERROR_STATUS]
        latest = max(delivered_at) - last_kill
        SUMMARY.extend(
            [
                f"fault injection: {EVENTS} events offered at {PER_SECOND:g}/s, {len(accepted)} accepted,"
                f" {len(delivered_at)} deliveries made to {len(consumers)} consumers (0 lost),"
                f" {duplicates} duplicate requests (deduplicated by webhook-id)",
                f"fault injection: workers killed {dict(kills)}; producer answers other than 202"
                f" {dict(producer.failures)}, API reads {dict(reads)}; 5xx in all {server_errors}",
                f"fault injection: last delivery {latest:.1f} s after the last kill (bound: visibility timeout"
                f" {schema.DELIVERY_QUEUE.visibility_timeout_seconds} s + 60 s = {CRASH_BOUND_SECONDS} s)",
            ]
        )
        print("\n".join(SUMMARY[-3:]))

        assert len(accepted) == EVENTS, f"refused for good: {producer.failures}"
        # A worker killed mid-request is a function error, answered as API Gateway answers one (502, which the
        # producer retries under its key); nothing else fails: no 500, no dropped connection.
        assert server_errors == function_errors, f"answers other than a function error's: {dict(answers)}"
        assert function_errors <= kills["ingest"] + kills["api"], (
            f"{function_errors} failed requests for {kills['ingest'] + kills['api']} ingest and API workers killed"
        )
        assert latest <= CRASH_BOUND_SECONDS
    finally:
        for consumer in consumers:
            consumer.stop()
        stack.stop()
