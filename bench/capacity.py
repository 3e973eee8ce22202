"""How far one deployment goes: each quota's utilisation for a workload, the first to saturate, the cost.

    python bench/capacity.py                      # the standard workloads' table
    python bench/capacity.py --rate 10000 --fanout 10 --failing 0.01 --tenants 5000 --largest-share 0.2
    python bench/capacity.py --measure            # re-measure the operation profile (about a minute)
    python bench/capacity.py --write-docs         # regenerate docs/capacity.md

The counts are the code's own, not guessed: `bench/operation_profile.json` holds what the real handlers did per
event on moto in the cost benchmark's three scenarios (`bench/cost.py`: delivered first time with one endpoint,
fan-out to ten, and one endpoint through a whole outage: parked behind its circuit, probed, drained), metered by
`bench/metering.py`: AWS calls by operation, DynamoDB write units by table, index and partition key, Lambda
invocations, state transitions, executions. A test re-measures it and fails when the code has drifted from it.

The model is linear in the event rate: every per-event count scales with it, and the counts of one outage
(executions, transitions, Step Functions calls) scale with the outages under way (failing endpoints / outage
length). Durations are not measured (moto is not AWS): a function's duration is its AWS calls times CALL_MS
plus COMPUTE_MS, and the delivery function's adds the endpoint's latency. Each quota's utilisation is demand
over limit; a quota saturates at rate / utilisation; the first is the smallest. Quotas: `bench/quotas.py`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import SECONDS_PER_MONTH, table
from bench.quotas import QUOTAS_READ, REGION, Quota, all_quotas, authorizer_cache_seconds
from hookrelay.adapters.schema import LOG_SHARDS

ROOT = Path(__file__).resolve().parents[1]
PROFILE_PATH = ROOT / "bench" / "operation_profile.json"
DOCS_PATH = ROOT / "docs" / "capacity.md"
PROFILE_EVENTS = 20  # the happy path's events when measuring (outage: x2, fan-out: /4; see bench/cost.py)
SCENARIOS = ("happy", "fanout", "outage")
TABLE_PREFIX = "hookrelay-"

CALL_MS = 8.0  # one AWS API call from Lambda, same region (DynamoDB and SQS: single-digit milliseconds)
COMPUTE_MS = 5.0  # the handler's own work per invocation, beside its calls


# --- the operation profile: measured from the code -------------------------------------------------------


def _owner(partition: Any) -> str:
    """A write-sharded key's owner: `owner#3` -> `owner` (the log indexes spread one owner over shards)."""
    owner, _, shard = str(partition).rpartition("#")
    return owner if owner and shard.isdigit() else str(partition)


def _scope(owners: int, events: int, endpoints: int) -> str:
    """What a partition key is per, from how many owners the fan-out run wrote: one for all (the tenant, or its
    producer key), one per endpoint, or one per event or delivery (spread over the table)."""
    if owners == 1:
        return "tenant"
    if owners == endpoints and events != endpoints:
        return "endpoint"
    return "item"


def measure_profile(events: int = PROFILE_EVENTS) -> dict[str, Any]:
    """Run the cost benchmark's scenarios on moto and keep what the handlers did, per event: as the cost benchmark
    runs them by default (deployed settings, the per-key rate limit counted), the setting undone after."""
    from bench import cost

    with cost.deployed_run_settings() as settings:
        return _measured(events, settings)


