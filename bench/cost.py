"""Cost per million events, from AWS requests, state transitions and Lambda GB-s counted in a run on moto.

    python bench/cost.py [--events N] [--payload-bytes B]

The whole system runs in this process on moto (`tests.support.aws.moto_stack`): events go in through
`local.gateway` (the real authorizer and ingest function), deliveries come out through the local SQS
event source (`local.sqs_source.poll_once`) and the real delivery function, and retries through the
real retry workflow executed by moto's interpreter. `bench.metering` counts every AWS request made,
sizes DynamoDB and SQS requests, and times every function invocation; state transitions are read
from the executions' histories, and so are the bytes of the execution log Step Functions writes at level ALL
(`execution_log_bytes`). Those counts, per event, times the list prices in PRICES give the
cost per million events of three scenarios:

- happy path: one endpoint, every delivery answered 200;
- one endpoint down for a 6-hour outage, then back (the bad night of issue 9): its first five
  deliveries fail and open its circuit, every later one is parked, one probe workflow retries the oldest
  on the schedule, four probes fail (as many as the default schedule makes in 6 hours), the fifth gets
  through and the drain delivers the parked deliveries in order. Hours cannot be waited out, so the
  probes run 1 s apart: what the outage costs depends on how many attempts, probes, workflow loops and
  record updates it takes, not on how long the Wait states last;
- fan-out: ten endpoints subscribed to every event, all answering 200.

Not counted: the free tiers; fixed monthly costs (idle SQS polling by the event source, alarms,
dashboards, custom metrics, storage); X-Ray traces; Lambda's own START/END/REPORT log lines; data
transfer out to the endpoints.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import boto3

from bench.common import heading, machine, table
from bench.metering import BENCH, EVENT_SOURCE, UNATTRIBUTED, ApiCall, Meter
from hookrelay.adapters import schema
from hookrelay.domain.circuit import OPEN_AFTER_FAILURES
from hookrelay.domain.classification import ATTEMPT_TIMEOUT_SECONDS
from hookrelay.domain.schedule import DEFAULT_SCHEDULE, RetrySchedule
from hookrelay.functions import AUTHORIZER, BY_NAME, DELIVERY, INGEST, RECONCILER, queue_trigger
from local import gateway
from local.sqs_source import poll_once
from scripts.create_admin_key import create_admin_key
from tests.support.aws import moto_stack
from tests.support.consumer import Reply, ScriptedConsumer


@dataclass(frozen=True)
class Price:
    usd: float
    per: float  # usd per this many units
    unit: str
    source: str

    def cost(self, quantity: float) -> float:
        return quantity * self.usd / self.per


# List prices, region us-east-1 (US East, N. Virginia), on-demand, first tier, no free tier, as published
# on these pages when this table was written (2026-11-30).
PRICES_REGION = "us-east-1"
PRICES_DATE = "2026-11-30"
PRICES: dict[str, Price] = {
    "api_requests": Price(
        1.00, 1e6, "HTTP API request", "https://aws.amazon.com/api-gateway/pricing/ (HTTP APIs, first 300 M/month)"
    ),
    "lambda_requests": Price(0.20, 1e6, "Lambda request", "https://aws.amazon.com/lambda/pricing/"),
    "lambda_gb_s": Price(
        0.0000133334, 1, "GB-s (Arm)", "https://aws.amazon.com/lambda/pricing/ (Arm, first 7.5 billion GB-s/month)"
    ),
    "sqs_fifo": Price(0.50, 1e6, "FIFO request (64 KiB chunk)", "https://aws.amazon.com/sqs/pricing/"),
    "sqs_standard": Price(0.40, 1e6, "standard request (64 KiB chunk)", "https://aws.amazon.com/sqs/pricing/"),
    "dynamodb_wru": Price(0.625, 1e6, "write request unit", "https://aws.amazon.com/dynamodb/pricing/on-demand/"),
    "dynamodb_rru": Price(0.125, 1e6, "read request unit", "https://aws.amazon.com/dynamodb/pricing/on-demand/"),
    "transitions": Price(
        0.025, 1e3, "state transition", "https://aws.amazon.com/step-functions/pricing/ (Standard workflows)"
    ),
    "logs_gb": Price(0.50, 1, "GB of logs", "https://aws.amazon.com/cloudwatch/pricing/ (Logs ingestion, Standard)"),
    "vended_logs_gb": Price(
        0.50,
        1,
        "GB of vended logs",
        "https://aws.amazon.com/cloudwatch/pricing/ (Vended Logs to CloudWatch Logs, first 10 TB; Step Functions"
        " execution logs are billed at this rate: docs.aws.amazon.com/step-functions/latest/dg/cw-logs.html)",
    ),
}

API_PAYLOAD_UNIT = 512 * 1024  # HTTP API requests are metered in 512 KB increments
WARM_UP_EVENTS = 3
DRAIN_LIMIT_SECONDS = 120.0
FUNCTIONS = (AUTHORIZER.name, INGEST.name, DELIVERY.name)  # the functions every event goes through


def deployed_settings() -> tuple[int, int]:
    """The billed functions' memory (one size, as the table of functions gives them) and the attempt timeout."""
    (memory_mb,) = {BY_NAME[name].memory_mb for name in FUNCTIONS}
    return memory_mb, ATTEMPT_TIMEOUT_SECONDS


