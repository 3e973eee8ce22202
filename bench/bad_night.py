"""The bad night: one endpoint down while N events arrive in order, one healthy endpoint beside it.

    python bench/bad_night.py [--events N ...] [--outage SECONDS] [--rate-limit PER_SECOND]

In process on moto, with the real handlers, tables, queue and state machine (the ASL run by moto's
interpreter), and two scripted consumers on 127.0.0.1. One tenant, two endpoints subscribed to every event.
First a control (both endpoints up, every event to both), then the night: the failing endpoint answers 503
for the outage, then 200. Printed for each N: state-machine executions and HTTP attempts to the failing
endpoint during the outage, events delivered, order violations, time from recovery to drained (circuit
closed), and the healthy endpoint's latency beside the outage as a ratio to its baseline, side by side.

The failing endpoint declares a rate limit (`rate_limit_per_second`, 50 by default; `--rate-limit 0` for none,
domain/pacing.py): the drain keeps under it, so recovery to drained takes at least N / limit seconds, and the most
requests it receives starting in any one second (from the consumer's own receive times) is printed beside it.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")  # the figures, not thousands of log lines

import boto3

from bench.common import heading, machine, median, percentile, table
from hookrelay.adapters import schema
from hookrelay.adapters.dynamodb import EndpointTable
from hookrelay.domain.circuit import CircuitState
from hookrelay.domain.classification import ATTEMPT_TIMEOUT_SECONDS
from local import lambda_runtime
from local.provision import delivery_queue_urls
from local.sqs_source import poll_once
from scripts.create_admin_key import create_admin_key
from tests.conftest import Platform
from tests.support.aws import moto_stack
from tests.support.consumer import Reply, ScriptedConsumer

SCHEDULE = json.dumps({"name": "bad-night", "gaps": [0, 1, 2, 4, 8], "repeat_every": 80, "horizon": 3000})
DRAIN_LIMIT_SECONDS = 600.0
BASELINE_EVENTS = 200
# The events' ordering keys, as many as the endpoint's default max_in_flight (its message groups): the contract keeps
# each key's order (DESIGN: per-key order; the drain in event order at the endpoint's concurrency), while the groups
# are sent to at once, so an event of one key may overtake an earlier one of another (counted apart, not a violation).
KEYS = 4


class Pump:
    """The delivery queue's event source on one thread: in one process, concurrent invocations would share the
    handlers' Powertools state (metrics), which Lambda never does (one invocation per environment at a time)."""

    def __init__(self, urls: list[str], threads: int = 1) -> None:
        """`urls`: every delivery queue's, each fed by `threads` threads of its own."""
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._run, args=(url,), daemon=True) for url in urls for _ in range(threads)
        ]

    def _run(self, url: str) -> None:
        sqs = boto3.client("sqs")
        while not self.stop.is_set():
            if poll_once(sqs, url) == 0:
                self.stop.wait(0.02)

    def __enter__(self) -> Pump:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=10)


def one_invocation_at_a_time() -> None:
    """In one process every function shares Powertools' metric store; the publisher's and the event source's
    invocations would flush each other's metrics (and raise on an empty set). Lambda runs one invocation per
    environment at a time; so does this benchmark, across functions."""
    lock = threading.RLock()
    run = lambda_runtime.invoke_here

    def invoke_here(function: str, event: dict[str, Any]) -> Any:
        with lock:
            return run(function, event)

    lambda_runtime.invoke_here = invoke_here


def publish(platform: Platform, producer: str, tenant_id: str, n: int) -> tuple[str, float]:
    started = time.time()
    body = {"tenant_id": tenant_id, "type": "a.b", "data": {"n": n}, "ordering_key": f"key-{n % KEYS}"}
    accepted = platform.call("POST", "/v1/events", producer, body)
    assert accepted.status == 202, accepted.body
    return accepted.json()["event_id"], started


def latencies(consumer: ScriptedConsumer, published: dict[str, float]) -> list[float]:
    first: dict[str, float] = {}
    for request, answer in zip(consumer.received, consumer.answers, strict=False):
        event_id = request.headers["webhook-id"]
        if answer < 300 and event_id in published and event_id not in first:
            first[event_id] = request.at - published[event_id]
    return list(first.values())


def order_violations(consumer: ScriptedConsumer, order: list[str]) -> tuple[int, int, int]:
    """(events delivered, events whose first success came after a later event's of the same ordering key, the same
    across keys). Event n has key n % KEYS (`publish`)."""
    position = {event_id: i for i, event_id in enumerate(order)}
    seen: list[int] = []
    done: set[int] = set()
    for request, answer in zip(consumer.received, consumer.answers, strict=False):
        event_id = request.headers["webhook-id"]
        if answer < 300 and event_id in position and position[event_id] not in done:
            seen.append(position[event_id])
            done.add(position[event_id])
    latest: dict[int, int] = {}
    per_key = 0
    for p in seen:
        per_key += latest.get(p % KEYS, -1) > p
        latest[p % KEYS] = max(latest.get(p % KEYS, -1), p)
    highest, across = -1, 0
    for p in seen:
        across += highest > p
        highest = max(highest, p)
    return len(seen), per_key, across