def _measured(events: int, settings: Any) -> dict[str, Any]:
    """The scenarios metered under the given settings (measure_profile sets and restores them)."""
    from bench import cost
    from bench.metering import BENCH
    from hookrelay.functions import BY_NAME, Schedule

    # Scheduled functions run on the clock, not per event: their reads are in the cost, not in the rates.
    scheduled = {name for name, function in BY_NAME.items() if isinstance(function.trigger, Schedule)}
    profile: dict[str, Any] = {"events_measured": events, "payload_bytes": 1024, "scenarios": {}}
    distinct_all: set[str] = set()
    sharded: set[str] = set()
    for name in SCENARIOS:
        scenario = cost.SCENARIOS[name](events)
        # A busy key's requests as the rate limit sees them: all in one second, each but the first a counter write
        # (its most: a key across many containers at these rates), not the cost benchmark's one request every 2.6 s.
        run = cost.run_scenario(scenario, 1024, settings, key_spacing=0.0)
        n = scenario.events
        calls: dict[str, float] = defaultdict(float)
        per_function_calls: dict[str, float] = defaultdict(float)
        writes: dict[str, float] = defaultdict(float)
        distinct: dict[str, set[Any]] = defaultdict(set)
        for call in run.meter.calls:
            if call.origin in (BENCH, *scheduled) or (
                cost.not_billed(call) is not None and call.service != "stepfunctions"
            ):
                continue  # the bench's own calls; the local event source's bookkeeping and empty polls
            queue = ":fifo" if call.service == "sqs" and call.fifo else ""
            calls[f"{call.service}:{call.operation}{queue}"] += 1 / n
            per_function_calls[call.origin] += 1
            for table_name, index, partition, units in call.partitions:
                where = f"{table_name.removeprefix(TABLE_PREFIX)}/{index or '-'}"
                writes[where] += units / n
                distinct[where].add(partition)
        invocations: dict[str, float] = defaultdict(float)
        for where, values in distinct.items():
            distinct_all.add(where)
            if any(_owner(v) != str(v) for v in values):
                sharded.add(where)
        for invocation in run.meter.invocations:
            if invocation.function not in scheduled:
                invocations[invocation.function] += 1
        lines, _ = cost.bill(run, settings)
        usd = sum(line.price.cost(line.quantity * 1e6 / n) for line in lines)
        profile["scenarios"][name] = {
            "events": n,
            "endpoints": scenario.endpoints,
            "deliveries": sum(run.attempts.values()),
            "api_requests": run.api_requests / n,
            "invocations": {f: count / n for f, count in sorted(invocations.items())},
            "calls_per_invocation": {
                f: round(per_function_calls[f] / count, 3) for f, count in sorted(invocations.items())
            },
            "calls": {k: round(v, 4) for k, v in sorted(calls.items())},
            "write_units": {k: round(v, 4) for k, v in sorted(writes.items())},
            "partition_owners": {k: len({_owner(p) for p in v}) for k, v in sorted(distinct.items())},
            "executions": run.executions,
            "transitions": run.transitions,
            "usd_per_million": round(usd, 2),
        }
    fanout = profile["scenarios"]["fanout"]
    # Keys written only in an outage (the parking lot, the endpoint's circuit) are the failing endpoint's.
    profile["partition_scope"] = {where: "endpoint" for where in profile["scenarios"]["outage"]["partition_owners"]}
    profile["partition_scope"].update(
        {
            where: _scope(owners, fanout["events"], fanout["endpoints"])
            for where, owners in fanout["partition_owners"].items()
        }
    )
    # How many partitions one owner's writes spread over: the log indexes' write shards (`owner#shard`).
    profile["partition_shards"] = {where: LOG_SHARDS if where in sharded else 1 for where in distinct_all}
    return profile


# The outage scenario's counts move a little from run to run: how many retries wake before the circuit opens
# and how often the drain looks at its window ride on real time (probes 1 s apart). Its counts must agree within
# this share; the others exactly.
OUTAGE_TOLERANCE = 0.25
# The outage's workflow loop: how many times the drain's and the probe's workflows go round (their transitions, task
# messages and answers) depends on how long each round takes on the machine, not on the code: left out of the check.
TIMING_BORNE = (
    "transitions",
    "stepfunctions:SendTaskSuccess",
    "stepfunctions:SendTaskFailure",
    "sqs:SendMessage:fifo",
)


def deterministic(profile: dict[str, Any]) -> dict[str, Any]:
    """What must not drift between a measurement and the code: counts, not money (it rides on durations), and
    the outage's counts only within OUTAGE_TOLERANCE (see `drifted`)."""
    kept = json.loads(json.dumps(profile))
    for scenario in kept["scenarios"].values():
        scenario.pop("usd_per_million")
    return kept


def drifted(measured: dict[str, Any], committed: dict[str, Any]) -> list[str]:
    """Where a fresh measurement differs from the committed profile beyond what timing explains."""
    found: list[str] = []

    def walk(a: Any, b: Any, path: str, tolerance: float) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                inner = OUTAGE_TOLERANCE if path == "/scenarios" and key == "outage" else tolerance
                walk(a.get(key), b.get(key), f"{path}/{key}", inner)
        elif isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
            if abs(a - b) > tolerance * max(abs(a), abs(b)):
                found.append(f"{path}: measured {a}, committed {b}")
        elif a != b:
            found.append(f"{path}: measured {a!r}, committed {b!r}")

    def steady(profile: dict[str, Any]) -> dict[str, Any]:
        kept = deterministic(profile)
        outage = kept["scenarios"]["outage"]
        for key in TIMING_BORNE:
            outage.pop(key, None)
            outage["calls"].pop(key, None)
        return kept

    walk(steady(measured), steady(committed), "", 0.0)
    return found