def outage_schedule(probes: int) -> str:
    """The opening failures' first retry 2 s later (so the failures that open the circuit are first attempts,
    as when events come faster than the schedule's first gap), then probes 1 s apart: `probes` failed probes
    and the one that gets through take about `probes` + 3 s instead of hours."""
    return json.dumps(
        {
            "name": "outage",
            "gaps": [0, 2] + [1] * (probes + 1),
            "repeat_every": 2,  # a long horizon (within the 50 attempts a schedule may plan): the drain's
            "horizon": 90,  # deliveries stay well within their own
            "jitter": 0,
        }
    )


def probes_in(schedule: RetrySchedule, outage_seconds: int) -> int:
    """Probes that fail during an outage of `outage_seconds` from the circuit's opening (the published gaps,
    anchored at the opening: probe n where a delivery's attempt n+1 would be); the next one gets through."""
    return sum(1 for planned in schedule.planned() if 0 < planned.offset <= outage_seconds)


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    events: int
    endpoints: int
    status: int  # what the endpoints answer, once `failures` is used up
    retry_schedule: str = "default"
    failures: int = 0  # the first requests answered 503 (the outage), in all


@dataclass
class Run:
    scenario: Scenario
    meter: Meter
    api_requests: int = 0
    api_units: int = 0
    transitions: int = 0
    executions: int = 0
    probe_executions: int = 0
    workflow_log_bytes: int = 0  # Step Functions execution logs (level ALL, with execution data)
    requests_to_endpoints: int = 0
    attempts: Counter[int] = field(default_factory=Counter)  # attempts made -> deliveries
    statuses: Counter[str] = field(default_factory=Counter)