def busiest_second(consumer: ScriptedConsumer, since: float) -> int:
    """The most requests the consumer received in any one-second window after `since` (its own clock)."""
    times, most, low = sorted(r.at for r in consumer.received if r.at >= since), 0, 0
    for high, at in enumerate(times):
        while at - times[low] >= 1.0:
            low += 1
        most = max(most, high - low + 1)
    return most


def night(events: int, outage: float, rate_limit: int | None = None) -> dict[str, object]:
    # The deployed attempt timeout, not the moto tests' 2 s: one saturated process answers some requests late.
    with moto_stack(retry_schedule=SCHEDULE, attempt_timeout_seconds=ATTEMPT_TIMEOUT_SECONDS) as env:
        platform = Platform(env=env, admin_token=create_admin_key(env[schema.API_KEYS.env_var]).token)
        failing, healthy = ScriptedConsumer(), ScriptedConsumer()
        tenant_id, token = platform.new_tenant()
        healthy_id = platform.new_endpoint(token, healthy.url)["id"]
        created = platform.call(
            "POST",
            "/v1/endpoints",
            token,
            {"url": failing.url, "event_types": ["*"], "rate_limit_per_second": rate_limit},
        )
        assert created.status == 201, created.body
        failing_id = created.json()["id"]
        producer = platform.new_key("producer")
        sfn = boto3.client("stepfunctions")

        def executions() -> int:
            return len(sfn.list_executions(stateMachineArn=env[schema.RETRY_STATE_MACHINE_ARN])["executions"])

        with Pump(delivery_queue_urls(env).all()):
            baseline = {}
            for n in range(min(BASELINE_EVENTS, events)):  # the control: both endpoints up, the same fan-out
                event_id, at = publish(platform, producer, tenant_id, n)
                baseline[event_id] = at
            time.sleep(2)
            failing.default = Reply(503)
            order: list[str] = []
            published: dict[str, float] = {}
            start_executions = executions()
            down_at = time.monotonic()
            for n in range(events):
                event_id, at = publish(platform, producer, tenant_id, n)
                order.append(event_id)
                published[event_id] = at
            while time.monotonic() - down_at < outage:
                time.sleep(0.2)
            outage_executions = executions() - start_executions
            # Failed requests only: the failing consumer also received the control phase's events (answered 200,
            # some of them late, behind the queue), which an earlier version of this count included.
            failed_attempts = sum(1 for answer in failing.answers if answer >= 300)
            failing.default = Reply(200)
            recovered, recovered_at = time.monotonic(), time.time()
            endpoints = EndpointTable(boto3.resource("dynamodb").Table(env[schema.ENDPOINTS.env_var]))
            while time.monotonic() - recovered < DRAIN_LIMIT_SECONDS:
                endpoint = endpoints.get(tenant_id, failing_id)
                delivered, _, _ = order_violations(failing, order)
                if endpoint and endpoint.circuit is CircuitState.CLOSED and delivered == events:
                    break
                time.sleep(0.5)
            drained = time.monotonic() - recovered
        delivered, violations, overtaken = order_violations(failing, order)
        base, beside = latencies(healthy, baseline), latencies(healthy, published)
        failing.close()
        healthy.close()
        assert healthy_id
        return {
            "events": events,
            "executions during the outage": outage_executions,
            "attempts to the failing endpoint (failed, during the outage)": failed_attempts,
            "requests to the failing endpoint for the N events": sum(
                1 for request in failing.received if request.headers["webhook-id"] in published
            ),
            "events delivered to it": delivered,
            f"order violations (per ordering key; {KEYS} keys)": violations,
            "overtaken by a later event of another key (not promised)": overtaken,
            "rate limit (per second)": rate_limit or "none",
            "recovery to drained (s)": round(drained, 1),
            "N / limit (s)": round(events / rate_limit, 1) if rate_limit else "-",
            "most requests to it in any second after recovery": busiest_second(failing, recovered_at),
            "healthy p50 ms: control / beside the outage": f"{median(base) * 1000:.0f} / {median(beside) * 1000:.0f}",
            "healthy p50 ratio": round(median(beside) / median(base), 2),
            "healthy p95 ratio": round(percentile(beside, 0.95) / percentile(base, 0.95), 2),
        }


def main() -> None:
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 <pid>` prints every thread's stack, if a run seems stuck
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, nargs="+", default=[2000, 4000])
    parser.add_argument("--outage", type=float, default=30.0)
    parser.add_argument(
        "--rate-limit", type=int, default=50, help="the failing endpoint's deliveries a second (0: none)"
    )
    args = parser.parse_args()
    heading("The bad night: one endpoint down while N events arrive, one healthy beside it")
    print(machine())
    one_invocation_at_a_time()
    rows = [night(n, args.outage, args.rate_limit or None) for n in args.events]
    print(
        table(["", *(f"N = {r['events']}" for r in rows)], [[name, *(row[name] for row in rows)] for name in rows[0]])
    )


if __name__ == "__main__":
    main()