def load_profile() -> dict[str, Any]:
    return dict(json.loads(PROFILE_PATH.read_text()))


# --- the model -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    events_per_second: float
    fanout: int = 1  # endpoints each event goes to
    failing_share: float = 0.0  # share of endpoints in an outage
    outage_hours: float = 6.0
    tenants: int = 1000
    largest_tenant_share: float = 0.1  # of all events
    payload_bytes: int = 1024
    endpoint_latency_ms: float = 200.0  # a healthy endpoint's response time

    @property
    def label(self) -> str:
        return f"{self.events_per_second:,.0f}/s, fan-out {self.fanout}, {self.failing_share:.0%} failing"


@dataclass
class Demand:
    quota: Quota
    demand: float
    note: str = ""

    @property
    def utilisation(self) -> float:
        return self.demand / self.quota.limit if self.quota.limit else math.inf


@dataclass
class Assessment:
    workload: Workload
    demands: list[Demand]
    usd_per_month: float
    hot_partitions: list[tuple[str, str, float]] = field(default_factory=list)  # (where, per, WCU/s)
    concurrency: dict[str, float] = field(default_factory=dict)

    @property
    def first(self) -> Demand:
        return max(self.demands, key=lambda d: d.utilisation)

    @property
    def first_aws(self) -> Demand:
        """The first of AWS's own quotas: what comes next once the stack's limits are raised."""
        return max((d for d in self.demands if d.quota.service != "hookrelay"), key=lambda d: d.utilisation)

    def saturates_at(self, demand: Demand) -> float:
        return self.workload.events_per_second / demand.utilisation if demand.utilisation else math.inf


def _value(profile: dict[str, Any], scenario: str, path: Iterable[str]) -> float:
    value: Any = profile["scenarios"][scenario]
    for key in path:
        value = value.get(key, 0.0) if isinstance(value, dict) else 0.0
    return float(value)


def _mix(profile: dict[str, Any], path: Iterable[str], fanout: int) -> float:
    """A per-event count at `fanout`: linear between the measured fan-outs of 1 and the fan-out scenario's."""
    path = tuple(path)
    one, many = _value(profile, "happy", path), _value(profile, "fanout", path)
    per_endpoint = (many - one) / (profile["scenarios"]["fanout"]["endpoints"] - 1)
    return one + (fanout - 1) * per_endpoint


def _outage_extra(profile: dict[str, Any], path: Iterable[str]) -> float:
    """What one delivery to an endpoint in an outage costs beyond a delivered one (parking, probing, draining)."""
    path = tuple(path)
    return max(0.0, _value(profile, "outage", path) - _value(profile, "happy", path))


def _keys(profile: dict[str, Any], field_name: str) -> list[str]:
    """Sorted: ties between equal demands are broken the same way in every process (sets' order is not)."""
    return sorted({k for s in profile["scenarios"].values() for k in s[field_name]})


def per_event(profile: dict[str, Any], w: Workload, field_name: str, key: str) -> float:
    """One count per event for the workload: the healthy share at its fan-out, plus the failing share's extra
    (but Step Functions calls: an outage makes a fixed number, whatever its events; see `per_outage`)."""
    healthy = _mix(profile, (field_name, key), w.fanout)
    if key.startswith("stepfunctions:"):
        return healthy
    return healthy + w.failing_share * w.fanout * _outage_extra(profile, (field_name, key))


def per_outage(profile: dict[str, Any], key: str) -> float:
    """Step Functions calls of one outage: its opening failures' retry executions, the probe workflow, the drain."""
    outage = profile["scenarios"]["outage"]
    return float(outage["calls"].get(key, 0.0)) * outage["events"]


def function_seconds(profile: dict[str, Any], function: str) -> float:
    """An invocation's duration but for the endpoint's answer: its AWS calls, and its own work."""
    return (_mix(profile, ("calls_per_invocation", function), 1) * CALL_MS + COMPUTE_MS) / 1000