class Driver:
    """Drives one scenario's system: the API through local.gateway, deliveries through the event source."""

    def __init__(self, env: dict[str, str], meter: Meter) -> None:
        self.env = env
        self.meter = meter
        self.sqs = boto3.client("sqs")  # the event source's own client
        self.sfn = boto3.client("stepfunctions")
        with meter.origin(BENCH):
            self.admin = create_admin_key(env[schema.API_KEYS.env_var]).token
            self.producer = self.call("POST", "/v1/api-keys", self.admin, {"role": "producer"})["token"]

    def call(self, method: str, path: str, token: str, body: Any) -> Any:
        raw = json.dumps(body).encode()
        headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
        response = gateway.handle(method, path, "", headers, raw)
        if response.status >= 300:
            raise RuntimeError(f"{method} {path}: {response.status} {response.body!r}")
        return response.json()

    def tenant_with_endpoints(self, urls: list[str]) -> str:
        with self.meter.origin(BENCH):
            tenant = self.call("POST", "/v1/tenants", self.admin, {"name": "bench"})
            for url in urls:
                self.call("POST", "/v1/endpoints", tenant["api_key"]["token"], {"url": url, "event_types": ["*"]})
        return tenant["tenant_id"]

    def publish(self, run: Run | None, tenant_id: str, data: dict[str, Any]) -> None:
        body = {"tenant_id": tenant_id, "type": "order.updated", "data": data}
        if run is not None:
            run.api_requests += 1
            run.api_units += max(1, math.ceil(len(json.dumps(body).encode()) / API_PAYLOAD_UNIT))
        self.call("POST", "/v1/events", self.producer, body)

    def publish_batch(
        self, run: Run | None, tenant_id: str, datas: list[dict[str, Any]], key_prefix: str | None = None
    ) -> None:
        """One POST /v1/events/batch of these events (up to 100); each keyed `<key_prefix>-<n>` if a prefix is given
        (a prefix used once per batch: a key reused with other data is refused)."""
        events = [
            {"type": "order.updated", "data": data} | ({"idempotency_key": f"{key_prefix}-{n}"} if key_prefix else {})
            for n, data in enumerate(datas)
        ]
        body = {"tenant_id": tenant_id, "events": events}
        if run is not None:
            run.api_requests += 1
            run.api_units += max(1, math.ceil(len(json.dumps(body).encode()) / API_PAYLOAD_UNIT))
        answer = self.call("POST", "/v1/events/batch", self.producer, body)
        if answer["refused"]:
            raise RuntimeError(f"POST /v1/events/batch refused events: {answer['results']}")

    def drain(self) -> None:
        """Feed the delivery function until the queue is empty and no retry workflow is running."""
        deadline = time.monotonic() + DRAIN_LIMIT_SECONDS
        url = self.env[schema.DELIVERY_QUEUE.env_var]
        while time.monotonic() < deadline:
            with self.meter.origin(EVENT_SOURCE):
                handled = poll_once(self.sqs, url, batch_size=queue_trigger(DELIVERY).batch_size)
            if handled:
                continue
            with self.meter.origin(BENCH):
                running = self.sfn.list_executions(
                    stateMachineArn=self.env[schema.RETRY_STATE_MACHINE_ARN], statusFilter="RUNNING"
                )["executions"]
            if not running:
                return
            time.sleep(0.05)
        raise TimeoutError(f"deliveries still running after {DRAIN_LIMIT_SECONDS} s")

    def reconcile(self) -> None:
        """The reconciler's scheduled runs that look at these events (services/reconcile.py): every 5 minutes over
        the last 15, so each delivery is read by three runs. Minutes cannot be waited out: its clock is moved."""
        from hookrelay import wiring  # the functions' composition root, as the reconciler runs in its function
        from local.lambda_runtime import invoke
        from local.schedule import scheduled_event

        start = time.time()
        for run_at in (2, 7, 12):
            wiring.reconciler().clock = lambda minutes=run_at: (
                datetime.fromtimestamp(start, UTC) + timedelta(minutes=minutes)
            )
            invoke(RECONCILER.name, scheduled_event("hookrelay-reconciler"))

    def count_transitions(self, run: Run, before: set[str]) -> None:
        """Billed state transitions: every state entered, in every execution's history (but the warm-up's);
        and the execution log those histories make at level ALL (`execution_log_bytes`)."""
        with self.meter.origin(BENCH):
            pages = self.sfn.get_paginator("list_executions").paginate(
                stateMachineArn=self.env[schema.RETRY_STATE_MACHINE_ARN]
            )
            for page in pages:
                for execution in page["executions"]:
                    if execution["executionArn"] in before:
                        continue
                    run.executions += 1
                    run.probe_executions += execution["name"].startswith("circuit-")
                    history = self.sfn.get_paginator("get_execution_history").paginate(
                        executionArn=execution["executionArn"]
                    )
                    events = [event for page_ in history for event in page_["events"]]
                    run.transitions += sum(1 for event in events if event["type"].endswith("StateEntered"))
                    run.workflow_log_bytes += sum(execution_log_bytes(execution["executionArn"], e) for e in events)

    def execution_arns(self) -> set[str]:
        with self.meter.origin(BENCH):
            executions = self.sfn.list_executions(stateMachineArn=self.env[schema.RETRY_STATE_MACHINE_ARN])
        return {e["executionArn"] for e in executions["executions"]}

    def count_outcomes(self, run: Run, tenant_id: str) -> None:
        with self.meter.origin(BENCH):
            table_ = boto3.resource("dynamodb").Table(self.env[schema.DELIVERIES.env_var])
            for item in table_.scan()["Items"]:
                if item["tenant_id"] == tenant_id:
                    run.statuses[item["status"]] += 1
                    run.attempts[int(item.get("attempt_count", 0))] += 1


