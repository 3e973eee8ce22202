"""Cost per million events, from AWS requests, state transitions and Lambda GB-s counted in a run on moto.

    python bench/cost.py [--events N] [--payload-bytes B]

The whole system runs in this process on moto (`tests.support.aws.moto_stack`): events go in through
`local.gateway` (the real authorizer and ingest function), deliveries come out through the local SQS
event source (`local.sqs_source.poll_once`) and the real delivery function, and retries through the
real retry workflow executed by moto's interpreter. `bench.metering` counts every AWS request made,
sizes DynamoDB and SQS requests, and times every function invocation; state transitions are read
from the executions' histories, and so are the bytes of the execution log Step Functions writes at the deployed
level (`execution_log_bytes`). Those counts, per event, times the list prices in PRICES give the cost per million
events of four scenarios:

- happy path: one endpoint, every delivery answered 200, one event per request;
- batched: the same, ten events per request (POST /v1/events/batch);
- one endpoint down for a 6-hour outage, then back (the bad night of issue 9): its first five
  deliveries fail and open its circuit, every later event arrives during the outage and is parked on
  arrival (ingest writes it parked: no message, no delivery invocation), one probe workflow retries the oldest
  on the schedule, four probes fail (as many as the default schedule makes in 6 hours), the fifth gets
  through and the drain delivers the parked deliveries in order. Hours cannot be waited out, so the
  probes run 1 s apart: what the outage costs depends on how many attempts, probes, workflow loops and
  record updates it takes, not on how long the Wait states last;
- fan-out: ten endpoints subscribed to every event, all answering 200.

All in: besides requests, units, transitions and GB-s, the bill's lines for billed INIT, the functions' and
Lambda's own log lines, API Gateway access logs, execution logs, log storage, X-Ray (when on), DynamoDB storage
and PITR, and data transfer out, with their assumptions printed. Not counted: the free tiers; fixed monthly costs
(idle SQS polling by the event source, alarms, dashboards).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import boto3

from bench.common import SECONDS_PER_MONTH, heading, machine, median, table
from bench.metering import BENCH, EVENT_SOURCE, UNATTRIBUTED, ApiCall, Meter
from bench.payloads import order
from hookrelay.adapters import log_pages, schema
from hookrelay.adapters.dynamodb import DEFLATED_BODY, event_item
from hookrelay.domain.circuit import OPEN_AFTER_FAILURES
from hookrelay.domain.classification import ATTEMPT_TIMEOUT_SECONDS
from hookrelay.domain.clock import utcnow
from hookrelay.domain.lifecycle import new_event
from hookrelay.domain.queues import shard_for
from hookrelay.domain.rate_limit import DEFAULT_PER_KEY_PER_SECOND
from hookrelay.domain.schedule import DEFAULT_SCHEDULE, RetrySchedule
from hookrelay.functions import AUTHORIZER, BY_NAME, DELIVERY, INGEST, RECONCILER
from local import gateway
from local.provision import delivery_sources, resource_name
from local.sqs_source import poll_once
from scripts.create_admin_key import create_admin_key
from stacks import config as stack_config
from stacks.constructs.api import ACCESS_LOG_FIELDS, Api
from stacks.constructs.functions import Functions
from tests.support.aws import as_function, ingest_endpoint_lists, moto_stack, serving_routes
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
    "logs_storage_gb_month": Price(
        0.03, 1, "GB-month of logs stored", "https://aws.amazon.com/cloudwatch/pricing/ (Logs storage/archival)"
    ),
    "xray_traces": Price(5.00, 1e6, "trace recorded", "https://aws.amazon.com/xray/pricing/ (traces recorded)"),
    "dynamodb_storage_gb_month": Price(
        0.25, 1, "GB-month stored", "https://aws.amazon.com/dynamodb/pricing/on-demand/ (Standard table class)"
    ),
    "dynamodb_pitr_gb_month": Price(
        0.20, 1, "GB-month under PITR", "https://aws.amazon.com/dynamodb/pricing/on-demand/ (continuous backups)"
    ),
    "transfer_out_gb": Price(
        0.09, 1, "GB out to the internet", "https://aws.amazon.com/ec2/pricing/on-demand/ (data transfer, first 10 TB)"
    ),
    "vended_logs_gb": Price(
        0.50,
        1,
        "GB of vended logs",
        "https://aws.amazon.com/cloudwatch/pricing/ (Vended Logs to CloudWatch Logs, first 10 TB; Step Functions"
        " execution logs are billed at this rate: docs.aws.amazon.com/step-functions/latest/dg/cw-logs.html)",
    ),
}

API_PAYLOAD_UNIT = 512 * 1024  # HTTP API requests are metered in 512 KB increments
LOG_EVENT_OVERHEAD_BYTES = 26  # CloudWatch Logs bills each log event's message plus 26 bytes
# Lambda's START, END and REPORT lines of one invocation (text format; JSON is longer): written unless the
# functions' system log level is above INFO (stacks/constructs/functions.py sets WARN).
PLATFORM_LINES = 3
PLATFORM_BYTES_PER_INVOCATION = 62 + 52 + 170
LOG_STORED_MONTHS = 1.0  # the log groups keep 30 days (LOG_RETENTION): each byte is stored about a month
STORED_MONTHS = 1.0  # events and deliveries expire 30 days after they end: each event stored about a month
SHORT_LIVED_TABLES = (schema.RATE_LIMITS, schema.IDEMPOTENCY)  # their items expire within minutes or hours
NOT_STORED_PER_EVENT = (*SHORT_LIVED_TABLES, schema.CHECKPOINTS)  # ... and one item per scheduled sweep
# X-Ray's default sampling rule: the first request each second, then 5% (https://docs.aws.amazon.com/xray/latest/
# devguide/xray-console-sampling.html); what `xray_tracing=sampled` records unless the account has its own rule.
XRAY_RESERVOIR_PER_SECOND = 1.0
XRAY_FIXED_RATE = 0.05
BATCH_ROUTE = "/v1/events/batch"
BATCH_SIZE = 100  # POST /v1/events/batch's most: what a producer sending at volume gives (issue 28)


@dataclass(frozen=True)
class Settings:
    """What the deployed stack does that the bill depends on (read from the stack's code) and the assumptions."""

    authorizer_ttl_seconds: int
    system_log_level: str
    workflow_log_level: str
    workflow_execution_data: bool
    xray: bool
    events_per_month: float
    producer_keys: int
    cold_start_fraction: float
    init_seconds: dict[str, float]
    memory_mb: dict[str, int]  # by function

    def gb(self, function: str) -> float:
        return self.memory_mb[function] / 1024

    def cpu_slowdown(self, function: str) -> float:
        """How much longer CPU-bound work (an import) takes in the function than on one of this machine's cores."""
        return max(1.0, FULL_VCPU_MB / self.memory_mb[function])

    def key_request_rate(self, events_per_request: int) -> float:
        """Requests a second from one producer key, the month's events evenly spread over the keys and the month."""
        return self.events_per_month / events_per_request / self.producer_keys / SECONDS_PER_MONTH

    def authorizer_miss_fraction(self, events_per_request: int) -> float:
        """Requests that reach the authorizer: a key's cached answer lasts the TTL from its miss, so a key sending r
        requests a second misses once per 1 + r * TTL requests (requests evenly spread over the month)."""
        if self.authorizer_ttl_seconds <= 0:
            return 1.0
        return 1 / (1 + self.key_request_rate(events_per_request) * self.authorizer_ttl_seconds)

    def xray_sampled_fraction(self, requests_per_month: float) -> float:
        """Traces recorded by X-Ray's default rule at this volume (the reservoir, then 5%), spread evenly."""
        if requests_per_month <= 0:
            return 0.0
        reservoir = min(requests_per_month, XRAY_RESERVOIR_PER_SECOND * SECONDS_PER_MONTH)
        return (reservoir + XRAY_FIXED_RATE * (requests_per_month - reservoir)) / requests_per_month

    @property
    def platform_lines(self) -> bool:
        return self.system_log_level in ("DEBUG", "INFO")


def deployed_telemetry() -> tuple[str, bool, bool]:
    """The retry workflow's log level, whether it logs execution data, and X-Ray: the stack's defaults."""
    telemetry = stack_config.DEFAULT_TELEMETRY
    return telemetry.workflow_log_level, telemetry.workflow_execution_data, telemetry.xray_tracing


WARM_UP_EVENTS = 3
DRAIN_LIMIT_SECONDS = 120.0


def deployed_settings() -> tuple[int, int]:
    """The delivery function's memory (the table of functions) and the attempt timeout."""
    return BY_NAME[DELIVERY.name].memory_mb, ATTEMPT_TIMEOUT_SECONDS


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
    events_per_request: int = 1  # > 1: published through the batch route
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
    workflow_log_bytes: int = 0  # Step Functions execution logs at the deployed level
    workflow_log_lines: int = 0
    workflow_log_bytes_all: int = 0  # ... and what level ALL with execution data would write
    requests_to_endpoints: int = 0
    webhook_bytes: int = 0  # the requests to the endpoints, as sent: data transfer out
    response_bytes: int = 0  # the API's answers to the producers: data transfer out
    stored_bytes: Counter[str] = field(default_factory=Counter)  # DynamoDB storage the events added, by table
    attempts: Counter[int] = field(default_factory=Counter)  # attempts made -> deliveries
    statuses: Counter[str] = field(default_factory=Counter)


SPREAD_TRIES = 20  # tenants made at most for endpoints spread over the shards (a miss: 1 in 8 for 4 over 2)


class SpacedClock:
    """A clock for one component that moves on by `spacing` seconds each time it is read."""

    def __init__(self, spacing: float, start: datetime = datetime(2026, 12, 1, tzinfo=UTC)) -> None:
        self.spacing = timedelta(seconds=spacing)
        self.next = start

    def __call__(self) -> datetime:
        now, self.next = self.next, self.next + self.spacing
        return now


class Driver:
    """Drives one scenario's system: the API through local.gateway, deliveries through the event source."""

    def __init__(self, env: dict[str, str], meter: Meter) -> None:
        self.env = env
        self.meter = meter
        self.workflow_level, self.workflow_execution_data, _ = deployed_telemetry()
        self.sqs = boto3.client("sqs")  # the event source's own client
        self.sfn = boto3.client("stepfunctions")
        with meter.origin(BENCH):
            self.admin = create_admin_key(env[schema.API_KEYS.env_var]).token
            self.producer = self.call("POST", "/v1/api-keys", self.admin, {"role": "producer"})["token"]

    def call(self, method: str, path: str, token: str, body: Any, run: Run | None = None) -> Any:
        raw = json.dumps(body).encode()
        headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
        response = gateway.handle(method, path, "", headers, raw)
        if response.status >= 300:
            raise RuntimeError(f"{method} {path}: {response.status} {response.body!r}")
        if run is not None:
            run.response_bytes += len(response.body) + RESPONSE_HEADER_BYTES
        return response.json()

    def endpoint_queue(self, tenant_id: str) -> str:
        """The fast lane of the delivery queues' shard of the tenant's (first) endpoint: where its messages go."""
        from hookrelay.adapters.dynamodb import EndpointTable
        from local.provision import delivery_queue_urls

        with self.meter.origin(BENCH):
            table = boto3.resource("dynamodb").Table(self.env[schema.ENDPOINTS.env_var])
            endpoint = EndpointTable(table).list_for_tenant(tenant_id)[0]
        return delivery_queue_urls(self.env).url(endpoint.queue_shard)

    def tenant_with_endpoints(self, urls: list[str]) -> str:
        """A tenant with an endpoint at each url, on as many delivery queue shards as they can be, as a deployment's
        many endpoints are: each shard's queue is a send of its own, and endpoints drawn at random (their ids) fall on
        one shard now and then (10 of them on one of two shards: once a run in 512), which made the measured profile,
        and so tests/integration/test_capacity_profile.py, change from run to run. A tenant whose endpoints fell
        fewer ways is left unused (made before anything is counted)."""
        from local.provision import delivery_queue_urls

        shards = delivery_queue_urls(self.env).shards
        with self.meter.origin(BENCH):
            for _ in range(SPREAD_TRIES):
                tenant = self.call("POST", "/v1/tenants", self.admin, {"name": "bench"})
                token = tenant["api_key"]["token"]
                made = [self.call("POST", "/v1/endpoints", token, {"url": url, "event_types": ["*"]}) for url in urls]
                if len({shard_for(endpoint["id"], shards) for endpoint in made}) == min(shards, len(urls)):
                    return str(tenant["tenant_id"])
        raise RuntimeError(f"{len(urls)} endpoints fell on fewer than {min(shards, len(urls))} shards {SPREAD_TRIES}x")

    def publish(
        self, run: Run | None, tenant_id: str, data: list[dict[str, Any]], key_prefix: str | None = None
    ) -> None:
        """One request: one event (POST /v1/events), or a batch of them (POST /v1/events/batch, up to 100), each
        keyed `<key_prefix>-<n>` if a prefix is given (once per batch: a key reused with other data is refused)."""
        if len(data) == 1 and key_prefix is None:
            path, body = "/v1/events", {"tenant_id": tenant_id, "type": "order.updated", "data": data[0]}
        else:
            events = [
                {"type": "order.updated", "data": one}
                | ({"idempotency_key": f"{key_prefix}-{n}"} if key_prefix else {})
                for n, one in enumerate(data)
            ]
            path, body = BATCH_ROUTE, {"tenant_id": tenant_id, "events": events}
        if run is not None:
            run.api_requests += 1
            run.api_units += max(1, math.ceil(len(json.dumps(body).encode()) / API_PAYLOAD_UNIT))
        answer = self.call("POST", path, self.producer, body, run)
        if path == BATCH_ROUTE and answer["refused"]:
            raise RuntimeError(f"POST {BATCH_ROUTE} refused events: {answer['results']}")

    def drain(self) -> None:
        """Feed the delivery function until the queue is empty and no retry workflow is running."""
        deadline = time.monotonic() + DRAIN_LIMIT_SECONDS
        sources = delivery_sources(self.env)
        while time.monotonic() < deadline:
            with self.meter.origin(EVENT_SOURCE):
                handled = sum(poll_once(self.sqs, url, batch_size=batch) for url, batch in sources)
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

    def deliver_queued(self) -> None:
        """Feed the delivery function until its queues are empty for now, leaving retry workflows waiting."""
        sources = delivery_sources(self.env)
        with self.meter.origin(EVENT_SOURCE):
            while sum(poll_once(self.sqs, url, batch_size=batch) for url, batch in sources):
                pass

    def reconcile(self) -> None:
        """The reconciler's scheduled run after these events (services/reconcile.py): it reads the log from where the
        last run finished, so one run reads each delivery, and the runs after it read nothing of these events. What a
        run costs whatever it finds (its Scan of tenants, a Query per tenant and log shard, a receive from each queue
        it surfaces, its invocation) is a fixed cost per run, here spread over the scenario's events: at a million
        events a month a run sees about 116 of them, more than any scenario measures, so one run overstates that
        share rather than three. Minutes cannot be waited out: its clock is moved past the writers' grace."""
        from hookrelay import wiring  # the functions' composition root, as the reconciler runs in its function
        from local.lambda_runtime import invoke
        from local.schedule import scheduled_event

        run_at = datetime.fromtimestamp(time.time(), UTC) + timedelta(minutes=2)
        with as_function(RECONCILER.name):
            wiring.reconciler().clock = lambda: run_at
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
                    arn = execution["executionArn"]
                    run.workflow_log_bytes_all += sum(execution_log_bytes(arn, e, execution_data=True) for e in events)
                    logged = [e for e in events if logged_at(self.workflow_level, e["type"])]
                    run.workflow_log_lines += len(logged)
                    run.workflow_log_bytes += sum(
                        execution_log_bytes(arn, e, execution_data=self.workflow_execution_data) for e in logged
                    )

    def execution_arns(self) -> set[str]:
        with self.meter.origin(BENCH):
            executions = self.sfn.list_executions(stateMachineArn=self.env[schema.RETRY_STATE_MACHINE_ARN])
        return {e["executionArn"] for e in executions["executions"]}

    def count_outcomes(self, run: Run, tenant_id: str) -> None:
        with self.meter.origin(BENCH):
            table_ = boto3.resource("dynamodb").Table(self.env[schema.DELIVERIES.env_var])
            for item in table_.scan()["Items"]:
                if item["tenant_id"] == tenant_id and not log_pages.is_page_item(item):
                    run.statuses[item["status"]] += 1
                    run.attempts[int(item.get("attempt_count", 0))] += 1


FATAL_EVENTS = ("ExecutionFailed", "ExecutionAborted", "ExecutionTimedOut")


def logged_at(level: str, event_type: str) -> bool:
    """Whether Step Functions logs a history event of this type at this level (docs.aws.amazon.com/step-functions/
    latest/dg/cw-logs.html#cloudwatch-log-level): ALL every event, ERROR the failures, FATAL the execution's end
    in failure, OFF none."""
    if level == "ALL":
        return True
    if level == "ERROR":
        return event_type.endswith(("Failed", "TimedOut", "Aborted"))
    if level == "FATAL":
        return event_type in FATAL_EVENTS
    return False


def execution_log_bytes(execution_arn: str, event: dict[str, Any], *, execution_data: bool) -> int:
    """The bytes of the CloudWatch Logs record Step Functions writes for one history event: the event's details
    (state name, error and cause; input and output only with execution data) in the documented record format
    (id, type, details, previous_event_id, event_timestamp, execution_arn, redrive_count), plus CloudWatch's
    per-event overhead."""
    details = next((value for key, value in event.items() if key.endswith("EventDetails")), {})
    if not execution_data:
        details = {k: v for k, v in details.items() if k not in ("input", "output", "inputDetails", "outputDetails")}
    record = {
        "id": str(event["id"]),
        "type": event["type"],
        "details": details,
        "previous_event_id": str(event.get("previousEventId", 0)),
        "event_timestamp": str(int(event["timestamp"].timestamp() * 1000)),
        "execution_arn": execution_arn,
        "redrive_count": "0",
    }
    return len(json.dumps(record, separators=(",", ":"), default=str).encode()) + LOG_EVENT_OVERHEAD_BYTES


RESPONSE_HEADER_BYTES = 200  # status line and headers of an HTTP response, about


def request_bytes(received: Any) -> int:
    """A webhook request as it goes over the wire: request line, headers, body (TLS framing left out)."""
    line = len(f"POST {received.path} HTTP/1.1\r\n")
    return line + sum(len(k) + len(v) + 4 for k, v in received.headers.items()) + 2 + len(received.body)


def run_scenario(
    scenario: Scenario,
    payload_bytes: int,
    settings: Settings | None = None,
    key_spacing: float | None = None,
    list_spacing: float | None = None,
) -> Run:
    """`key_spacing`: the seconds between a producer key's requests as the per-key rate limit sees them; by default
    the priced workload's (`settings`), evenly spread. `list_spacing`: the same as ingest's kept endpoint lists see
    them (a key per tenant); by default `key_spacing`."""
    meter = Meter()
    run = Run(scenario, meter)
    healthy = ScriptedConsumer(default=Reply(200))
    consumer = ScriptedConsumer(default=Reply(scenario.status, b'{"ok": false}' if scenario.status >= 300 else b"ok"))
    consumer.queue([Reply(503, b'{"ok": false}')] * scenario.failures)
    try:
        with meter.installed(), moto_stack(retry_schedule=scenario.retry_schedule) as env:
            # ATTEMPT_TIMEOUT_SECONDS stays moto_stack's 2 s: no attempt here comes near a timeout.
            driver = Driver(env, meter)
            if settings is not None:  # the execution log's level priced (deployed, or --as-before)
                driver.workflow_level = settings.workflow_log_level
                driver.workflow_execution_data = settings.workflow_execution_data
                # The per-key rate limit's writes depend on how a key's requests fall in its seconds: its clock sees
                # them spaced as the priced workload spaces them, not as fast as this loop sends them.
                from hookrelay import wiring  # after moto_stack: the limiter is built on the stack's tables

                if key_spacing is None:
                    key_spacing = 1 / settings.key_request_rate(scenario.events_per_request)
                clock = SpacedClock(key_spacing)
                for function in serving_routes():  # each function's own limiter (local/function_scope.py)
                    with as_function(function):
                        wiring.rate_limiter().clock = clock
                space_endpoint_lists(key_spacing if list_spacing is None else list_spacing)
            # A warm Lambda environment: clients made, code paths run once, before anything is counted.
            warm_tenant = driver.tenant_with_endpoints([healthy.url])
            for number in range(WARM_UP_EVENTS):  # every route the scenario uses, once
                size = scenario.events_per_request if number == 0 else 1
                driver.publish(None, warm_tenant, [order(payload_bytes, number)] * size)
            driver.drain()
            tenant_id = driver.tenant_with_endpoints([f"{consumer.url}/{n}" for n in range(scenario.endpoints)])
            warm_executions = driver.execution_arns()
            region = boto3.session.Session().region_name or "us-east-1"
            stored_before = meter.stored_bytes(region)
            meter.reset()
            with meter.recorded():
                for first in range(0, scenario.events, scenario.events_per_request):
                    if scenario.failures and first == OPEN_AFTER_FAILURES:
                        # The outage's first deliveries fail and open the circuit; the later events come during
                        # the outage (its probes wait on the queue until the drain below feeds them).
                        driver.deliver_queued()
                    numbers = range(first, min(scenario.events, first + scenario.events_per_request))
                    driver.publish(run, tenant_id, [order(payload_bytes, number) for number in numbers])
                driver.drain()
                driver.reconcile()
            driver.count_transitions(run, warm_executions)
            driver.count_outcomes(run, tenant_id)
            names = {env[spec.env_var]: spec for spec in schema.ALL_TABLES}
            stored = meter.stored_bytes(region) - stored_before
            run.stored_bytes = Counter(
                {name: n for name, n in stored.items() if names.get(name) not in NOT_STORED_PER_EVENT}
            )
            run.requests_to_endpoints = len(consumer.received)
            run.webhook_bytes = sum(request_bytes(received) for received in consumer.received)
    finally:
        healthy.close()
        consumer.close()
    return run


def space_endpoint_lists(spacing: float) -> None:
    """Ingest's kept endpoint lists (services/endpoint_lists.py) see the tenant's requests `spacing` seconds apart:
    this loop sends them far faster than the priced workload, and a list is kept ENDPOINT_LIST_SECONDS."""
    ingest_endpoint_lists().clock = itertools.count(0.0, spacing).__next__


@dataclass(frozen=True)
class Line:
    service: str
    item: str
    quantity: float  # in the run
    price: Price


FULL_VCPU_MB = 1769  # Lambda gives a function one vCPU at 1,769 MB, a proportional share below


def access_log_bytes() -> int:
    """One API Gateway access-log line (stacks/constructs/api.py's fields) with typical values, as ingested."""
    typical = {
        "requestId": "Xa1bCdEfIAMEbcQ=",
        "requestTime": "01/Dec/2026:10:00:00 +0000",
        "routeKey": "POST /v1/events",
        "status": "202",
        "responseLatency": "45",
        "sourceIp": "203.0.113.10",
        "keyId": "key_01JD0000000000000000000000",
        "authorizerError": "-",
        "integrationError": "-",
    }
    assert typical.keys() == ACCESS_LOG_FIELDS.keys()
    return len(json.dumps(typical).encode()) + LOG_EVENT_OVERHEAD_BYTES


def bill(run: Run, settings: Settings) -> tuple[list[Line], list[ApiCall]]:
    """What AWS would charge for the run, and the calls left out (with `not_billed`'s reasons)."""
    billed = [c for c in run.meter.calls if not_billed(c) is None]
    left_out = [c for c in run.meter.calls if not_billed(c) is not None]
    scenario = run.scenario
    miss = settings.authorizer_miss_fraction(scenario.events_per_request)
    invocations = run.meter.invocations

    def share(function: str) -> float:  # the authorizer's invocations API Gateway makes (its cache's misses)
        return miss if function == AUTHORIZER.name else 1.0

    gb = settings.gb
    cpu_slowdown = settings.cpu_slowdown

    per_function = Counter(i.function for i in invocations)
    requests = sum(share(f) * n for f, n in per_function.items())
    gb_s = sum(share(i.function) * math.ceil(i.seconds * 1000) / 1000 * gb(i.function) for i in invocations)
    init_gb_s = sum(
        share(f) * n * settings.cold_start_fraction * settings.init_seconds.get(f, 0.0) * cpu_slowdown(f) * gb(f)
        for f, n in per_function.items()
    )
    function_log_bytes = sum(
        share(origin) * (n + LOG_EVENT_OVERHEAD_BYTES * run.meter.log_lines[origin])
        for origin, n in run.meter.log_bytes.items()
        if origin in BY_NAME
    )
    platform_log_bytes = requests * PLATFORM_BYTES_PER_INVOCATION if settings.platform_lines else 0.0
    access_logs = run.api_requests * access_log_bytes()
    log_bytes = function_log_bytes + platform_log_bytes + access_logs + run.workflow_log_bytes
    traces = 0.0
    if settings.xray:  # a trace per API request (the authorizer and the function in it), per delivery, per execution
        traced = run.api_requests + per_function[DELIVERY.name] + run.executions
        monthly = traced / scenario.events * settings.events_per_month
        traces = traced * settings.xray_sampled_fraction(monthly)
    stored = sum(run.stored_bytes.values())
    sqs = [c for c in billed if c.service == "sqs"]
    dynamodb = [c for c in billed if c.service == "dynamodb"]
    wru = sum(share(c.origin) * c.write_units for c in dynamodb)
    rru = sum(share(c.origin) * c.read_units for c in dynamodb)
    counted = ", ".join(f"{f} {share(f) * n:.3g}" for f, n in sorted(per_function.items()))
    level = settings.workflow_log_level
    lines = [
        Line("API Gateway", "HTTP API requests", run.api_units, PRICES["api_requests"]),
        Line("Lambda", f"requests ({counted})", requests, PRICES["lambda_requests"]),
        Line("Lambda", "GB-s (measured durations x each function's memory, arm64)", gb_s, PRICES["lambda_gb_s"]),
        Line(
            "Lambda",
            f"GB-s of billed INIT ({settings.cold_start_fraction:.0%} cold starts x measured import time)",
            init_gb_s,
            PRICES["lambda_gb_s"],
        ),
        Line("SQS", "FIFO requests (64 KiB chunks)", sum(c.sqs_chunks for c in sqs if c.fifo), PRICES["sqs_fifo"]),
        Line(
            "SQS",
            "standard requests (64 KiB chunks)",
            sum(c.sqs_chunks for c in sqs if not c.fifo),
            PRICES["sqs_standard"],
        ),
        Line("DynamoDB", "write request units", wru, PRICES["dynamodb_wru"]),
        Line("DynamoDB", "read request units (the authorizer's: its cache's misses)", rru, PRICES["dynamodb_rru"]),
        Line(
            "DynamoDB",
            "storage, GB-month (items + index entries, 30 days)",
            stored * STORED_MONTHS / 1e9,
            PRICES["dynamodb_storage_gb_month"],
        ),
        Line(
            "DynamoDB",
            "PITR, GB-month (the same bytes)",
            stored * STORED_MONTHS / 1e9,
            PRICES["dynamodb_pitr_gb_month"],
        ),
        Line("Step Functions", "state transitions (Standard)", run.transitions, PRICES["transitions"]),
        Line("CloudWatch Logs", "GB ingested: the functions' lines", function_log_bytes / 1e9, PRICES["logs_gb"]),
        Line(
            "CloudWatch Logs",
            f"GB ingested: Lambda START/END/REPORT (system level {settings.system_log_level})",
            platform_log_bytes / 1e9,
            PRICES["logs_gb"],
        ),
        Line("CloudWatch Logs", "GB ingested: API Gateway access logs", access_logs / 1e9, PRICES["logs_gb"]),
        Line(
            "CloudWatch Logs",
            f"GB ingested: Step Functions execution logs (level {level})",
            run.workflow_log_bytes / 1e9,
            PRICES["vended_logs_gb"],
        ),
        Line(
            "CloudWatch Logs",
            "GB-month stored (30-day retention)",
            log_bytes * LOG_STORED_MONTHS / 1e9,
            PRICES["logs_storage_gb_month"],
        ),
        Line("X-Ray", f"traces recorded ({'sampled' if settings.xray else 'off'})", traces, PRICES["xray_traces"]),
        Line(
            "Data transfer",
            "GB out: webhooks to the endpoints and the API's answers",
            (run.webhook_bytes + run.response_bytes) / 1e9,
            PRICES["transfer_out_gb"],
        ),
    ]
    return lines, left_out


# Tables whose requests are a fixed cost per run of a schedule, not per event: the reconciler's checkpoints (their
# names as moto_stack provisions them).
FIXED_COST_TABLES = frozenset({resource_name(schema.CHECKPOINTS.logical_name)})


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
    if call.table in FIXED_COST_TABLES:
        return "the reconciler's checkpoint, read and moved once a run: a fixed cost (8,640 runs a month)"
    return None


def money(usd: float) -> str:
    return f"${usd:,.2f}" if usd >= 0.995 else f"${usd:,.4f}"


def usd(value: float) -> str:
    return f"${value:.10f}".rstrip("0").rstrip(".")


def quantity(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.3g}"


def delivery_gb_s(run: Run, memory_mb: int, latency_seconds: float = 0.0) -> float:
    """The delivery function's GB-s per delivery: its invocations' measured durations (plus `latency_seconds` of an
    endpoint's answer waited out once per invocation, its batch's sends being concurrent) over the deliveries."""
    invocations = [i for i in run.meter.invocations if i.function == DELIVERY.name]
    seconds = sum(i.seconds for i in invocations) + latency_seconds * len(invocations)
    return seconds * memory_mb / 1024 / max(1, sum(run.attempts.values()))


def report(run: Run, settings: Settings, memory_mb: int, attempt_timeout: int) -> float:
    scenario = run.scenario
    lines, left_out = bill(run, settings)
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
        f" transitions; execution log: {run.workflow_log_lines} records, {run.workflow_log_bytes:,} bytes at the"
        f" deployed level ({run.workflow_log_bytes_all:,} at ALL with execution data:"
        f" {money(PRICES['vended_logs_gb'].cost(run.workflow_log_bytes_all / 1e9 * per_million))} per million events);"
        f" {run.requests_to_endpoints} requests to the endpoints; {scenario.events_per_request} event(s) per request;"
        f" DynamoDB storage added per event: "
        + ", ".join(
            f"{name.split('-')[-1]} {n / scenario.events:,.0f} B" for name, n in sorted(run.stored_bytes.items())
        )
        + "\n"
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
    deliveries = sum(run.attempts.values())
    print(
        f"\nDelivery function: {len(delivery_invocations)} invocations for {deliveries} deliveries"
        f" ({deliveries / max(1, len(delivery_invocations)):.1f} a batch), mean {mean_ms:.1f} ms here (the consumer"
        f" on 127.0.0.1 answers at once): {delivery_gb_s(run, memory_mb):.5f} GB-s per delivery; with endpoints"
        f" answering in {ENDPOINT_LATENCY_SECONDS * 1000:.0f} ms,"
        f" {delivery_gb_s(run, memory_mb, ENDPOINT_LATENCY_SECONDS):.5f}. A real endpoint's response time is billed"
        " too: each 100 ms of it adds"
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
    "happy": lambda n: Scenario("happy", "Happy path: 1 endpoint, every delivery 2xx, 1 event per request", n, 1, 200),
    "batched": lambda n: Scenario(
        "batched",
        f"Happy path, batches of {BATCH_SIZE} events per request ({BATCH_ROUTE})",
        n,
        1,
        200,
        events_per_request=BATCH_SIZE,
    ),
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
TARGETS = {"happy": 5.00, "batched": 3.50, "fanout": 35.00, "outage": 15.00}  # issue 28
WRU_TARGET = 4  # per event, on the happy path (issue 28)
# A real endpoint's answer, for the delivery function's GB-s per delivery beside the measured (127.0.0.1 answers at
# once): a fast lane's invocation waits out its slowest answer once for its whole batch (handlers/delivery.py).
ENDPOINT_LATENCY_SECONDS = 0.2
SUMMARY = "issue 12:"  # bench/run_all.py repeats these lines at the end of `make bench`


def deflated_share(payload_bytes: int) -> float:
    """What share of `order`'s payload the event's stored body takes, as the events adapter stores it."""
    event = new_event(
        tenant_id="ten_bench", event_type="order.paid", data=order(payload_bytes, 0), now=utcnow(), horizon_seconds=60
    )
    item = event_item(event)
    stored = bytes(item[DEFLATED_BODY]) if DEFLATED_BODY in item else item["body"].encode()
    return len(stored) / len(event.body.encode())


def cost_summary(scenario: str, total: float) -> str:
    """A scenario's line for the side-by-side summary (bench/cost_before_after.py reads it too)."""
    verdict = "met" if total <= TARGETS[scenario] else "NOT met"
    return (
        f"{SUMMARY} cost, {scenario}: {money(total)} per million events, all in"
        f" (target ≤ {money(TARGETS[scenario])}: {verdict})"
    )


def units_summary(wru: float) -> str:
    verdict = "met" if wru <= WRU_TARGET else "NOT met"
    return f"{SUMMARY} DynamoDB write units per event, happy path: {wru:.1f} (target ≤ {WRU_TARGET}: {verdict})"


def init_seconds(runs: int) -> dict[str, float]:
    """Each function's handler import, median of fresh interpreters with bytecode (what the asset ships): the INIT
    phase Lambda bills at a cold start (clients are made on first use, inside the first invocation, timed there)."""
    from bench.cold_start import import_seconds

    found = {}
    for function in (AUTHORIZER, INGEST, DELIVERY):
        module = function.handler.rpartition(".")[0]
        found[function.name] = median([import_seconds(module, cached=True) for _ in range(runs)])
    return found


BEFORE_MEMORY_MB = 512  # every function's, before issue 12


def deploy_rate_limit() -> None:
    """As deployed (the default api_key_rate_per_second, as deploy/'s stage files state it): the API functions count
    each key's requests."""
    os.environ[schema.API_KEY_RATE_PER_SECOND] = str(DEFAULT_PER_KEY_PER_SECOND)


@contextmanager
def deployed_run_settings() -> Iterator[Settings]:
    """The deployed stack's settings with this benchmark's default assumptions (what `main` runs without options),
    the per-key rate limit in place while inside: for other benchmarks that meter the same scenarios
    (bench/capacity.py), which may run inside a test process that must not keep the setting."""
    before = os.environ.get(schema.API_KEY_RATE_PER_SECOND)
    deploy_rate_limit()
    try:
        yield settings_from(build_parser().parse_args([]))
    finally:
        if before is None:
            os.environ.pop(schema.API_KEY_RATE_PER_SECOND, None)
        else:
            os.environ[schema.API_KEY_RATE_PER_SECOND] = before


def settings_from(args: argparse.Namespace) -> Settings:
    level, execution_data, xray = deployed_telemetry()
    if args.as_before:  # the deployment settings issue 12 started from (the code is this checkout's)
        return Settings(
            authorizer_ttl_seconds=0,
            system_log_level="INFO",
            workflow_log_level="ALL",
            workflow_execution_data=True,
            xray=True,
            events_per_month=args.events_per_month,
            producer_keys=args.producer_keys,
            cold_start_fraction=args.cold_starts,
            init_seconds=init_seconds(3),
            memory_mb={name: BEFORE_MEMORY_MB for name in BY_NAME},
        )
    return Settings(
        authorizer_ttl_seconds=int(Api.AUTHORIZER_CACHE_TTL.to_seconds()),
        system_log_level=Functions.SYSTEM_LOG_LEVEL.value,
        workflow_log_level=level,
        workflow_execution_data=execution_data,
        xray=xray or args.xray,
        events_per_month=args.events_per_month,
        producer_keys=args.producer_keys,
        cold_start_fraction=args.cold_starts,
        init_seconds=init_seconds(3),
        memory_mb={name: function.memory_mb for name, function in BY_NAME.items()},
    )


def print_assumptions(settings: Settings, args: argparse.Namespace) -> None:
    memory = ", ".join(f"{f.name} {settings.memory_mb[f.name]} MB" for f in (AUTHORIZER, INGEST, DELIVERY))
    xray_monthly = 2 * settings.events_per_month
    print(
        "\nAssumptions (each a line item below; change them with the options):\n"
        f"- Prices: {PRICES_REGION} list prices as published on {PRICES_DATE}, on demand, first tier, no free tier.\n"
        f"- Functions: arm64, {memory} (lambdas/hookrelay/functions.py); GB-s from the invocations' measured"
        " durations on this machine (moto in process answers the AWS calls: its time stands in for AWS's latency).\n"
        f"- Billed INIT: {settings.cold_start_fraction:.0%} of invocations are cold starts (--cold-starts), each"
        " billing its handler's import time measured here, scaled to the function's CPU share (one vCPU at"
        f" {FULL_VCPU_MB} MB): "
        + ", ".join(
            f"{name} {1000 * t:.0f} ms here, {1000 * t * settings.cpu_slowdown(name):.0f} ms billed"
            for name, t in settings.init_seconds.items()
        )
        + ". Warm durations are not scaled: they are mostly moto answering, standing in for AWS's latency.\n"
        f"- Authorizer: its decision cached {settings.authorizer_ttl_seconds} s (Api.AUTHORIZER_CACHE_TTL);"
        f" {settings.events_per_month:,.0f} events a month from {settings.producer_keys} producer key(s), evenly"
        " spread (--events-per-month, --producer-keys): "
        f"{settings.authorizer_miss_fraction(1):.1%} of single-event requests and"
        f" {settings.authorizer_miss_fraction(BATCH_SIZE):.1%} of batch requests invoke it.\n"
        f"- Per-key rate limit ({DEFAULT_PER_KEY_PER_SECOND} requests a second): its clock reads a key's requests"
        f" {1 / settings.key_request_rate(1):.1f} s apart ({1 / settings.key_request_rate(BATCH_SIZE):.0f} s for"
        " batches), as the same workload sends them; a key's only request of a second in a container is counted"
        " with no write (domain/rate_limit.py).\n"
        f"- Logs: the functions' own lines at INFO (one per delivered webhook), Lambda's START/END/REPORT"
        f" {'written' if settings.platform_lines else 'not written'} (system log level {settings.system_log_level});"
        f" the retry workflow's execution log at {settings.workflow_log_level}"
        f"{' with' if settings.workflow_execution_data else ' without'} execution data"
        " (CDK context workflow_log_level); API Gateway access logs, one line per request; every log group kept"
        f" 30 days; {LOG_EVENT_OVERHEAD_BYTES} bytes billed per log event on top of its text.\n"
        f"- X-Ray: {'sampled' if settings.xray else 'off'} (CDK context xray_tracing). Sampled, X-Ray's default rule"
        f" (the first request each second, then {XRAY_FIXED_RATE:.0%}) would record"
        f" {settings.xray_sampled_fraction(xray_monthly):.0%} of about {xray_monthly:,.0f} traces a month at this"
        f" volume: {money(PRICES['xray_traces'].cost(2e6 * settings.xray_sampled_fraction(xray_monthly)))} per"
        " million events more on the happy path (run with --xray to price it in).\n"
        f"- Payload: {args.payload_bytes:,} bytes of order-shaped JSON with random values (--payload-bytes;"
        f" `order`), which deflates as a real payload does: to {deflated_share(args.payload_bytes):.2f} of its"
        " size, as the event's stored body.\n"
        "- DynamoDB storage and PITR: the bytes the events add to the tables (items and index entries, 100 bytes of"
        " overhead each), kept 30 days: about one GB-month per GB; rate-limit counters and idempotency records"
        " expire within minutes or hours and are left out.\n"
        "- Data transfer out: each webhook's request line, headers and body, and the API's answers; TLS framing and"
        " the free first 100 GB a month left out."
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100, help="events in the happy path (outage: x2, fan-out: /4)")
    parser.add_argument("--payload-bytes", type=int, default=1024, help="size of each event's data (default 1 KiB)")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), action="append", help="run only these")
    parser.add_argument("--events-per-month", type=float, default=1e6, help="for the authorizer cache and X-Ray")
    parser.add_argument("--producer-keys", type=int, default=1, help="keys the month's events come from")
    parser.add_argument("--cold-starts", type=float, default=0.01, help="fraction of invocations that are cold")
    parser.add_argument("--xray", action="store_true", help="price X-Ray sampled (the default rule) in")
    parser.add_argument(
        "--as-before",
        action="store_true",
        help="the deployment settings before issue 12: authorizer uncached, START/END/REPORT lines, execution logs"
        " at ALL with execution data, X-Ray on (default sampling), 512 MB everywhere (on this checkout's code)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    deploy_rate_limit()
    memory_mb, attempt_timeout = deployed_settings()
    print(f"# Cost per million events ({machine()})")
    settings = settings_from(args)
    print_assumptions(settings, args)
    totals: dict[str, tuple[float, float]] = {}
    gb_s: dict[str, tuple[float, float]] = {}
    for name in args.scenario or ["happy", "batched", "fanout", "outage"]:
        scenario = SCENARIOS[name](args.events)
        started = time.monotonic()
        run = run_scenario(scenario, args.payload_bytes, settings)
        wru = sum(c.write_units for c in run.meter.calls if not_billed(c) is None and c.service == "dynamodb")
        total = report(run, settings, memory_mb, attempt_timeout)
        totals[name] = (total, wru / scenario.events)
        gb_s[name] = (delivery_gb_s(run, memory_mb), delivery_gb_s(run, memory_mb, ENDPOINT_LATENCY_SECONDS))
        print(f"\n({time.monotonic() - started:.1f} s)")
    heading("Total per million events, all in")
    rows = []
    for name, (total, wru) in totals.items():
        target = TARGETS[name]
        rows.append(
            [
                SCENARIOS[name](args.events).title,
                money(total),
                f"≤ {money(target)}",
                "met" if total <= target else "NOT met",
                f"{wru:.1f}",
                f"{gb_s[name][0]:.5f}",
                f"{gb_s[name][1]:.5f}",
            ]
        )
    latency = f"delivery GB-s per delivery, endpoints at {ENDPOINT_LATENCY_SECONDS * 1000:.0f} ms"
    columns = ["scenario", "per million events", "target", "", "DynamoDB WRU per event"]
    print(table([*columns, "delivery GB-s per delivery", latency], rows, align="lrrlrrr"))
    print()
    for name, (total, _) in totals.items():
        print(cost_summary(name, total))
    if "happy" in totals:
        print(units_summary(totals["happy"][1]))
    print("\nPrices used:")
    for key, price in PRICES.items():
        print(f"- {key}: {usd(price.usd)} per {price.per:,.0f} {price.unit} ({price.source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