def assess(w: Workload, profile: dict[str, Any] | None = None, quotas: dict[str, Quota] | None = None) -> Assessment:
    profile = profile or load_profile()
    q = quotas or all_quotas()
    rate = w.events_per_second
    extra_kib = max(0, math.ceil(w.payload_bytes / 1024) - 1)  # the event item carries the payload
    outage = profile["scenarios"]["outage"]
    endpoints = w.tenants * w.fanout
    failing_endpoints = w.failing_share * endpoints
    outages_per_second = failing_endpoints / (w.outage_hours * 3600)
    calls = {k: per_event(profile, w, "calls", k) * rate for k in _keys(profile, "calls")}

    concurrency: dict[str, float] = {}
    delivery_seconds = 0.0
    for function in _keys(profile, "invocations"):
        invocations = per_event(profile, w, "invocations", function) * rate
        if function == "authorizer":  # API Gateway caches its answers: once per key and TTL (a key per tenant)
            invocations = min(invocations, w.tenants / authorizer_cache_seconds())
        seconds = function_seconds(profile, function)
        if function == "delivery":
            seconds += w.endpoint_latency_ms / 1000
            delivery_seconds = seconds
        concurrency[function] = invocations * seconds
    api_rps = _mix(profile, ("api_requests",), 1) * rate  # one request per event, whatever its fan-out

    writes: dict[str, float] = defaultdict(float)
    for where in _keys(profile, "write_units"):
        writes[where] = per_event(profile, w, "write_units", where) * rate
    writes["Events/-"] += extra_kib * rate
    by_table: dict[str, float] = defaultdict(float)
    for where, units in writes.items():
        by_table[where.split("/")[0]] += units

    hot: list[tuple[str, str, float]] = []
    scope = profile["partition_scope"]
    largest = w.largest_tenant_share * rate
    for where in sorted(writes):
        per = scope.get(where, "item")
        units_per_event = writes[where] / rate / profile["partition_shards"].get(where, 1) if rate else 0.0
        if per == "tenant":
            hot.append((where, "the largest tenant", units_per_event * largest))
        elif per == "endpoint":
            hot.append((where, "the largest tenant's busiest endpoint", units_per_event / w.fanout * largest))
    hottest = max((h[2] for h in hot), default=0.0)

    sqs_fifo = {k: v for k, v in calls.items() if k.startswith("sqs:") and k.endswith(":fifo")}
    busiest_sqs = max(sqs_fifo.items(), key=lambda kv: kv[1], default=("sqs", 0.0))
    sfn_starts = outages_per_second * per_outage(profile, "stepfunctions:StartExecution")
    sfn_transitions = outages_per_second * outage["transitions"]
    send_task = outages_per_second * sum(
        per_outage(profile, k) for k in _keys(profile, "calls") if k.startswith("stepfunctions:SendTask")
    )
    endpoint_in_flight = largest * delivery_seconds  # each of the largest tenant's endpoints gets all its events
    total_concurrency = sum(concurrency.values())

    demands = [
        Demand(q["apigw_account_rps"], api_rps),
        Demand(q["stage_throttle"], api_rps),
        Demand(q["api_key_rate"], api_rps * w.largest_tenant_share, "the largest tenant's producer key"),
        Demand(q["lambda_concurrency"], total_concurrency, "all functions"),
        Demand(q["authorizer_reserved"], concurrency.get("authorizer", 0.0)),
        Demand(q["ingest_reserved"], concurrency.get("ingest", 0.0)),
        Demand(q["delivery_max_concurrency"], concurrency.get("delivery", 0.0)),
        Demand(q["endpoint_groups"], endpoint_in_flight, "the largest tenant's busiest endpoint"),
        Demand(q["sqs_fifo_ht_tps"], busiest_sqs[1], busiest_sqs[0].removeprefix("sqs:").removesuffix(":fifo")),
        Demand(
            q["dynamodb_table_wru"],
            max(by_table.values(), default=0.0),
            max(by_table, key=lambda t: by_table[t], default=""),
        ),
        Demand(q["dynamodb_partition_wcu"], hottest, max(hot, key=lambda h: h[2])[0] if hot else ""),
        Demand(q["sfn_start_execution"], sfn_starts, "the outages' retry and probe executions"),
        Demand(q["sfn_state_transitions"], sfn_transitions),
        Demand(q["sfn_send_task"], send_task),
        Demand(q["sfn_open_executions"], failing_endpoints, "one probe workflow per endpoint in an outage"),
    ]
    usd_per_event = (
        _mix(profile, ("usd_per_million",), w.fanout)
        + w.failing_share * w.fanout * _outage_extra(profile, ("usd_per_million",))
    ) / 1e6
    return Assessment(w, demands, usd_per_event * rate * SECONDS_PER_MONTH, hot, concurrency)