def execution_log_bytes(execution_arn: str, event: dict[str, Any]) -> int:
    """The bytes of the CloudWatch Logs record Step Functions writes for one history event at level ALL with
    execution data: the event's details (state name, input and output, error and cause) in the documented
    record format (id, type, details, previous_event_id, event_timestamp, execution_arn, redrive_count)."""
    details = next((value for key, value in event.items() if key.endswith("EventDetails")), {})
    record = {
        "id": str(event["id"]),
        "type": event["type"],
        "details": details,
        "previous_event_id": str(event.get("previousEventId", 0)),
        "event_timestamp": str(int(event["timestamp"].timestamp() * 1000)),
        "execution_arn": execution_arn,
        "redrive_count": "0",
    }
    return len(json.dumps(record, separators=(",", ":"), default=str).encode())


def order(payload_bytes: int, number: int) -> dict[str, Any]:
    """A representative webhook payload of about `payload_bytes` bytes of JSON."""
    return {"order_id": f"ord_{number:08d}", "status": "paid", "note": "x" * max(0, payload_bytes - 60)}


def run_scenario(scenario: Scenario, payload_bytes: int) -> Run:
    meter = Meter()
    run = Run(scenario, meter)
    healthy = ScriptedConsumer(default=Reply(200))
    consumer = ScriptedConsumer(default=Reply(scenario.status, b'{"ok": false}' if scenario.status >= 300 else b"ok"))
    consumer.queue([Reply(503, b'{"ok": false}')] * scenario.failures)
    try:
        with meter.installed(), moto_stack(retry_schedule=scenario.retry_schedule) as env:
            # ATTEMPT_TIMEOUT_SECONDS stays moto_stack's 2 s: no attempt here comes near a timeout.
            driver = Driver(env, meter)
            # A warm Lambda environment: clients made, code paths run once, before anything is counted.
            warm_tenant = driver.tenant_with_endpoints([healthy.url])
            for number in range(WARM_UP_EVENTS):
                driver.publish(None, warm_tenant, order(payload_bytes, number))
            driver.drain()
            tenant_id = driver.tenant_with_endpoints([f"{consumer.url}/{n}" for n in range(scenario.endpoints)])
            warm_executions = driver.execution_arns()
            meter.reset()
            with meter.recorded():
                for number in range(scenario.events):
                    driver.publish(run, tenant_id, order(payload_bytes, number))
                driver.drain()
                driver.reconcile()
            driver.count_transitions(run, warm_executions)
            driver.count_outcomes(run, tenant_id)
            run.requests_to_endpoints = len(consumer.received)
    finally:
        healthy.close()
        consumer.close()
    return run


@dataclass(frozen=True)
class Line:
    service: str
    item: str
    quantity: float  # in the run
    price: Price


def bill(run: Run, memory_mb: int) -> tuple[list[Line], list[ApiCall]]:
    """What AWS would charge for the run, and the calls left out (with `not_billed`'s reasons)."""
    billed = [c for c in run.meter.calls if not_billed(c) is None]
    left_out = [c for c in run.meter.calls if not_billed(c) is not None]
    invocations = run.meter.invocations
    gb_s = sum(math.ceil(i.seconds * 1000) / 1000 * memory_mb / 1024 for i in invocations)
    per_function = Counter(i.function for i in invocations)
    function_log_bytes = sum(n for origin, n in run.meter.log_bytes.items() if origin in FUNCTIONS)
    sqs = [c for c in billed if c.service == "sqs"]
    dynamodb = [c for c in billed if c.service == "dynamodb"]
    lines = [
        Line("API Gateway", "HTTP API requests", run.api_units, PRICES["api_requests"]),
        Line(
            "Lambda",
            "requests (" + ", ".join(f"{f} {per_function[f]}" for f in FUNCTIONS) + ")",
            len(invocations),
            PRICES["lambda_requests"],
        ),
        Line("Lambda", f"GB-s (measured durations x {memory_mb} MB, arm64)", gb_s, PRICES["lambda_gb_s"]),
        Line("SQS", "FIFO requests (64 KiB chunks)", sum(c.sqs_chunks for c in sqs if c.fifo), PRICES["sqs_fifo"]),
        Line(
            "SQS",
            "standard requests (64 KiB chunks)",
            sum(c.sqs_chunks for c in sqs if not c.fifo),
            PRICES["sqs_standard"],
        ),
        Line("DynamoDB", "write request units", sum(c.write_units for c in dynamodb), PRICES["dynamodb_wru"]),
        Line("DynamoDB", "read request units", sum(c.read_units for c in dynamodb), PRICES["dynamodb_rru"]),
        Line("Step Functions", "state transitions (Standard)", run.transitions, PRICES["transitions"]),
        Line("CloudWatch Logs", "GB ingested (the functions' output)", function_log_bytes / 1e9, PRICES["logs_gb"]),
        Line(
            "CloudWatch Logs",
            "GB ingested (Step Functions execution logs, level ALL)",
            run.workflow_log_bytes / 1e9,
            PRICES["vended_logs_gb"],
        ),
    ]
    return lines, left_out