# --- what to do at each limit ----------------------------------------------------------------------------

BEYOND: dict[str, str] = {
    "stage_throttle": "Raise Api.THROTTLE to the account's API Gateway rate; past it, batch ingest"
    " (POST /v1/events/batch) carries up to 100 events a request.",
    "apigw_account_rps": "Batch ingest; past 10,000 requests/s of batches, a quota increase, or producers"
    " writing to the delivery pipeline through a queue (SQS or Kinesis) instead of HTTP.",
    "api_key_rate": "More keys per producer, or a higher per-key rate; batches count per request.",
    "lambda_concurrency": "A quota increase (tens of thousands are granted); the delivery function dominates:"
    " its concurrency is deliveries/s x endpoint latency, so slow endpoints cost concurrency, not CPU.",
    "authorizer_reserved": "Raise reserved_concurrency; the authorizer's cache takes most requests off it.",
    "ingest_reserved": "Raise reserved_concurrency; batch ingest divides ingest invocations by the batch size.",
    "delivery_max_concurrency": "Raise delivery_max_concurrency (at most 1,000 per event source); past that,"
    " several delivery queues (sharded by endpoint), each with its own event source.",
    "endpoint_groups": "Raise the endpoint's max_in_flight (at most 50); past 50 in flight to one endpoint,"
    " a design change: per-endpoint shards of message groups, or an HTTP/2 multiplexing sender.",
    "sqs_fifo_ht_tps": "Batch receives and deletes are already batched; past 70,000 calls/s, shard the delivery"
    " queue by endpoint.",
    "dynamodb_table_wru": "A table-level on-demand quota increase; fewer write units per delivery (issue 12).",
    "dynamodb_partition_wcu": "Shard the hot key: the tenant-keyed index partitions of one large tenant take"
    " every one of its deliveries (write-sharded keys, read by scatter-gather).",
    "sfn_start_execution": "The circuit already keeps executions per outage, not per event; a quota increase.",
    "sfn_state_transitions": "A quota increase; Express workflows for short retry schedules.",
    "sfn_send_task": "A quota increase.",
    "sfn_open_executions": "A quota increase.",
}

STANDARD_RATES = (1_000, 10_000, 100_000)
STANDARD_FAILING = (0.0, 0.01, 0.10)
STANDARD_FANOUTS = (1, 10)


def standard_workloads() -> list[Workload]:
    return [
        Workload(rate, fanout=fanout, failing_share=failing)
        for rate in STANDARD_RATES
        for fanout in STANDARD_FANOUTS
        for failing in STANDARD_FAILING
    ]


def fmt(value: float) -> str:
    if value == math.inf:
        return "never"
    return f"{value:,.0f}" if value >= 10 else f"{value:,.2f}"


def standard_table(profile: dict[str, Any]) -> str:
    rows = []
    for w in standard_workloads():
        a = assess(w, profile)
        first = a.first
        over = [d.quota.key for d in sorted(a.demands, key=lambda d: -d.utilisation) if d.utilisation > 1]
        hottest = max(a.hot_partitions, key=lambda h: h[2], default=("", "", 0.0))
        rows.append(
            [
                f"{w.events_per_second:,}",
                w.fanout,
                f"{w.failing_share:.0%}",
                f"{first.quota.key} ({first.utilisation:.0%})",
                fmt(a.saturates_at(first)),
                f"{a.first_aws.quota.key} at {fmt(a.saturates_at(a.first_aws))}",
                ", ".join(over[1:4]) + (" …" if len(over) > 4 else "") if len(over) > 1 else "",
                f"{hottest[2]:,.0f} ({hottest[0]})",
                f"${a.usd_per_month:,.0f}",
            ]
        )
    return table(
        [
            "events/s",
            "fan-out",
            "failing",
            "first to saturate (utilisation)",
            "it saturates at events/s",
            "first of AWS's quotas, at events/s",
            "also over its limit",
            "hottest partition WCU/s (where)",
            "per month",
        ],
        rows,
        align="rrrlrlllr",
    )


HEADROOM = 1.25  # settings sized for the workload with a quarter to spare
DELIVERY_MAX_CONCURRENCY_CAP = 1000.0  # an SQS event source's maximum concurrency: beyond it, a design change


def settings_table(profile: dict[str, Any]) -> str:
    """What each standard workload needs the stack's limits and the account's concurrency to be."""
    keys = [
        "stage_throttle",
        "api_key_rate",
        "authorizer_reserved",
        "ingest_reserved",
        "delivery_max_concurrency",
        "endpoint_groups",
        "lambda_concurrency",
    ]
    # beyond these, a design change: the event source's most, an endpoint's most message groups (the API's bound)
    caps = {
        "delivery_max_concurrency": DELIVERY_MAX_CONCURRENCY_CAP,
        "endpoint_groups": all_quotas()["endpoint_groups"].limit,
    }
    rows = []
    for w in standard_workloads():
        if w.failing_share != 0.01:
            continue
        demands = {d.quota.key: d.demand for d in assess(w, profile).demands}
        cells = []
        for key in keys:
            needed = math.ceil(demands[key] * HEADROOM)
            cap = caps.get(key)
            cells.append(f"{needed:,}" + (" **(over the cap)**" if cap is not None and needed > cap else ""))
        rows.append([f"{w.events_per_second:,}", w.fanout, *cells])
    return table(["events/s", "fan-out", *keys], rows, align="rr" + "r" * len(keys))


def assessment_report(a: Assessment) -> str:
    w = a.workload
    rows = []
    for d in sorted(a.demands, key=lambda d: -d.utilisation):
        rows.append(
            [
                d.quota.service,
                d.quota.what + (f" [{d.note}]" if d.note else ""),
                fmt(d.demand),
                f"{fmt(d.quota.limit)} {d.quota.unit}",
                f"{d.utilisation:.1%}",
                fmt(a.saturates_at(d)),
            ]
        )
    lines = [
        f"Workload: {w.label}; {w.tenants:,} tenants, the largest sending {w.largest_tenant_share:.0%}; outages of"
        f" {w.outage_hours:g} h; {w.payload_bytes:,}-byte events; endpoints answer in {w.endpoint_latency_ms:g} ms.",
        "",
        table(["service", "quota", "demand", "limit", "utilisation", "saturates at events/s"], rows, align="llrrrr"),
        "",
        f"First to saturate: {a.first.quota.key} ({a.first.quota.what}) at {fmt(a.saturates_at(a.first))} events/s."
        f" {BEYOND.get(a.first.quota.key, '')}",
        "",
        "Concurrency by function: " + ", ".join(f"{f} {c:,.1f}" for f, c in sorted(a.concurrency.items())),
        "",
        "Partitions under one key (per second):",
    ]
    for where, per, units in sorted(a.hot_partitions, key=lambda h: -h[2]):
        lines.append(f"- {where}: {units:,.0f} WCU/s on the partition of {per} (limit 1,000)")
    lines.append(f"\nMonthly cost at this rate (30 days): ${a.usd_per_month:,.0f}")
    return "\n".join(lines)


def quota_table() -> str:
    rows = [
        [
            q.service,
            q.key,
            q.what,
            f"{fmt(q.limit)} {q.unit}" + (f" (burst {fmt(q.burst)})" if q.burst else ""),
            q.adjustable,
            q.source,
        ]
        for q in all_quotas().values()
    ]
    return table(["service", "key", "quota", "default", "to raise it", "source"], rows)


def assumptions(profile: dict[str, Any]) -> str:
    measured = ", ".join(
        f"{name} {s['usd_per_million']:.2f} USD per million events" for name, s in profile["scenarios"].items()
    )
    return (
        f"Quotas: {REGION} defaults as published on {QUOTAS_READ} (bench/quotas.py). Counts:"
        f" bench/operation_profile.json (the cost benchmark's scenarios at {profile['events_measured']} events,"
        f" metered on moto). Durations: AWS calls x {CALL_MS:g} ms + {COMPUTE_MS:g} ms per invocation, plus the"
        f" endpoint's latency for deliveries. Cost: the cost benchmark's per-event bill ({measured}), linear in"
        f" fan-out and failing share (an outage's fixed costs, its workflows, spread over the"
        f" {profile['scenarios']['outage']['events']} events of the"
        " measured outage: an upper bound). The authorizer: once per key (a key per tenant) and cache TTL."
        " Outages: every failing"
        " endpoint is in an outage of the workload's length, outages start evenly."
    )