def not_billed(call: ApiCall) -> str | None:
    """Why a counted call is not part of the per-event bill, or None when it is."""
    if call.origin == BENCH:
        return "the benchmark's own set-up and reads"
    if call.service == "stepfunctions":
        return "Step Functions API calls are free; Standard workflows bill state transitions"
    if call.origin == EVENT_SOURCE and call.operation == "GetQueueAttributes":
        return "the local event source looks the queue ARN up on every poll; Lambda's poller does not"
    if call.origin == EVENT_SOURCE and call.empty:
        return "empty polls: a fixed cost of the event source's polling, not per event"
    return None


def money(usd: float) -> str:
    return f"${usd:,.2f}" if usd >= 0.995 else f"${usd:,.4f}"


def usd(value: float) -> str:
    return f"${value:.10f}".rstrip("0").rstrip(".")


def quantity(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.3g}"


def report(run: Run, memory_mb: int, attempt_timeout: int) -> float:
    scenario = run.scenario
    lines, left_out = bill(run, memory_mb)
    per_million = 1e6 / scenario.events
    rows = []
    total = 0.0
    for line in lines:
        cost = line.price.cost(line.quantity * per_million)
        total += cost
        rows.append(
            [
                line.service,
                line.item,
                quantity(line.quantity / scenario.events),
                quantity(line.quantity * per_million),
                f"{usd(line.price.usd)} per {line.price.per:,.0f} {line.price.unit}",
                money(cost),
            ]
        )
    rows.append(["**total**", "", "", "", "", f"**{money(total)}**"])
    heading(f"{scenario.title}: {money(total)} per million events")
    deliveries = sum(run.attempts.values())
    print(
        f"{scenario.events} events measured, {deliveries} deliveries "
        f"({', '.join(f'{n} {s}' for s, n in sorted(run.statuses.items()))}); attempts per delivery: "
        + ", ".join(f"{a} attempts x {n}" for a, n in sorted(run.attempts.items()))
        + f"; {run.executions} workflow executions ({run.probe_executions} probe), {run.transitions} state"
        f" transitions, {run.workflow_log_bytes / max(1, run.transitions):,.0f} bytes of execution log per transition;"
        f" {run.requests_to_endpoints} requests to the endpoints\n"
    )
    print(
        table(
            ["service", "what is billed", "per event", "per million events", "price", "per million events"],
            rows,
            align="llrrlr",
        )
    )
    print()
    print(breakdown(run))
    unattributed = [c for c in run.meter.calls if c.origin == UNATTRIBUTED]
    if unattributed:
        print(f"\nWARNING: {len(unattributed)} AWS calls were not attributed to anyone (counted as billed)")
    reasons = Counter(not_billed(c) for c in left_out)
    if reasons:
        print("\nCounted but not billed per event: " + "; ".join(f"{n} x {r}" for r, n in reasons.items()))
    delivery_invocations = [i for i in run.meter.invocations if i.function == DELIVERY.name]
    mean_ms = 1000 * sum(i.seconds for i in delivery_invocations) / max(1, len(delivery_invocations))
    print(
        f"\nDelivery function: {len(delivery_invocations)} invocations, mean {mean_ms:.1f} ms here (the consumer on"
        f" 127.0.0.1 answers at once). A real endpoint's response time is billed too: each 100 ms of it adds"
        f" {money(PRICES['lambda_gb_s'].cost(0.1 * memory_mb / 1024 * len(delivery_invocations) * per_million))}"
        " per million events in this scenario."
    )
    if scenario.failures:
        hanging = PRICES["lambda_gb_s"].cost(attempt_timeout * memory_mb / 1024 * scenario.failures)
        print(
            f"An endpoint that hangs instead of answering 503 holds each of the outage's {scenario.failures} failed"
            f" attempts for the {attempt_timeout} s timeout: +{money(hanging * per_million)} per million events of"
            f" Lambda GB-s at {scenario.events} events per outage."
        )
    return total