def docs(profile: dict[str, Any]) -> str:
    from bench.simulation import comparison_table

    example = assess(Workload(10_000, fanout=1, failing_share=0.01), profile)
    beyond = "\n".join(f"- **{key}**: {text}" for key, text in BEYOND.items())
    return f"""# Capacity: how far one deployment goes

<!-- Generated by `make capacity ARGS=--write-docs` (bench/capacity.py);
     tests/unit/test_capacity.py checks it is current. -->

What breaks first at 1,000, 10,000 and 100,000 events per second, with none, 1% or 10% of endpoints failing,
computed from the operations our handlers make (counted on moto, `bench/operation_profile.json`) against the
quotas below. `make capacity` prints this for any workload
(`make capacity ARGS='--rate 20000 --fanout 3 --failing 0.05 --tenants 200 --largest-share 0.3'`).

{assumptions(profile)}

## The standard workloads

Every workload here: 1,000 tenants, the largest sending 10% of the events; 6-hour outages; 1 KiB events;
endpoints answering in 200 ms. Utilisation is demand over the default limit; "saturates at" is the event rate
at which that quota is used up, all else equal.

{standard_table(profile)}

With the stack's defaults, its own limits (the API stage throttle, reserved and maximum concurrency, an
endpoint's message groups) come first: they are set low on purpose, to protect the account and the other
tenants, and are the cheapest to raise (CDK context, no code). Past them come AWS's account quotas.

## What to set for each (1% failing, {HEADROOM:g}x headroom)

The stack's limits (CDK context, `Api.THROTTLE`, an endpoint's `max_in_flight`) and the account's Lambda
concurrency each workload needs. "Over the cap" is past what the setting can be (an SQS event source's maximum
concurrency is 1,000; an endpoint has at most 50 message groups): those workloads need the design changes below
(several delivery queues, per-endpoint shards), not a bigger number.

{settings_table(profile)}

## One workload in full: 10,000 events/s, fan-out 1, 1% failing

```
{assessment_report(example)}
```

## The quotas

{quota_table()}

## Past each limit

{beyond}

## The model checked by simulation

`bench/simulation.py` runs the real retry schedule (`domain/schedule.py`, with its jitter) and the real circuit
rules (`domain/circuit.py`) on a simulated clock (no AWS, no sleeping) at a scaled workload: the rate and every
quota divided by the same factor. Each quota is a token bucket or a pool of concurrency; a throttled call is
retried with backoff and jitter as the adapters do, and then handed back (the producer retries its request with
the same idempotency key, or the queue redelivers the message). The rate ramps up until something throttles.

{comparison_table()}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, help="events per second (default: the standard workloads)")
    parser.add_argument("--fanout", type=int, default=1)
    parser.add_argument("--failing", type=float, default=0.0, help="share of endpoints in an outage (0..1)")
    parser.add_argument("--outage-hours", type=float, default=6.0)
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--largest-share", type=float, default=0.1, help="the largest tenant's share of events")
    parser.add_argument("--payload-bytes", type=int, default=1024)
    parser.add_argument("--latency-ms", type=float, default=200.0, help="a healthy endpoint's response time")
    parser.add_argument("--measure", action="store_true", help="re-measure bench/operation_profile.json first")
    parser.add_argument("--write-docs", action="store_true", help="regenerate docs/capacity.md")
    args = parser.parse_args(argv)
    if args.measure:
        PROFILE_PATH.write_text(json.dumps(measure_profile(), indent=2, sort_keys=True) + "\n")
        print(f"wrote {PROFILE_PATH.relative_to(ROOT)}")
    profile = load_profile()
    if args.write_docs:
        DOCS_PATH.write_text(docs(profile))
        print(f"wrote {DOCS_PATH.relative_to(ROOT)}")
        return 0
    print("# Capacity\n")
    print(assumptions(profile) + "\n")
    if args.rate is None:
        print(standard_table(profile))
        from bench.simulation import comparison_table

        print("\n## The model against the simulation\n")
        print(comparison_table())
        return 0
    workload = Workload(
        args.rate,
        fanout=args.fanout,
        failing_share=args.failing,
        outage_hours=args.outage_hours,
        tenants=args.tenants,
        largest_tenant_share=args.largest_share,
        payload_bytes=args.payload_bytes,
        endpoint_latency_ms=args.latency_ms,
    )
    print(assessment_report(assess(workload, profile)))
    print("\n" + json.dumps({"workload": asdict(workload)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