def breakdown(run: Run) -> str:
    """Billed AWS requests per event, by who made them: where the counts above come from."""
    calls = [c for c in run.meter.calls if not_billed(c) is None]
    grouped: dict[tuple[str, str, str], list[ApiCall]] = {}
    for call in calls:
        grouped.setdefault((call.origin, call.service, call.operation), []).append(call)
    rows = []
    for (origin, service, operation), group in sorted(grouped.items()):
        units = ""
        if service == "dynamodb":
            units = (
                f"{sum(c.write_units for c in group) / run.scenario.events:.2f} WRU"
                if any(c.write_units for c in group)
                else f"{sum(c.read_units for c in group) / run.scenario.events:.2f} RRU"
            )
        elif service == "sqs":
            units = f"{sum(c.sqs_chunks for c in group) / run.scenario.events:.2f} chunks"
        rows.append([origin, f"{service} {operation}", f"{len(group) / run.scenario.events:.2f}", units])
    return table(["made by", "request", "requests per event", "units per event"], rows, align="llrr")


OUTAGE_HOURS = 6  # the bad night: down at 02:00, back at 08:00 (issue 9)
OUTAGE_PROBES = probes_in(DEFAULT_SCHEDULE, OUTAGE_HOURS * 3600)

SCENARIOS = {
    "happy": lambda n: Scenario("happy", "Happy path: 1 endpoint, every delivery 2xx", n, 1, 200),
    "outage": lambda n: Scenario(
        "outage",
        f"One endpoint down for a {OUTAGE_HOURS}-hour outage, then back: {OPEN_AFTER_FAILURES} failures open its"
        f" circuit, the rest park, {OUTAGE_PROBES} probes fail (the default schedule's in {OUTAGE_HOURS} h), the next"
        " gets through and the drain delivers them in order",
        2 * n,
        1,
        200,
        outage_schedule(OUTAGE_PROBES),
        failures=OPEN_AFTER_FAILURES + OUTAGE_PROBES,
    ),
    "fanout": lambda n: Scenario("fanout", "Fan-out: 10 endpoints, every delivery 2xx", max(1, n // 4), 10, 200),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100, help="events in the happy path (outage: x2, fan-out: /4)")
    parser.add_argument("--payload-bytes", type=int, default=1024, help="size of each event's data (default 1 KiB)")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), action="append", help="run only these")
    args = parser.parse_args(argv)
    memory_mb, attempt_timeout = deployed_settings()
    print(f"# Cost per million events ({machine()})")
    print(
        f"\nPrices: {PRICES_REGION} list prices as published on {PRICES_DATE}, no free tier. Functions: {memory_mb} MB"
        f" arm64 (lambdas/hookrelay/functions.py). Each event carries {args.payload_bytes} bytes of data."
    )
    totals = {}
    for name in args.scenario or ["happy", "outage", "fanout"]:
        scenario = SCENARIOS[name](args.events)
        started = time.monotonic()
        run = run_scenario(scenario, args.payload_bytes)
        totals[scenario.title] = report(run, memory_mb, attempt_timeout)
        print(f"\n({time.monotonic() - started:.1f} s)")
    heading("Total per million events")
    print(table(["scenario", "per million events"], [[t, money(c)] for t, c in totals.items()]))
    print("\nPrices used:")
    for key, price in PRICES.items():
        print(f"- {key}: {usd(price.usd)} per {price.per:,.0f} {price.unit} ({price.source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
