"""A discrete-event run of the delivery pipeline against its quotas, to check the capacity model (bench/capacity.py).

No AWS and no sleeping: a simulated clock and a heap of timed actions. It runs the real rules where they decide
what happens: the message group of each delivery (`domain.envelope.message_group_id`), the circuit's gate and
its opening count (`domain.circuit`), the schedule's jittered retry times and the probe schedule
(`RetrySchedule.next_attempt_at`, `domain.circuit.next_probe_after_failure`), on a compressed schedule
(`PROBE_SCHEDULE`: the outage lasts seconds, not hours). The rest is the shape of the system: producers send through
the API (its account quota, the stage throttle, the per-key rate: token buckets), the authorizer and ingest take
a slot of their reserved concurrency for their duration (a pool), ingest writes to DynamoDB (each table's and each
hot partition's write units: token buckets; the event to the event log or the Events table, the deliveries it
stores to the deliveries table, the log's entries on the tenant's shards of the event log and the index) and sends
to the FIFO queue; the delivery event source takes one message per in-flight-free group up to its maximum
concurrency, the delivery function holds its slot for the
endpoint's latency and writes the delivery's record.

At the edge it does what the adapters do: a throttled AWS call is retried with exponential backoff and full
jitter (botocore's standard mode: 3 attempts), then the work is handed back: the producer retries its request
with the same idempotency key (nothing is accepted twice), or the message becomes visible again after its
visibility timeout. The rate ramps from 2% to twice the model's first saturation; each quota's first
throttled second (over 1% of its calls refused in that second, or a pool's backlog past twice its size) is its
saturation point. At the end the outage
is over, the circuit drains, and every accepted event must be delivered: nothing lost.

Scaling: the event rate and every quota's rate and concurrency are multiplied by one factor (at most 1) so that
a run stays small; the first bottleneck does not move under it, since every demand scales the same way.
"""

from __future__ import annotations

import functools
import heapq
import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.capacity import (
    BATCH_SLOWEST,
    Assessment,
    Workload,
    _mix,
    assess,
    function_seconds,
    load_profile,
)
from bench.common import table
from bench.quotas import Quota, all_quotas
from hookrelay.adapters.schema import DELIVERIES, DELIVERY_LOG_INDEX, EVENT_LOG, EVENTS
from hookrelay.domain.circuit import OPEN_AFTER_FAILURES, CircuitState, Gate, Via, gate, next_probe_after_failure
from hookrelay.domain.envelope import message_group_id
from hookrelay.domain.schedule import schedule_from_config

EPOCH = datetime(2026, 12, 1, tzinfo=UTC)
SIM_PEAK_EVENTS = 400.0  # the ramp's top, in simulated events per second, after scaling
# The ramp's top, as a multiple of the model's first saturation: as far as a simulated saturation may lie from the
# model's and still agree with it (tests/unit/test_capacity.py). The model is the cautious one (a fast batch lasts
# its slowest answer, drawn at twice the typical): the simulation's throttles come later, up to about 1.5 times.
RAMP_TOP = 2.0
RAMP_SECONDS = 20.0 * RAMP_TOP  # a rise of 5% of the model's first saturation a second, whatever the top
SDK_ATTEMPTS = 3  # botocore's standard retry mode
SDK_BASE_SECONDS = 0.05
PRODUCER_BASE_SECONDS = 0.2
PRODUCER_CAP_SECONDS = 5.0
VISIBILITY_SECONDS = 5.0  # a failed delivery's message is back after this (scaled down with the run)
THROTTLED_SHARE = 0.01  # a quota saturates when more than this share of its calls in a second is refused
OUTAGE_ENDS = RAMP_SECONDS * 0.8
# A delivered attempt's one write: its record, which claims it too (domain/lifecycle.claims_late: a first attempt is
# claimed only if it runs long).
RECORD_WRU = 1.0
PROBE_SCHEDULE = schedule_from_config([0, 1, 2, 4])  # probes seconds apart: the outage is compressed too
FAST, SLOW = "fast", "slow"  # a delivery queue shard's two lanes
# A poller's ReceiveMessage round trip (a long poll answers as soon as a message is there): the messages that arrive
# meanwhile are in its batch. At thousands of messages a second a batch is full; at a few, it holds what came.
GATHER_SECONDS = 0.02


class Bucket:
    """A token bucket: `rate` tokens a second, at most `size`."""

    def __init__(self, rate: float, size: float) -> None:
        self.rate, self.size, self.tokens, self.at = rate, size, size, 0.0

    def take(self, now: float, n: float = 1.0) -> bool:
        self.tokens = min(self.size, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= n:
            self.tokens -= n
            return True
        return False


class Pool:
    """Concurrency: at most `size` at once."""

    def __init__(self, size: float) -> None:
        self.size, self.busy = size, 0

    def take(self, now: float, n: float = 1.0) -> bool:
        if self.busy + 1 <= max(1.0, self.size):
            self.busy += 1
            return True
        return False

    def give(self) -> None:
        self.busy -= 1


@dataclass
class Tally:
    calls: dict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))
    refused: dict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))

    def backlogged(self, key: str, now: float) -> None:
        """A pool's backlog outgrew it: that second counts as saturated."""
        self.calls[(key, int(now))] += 1
        self.refused[(key, int(now))] = self.calls[(key, int(now))]

    def note(self, key: str, now: float, ok: bool) -> None:
        second = int(now)
        self.calls[(key, second)] += 1
        if not ok:
            self.refused[(key, second)] += 1

    def first_saturation(self) -> dict[str, int]:
        first: dict[str, int] = {}
        for (key, second), refused in sorted(self.refused.items(), key=lambda kv: kv[0][1]):
            if key not in first and refused > THROTTLED_SHARE * self.calls[(key, second)]:
                first[key] = second
        return first


@dataclass
class Endpoint:
    id: str
    tenant: int
    failing: bool
    slow: bool = False  # on the slow lane for its latency (failing endpoints are there too)
    shard: int = 0  # its delivery queue shard
    circuit: CircuitState = CircuitState.CLOSED
    failures_in_a_row: int = 0
    opened_at: float = 0.0
    probes: int = 0
    parked: list[str] = field(default_factory=list)


@dataclass
class Outcome:
    first: dict[str, float]  # quota key -> unscaled events/s at its first sustained throttle
    produced: int
    accepted: int
    delivered: int
    duplicates_accepted: int
    throttles: dict[str, int]


class Simulation:
    def __init__(
        self, workload: Workload, profile: dict[str, Any], quotas: dict[str, Quota], model: Assessment, seed: int = 7
    ) -> None:
        self.w, self.rng = workload, random.Random(seed)
        self.peak = RAMP_TOP * model.saturates_at(model.first)  # the ramp's top: past the model's first saturation
        self.scale = min(1.0, SIM_PEAK_EVENTS / self.peak)
        s = self.scale
        self.now = 0.0
        self.heap: list[tuple[float, int, Callable[[], None]]] = []
        self.seq = 0
        self.tally = Tally()
        self.buckets: dict[str, Bucket | Pool] = {}
        for key in ("apigw_account_rps", "stage_throttle", "sfn_start_execution"):
            q = quotas[key]
            self.buckets[key] = Bucket(q.limit * s, (q.burst or q.limit) * s)
        # one key per tenant; the largest tenant's is the one that can run out
        self.key_rate = quotas["api_key_rate"].limit * s
        self.keys: dict[int, Bucket] = {}
        self.partitions: dict[str, Bucket] = {}
        self.partition_limit = quotas["dynamodb_partition_wcu"].limit * s
        self.tables: dict[str, Bucket] = {}  # each table's own quota
        self.table_limit = (quotas["dynamodb_table_wru"].limit * s, (quotas["dynamodb_table_wru"].burst or 0) * s)
        for key in ("lambda_concurrency", "authorizer_reserved", "ingest_reserved"):
            self.buckets[key] = Pool(quotas[key].limit * s)
        assert model.deployment is not None
        self.deployment = model.deployment
        # Each queue shard's two event sources (fast, slow), each with its own maximum concurrency.
        self.sources = {
            (shard, lane): Pool(quotas["delivery_max_concurrency"].limit * s)
            for shard in range(self.deployment.queue_shards)
            for lane in (FAST, SLOW)
        }
        self.max_in_flight = max(1, round(quotas["endpoint_groups"].limit * s))
        self.queued = 0  # messages waiting in their groups
        self.queued_at: dict[str, int] = defaultdict(int)  # by endpoint
        self.busy_at: dict[str, int] = defaultdict(int)  # deliveries in flight, by endpoint
        # what each step costs, from the operation profile (the model's own counts)
        # ingest's writes, by table: the event (in the event log, or the Events table when keyed), and every write of
        # the deliveries table but the record of each attempt, which the delivery function makes (the deliveries ingest
        # stores, and their log pages: measured); none on the happy path, whose deliveries are left unstored
        self.ingest_wru = {
            table: _mix(profile, ("write_units", f"{table}/-"), workload.fanout)
            for table in (EVENT_LOG.logical_name, EVENTS.logical_name)
        }
        self.ingest_wru[DELIVERIES.logical_name] = max(
            0.0,
            sum(
                _mix(profile, ("write_units", k), workload.fanout)
                for k in profile["scenarios"]["happy"]["write_units"]
                if k.startswith(f"{DELIVERIES.logical_name}/")
            )
            - RECORD_WRU * workload.fanout,
        )
        # the largest tenant's writes to its log, on each of the partitions they are spread over: the event log's
        # and the by_tenant index's (their own partitions, each over log_shards)
        self.tenant_wru = {
            where: _mix(profile, ("write_units", where), workload.fanout) / self.deployment.log_shards
            for where in (f"{EVENT_LOG.logical_name}/-", f"{DELIVERIES.logical_name}/{DELIVERY_LOG_INDEX.name}")
        }
        self.delivery_wru = RECORD_WRU
        self.seconds = {f: function_seconds(profile, f) for f in ("authorizer", "ingest", "delivery")}
        self.latency = workload.endpoint_latency_ms / 1000
        self.slow_latency = workload.slow_latency_ms / 1000
        self.endpoints = self._endpoints()
        self.groups: dict[str, list[tuple[str, Endpoint, int]]] = defaultdict(list)
        self.in_flight: set[str] = set()
        self.ready: dict[tuple[int, str], list[str]] = defaultdict(list)  # by event source: (shard, lane)
        self.source_of: dict[str, tuple[int, str]] = {}  # a message group's event source
        self.queued_on: dict[tuple[int, str], int] = defaultdict(int)
        self.gathering: set[tuple[int, str]] = set()  # sources whose poller is gathering a batch
        self.flushing: set[tuple[int, str]] = set()
        self.produced = self.accepted = self.delivered = self.duplicates = 0
        self.accepted_ids: set[str] = set()
        self.delivered_ids: set[str] = set()
        self.throttles: dict[str, int] = defaultdict(int)

    # -- the world ---------------------------------------------------------------------------------------
    def _endpoints(self) -> dict[int, list[Endpoint]]:
        tenants = min(self.w.tenants, 50)  # the largest tenant and a sample of the rest
        failing = round(self.w.failing_share * tenants * self.w.fanout)
        slow = round(self.w.slow_share * tenants * self.w.fanout)
        shards = self.deployment.queue_shards
        endpoints: dict[int, list[Endpoint]] = {}
        n = 0
        others = 0  # the endpoints of the tenants but the largest: the failing and the slow are among them
        for tenant in range(tenants):
            endpoints[tenant] = []
            for j in range(self.w.fanout):
                endpoints[tenant].append(
                    Endpoint(
                        f"ep_{tenant}_{j}",
                        tenant,
                        failing=tenant > 0 and others < failing,
                        slow=tenant > 0 and failing <= others < failing + slow,
                        shard=n % shards,  # the largest tenant's first endpoint on shard 0, the rest round
                    )
                )
                n += 1
                others += tenant > 0
        return endpoints

    def at(self, when: float, action: Callable[[], None]) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (when, self.seq, action))

    def rate(self, t: float) -> float:
        return self.peak * self.scale * min(1.0, max(0.02, t / RAMP_SECONDS))

    def take(self, key: str, n: float = 1.0) -> bool:
        ok = self.buckets[key].take(self.now, n)
        self.tally.note(key, self.now, ok)
        if not ok:
            self.throttles[key] += 1
        return ok

    def take_table(self, name: str, units: float) -> bool:
        rate, burst = self.table_limit
        bucket = self.tables.setdefault(name, Bucket(rate, burst or rate))
        ok = bucket.take(self.now, units)
        self.tally.note("dynamodb_table_wru", self.now, ok)
        if not ok:
            self.throttles["dynamodb_table_wru"] += 1
        return ok

    def take_partition(self, name: str, units: float) -> bool:
        bucket = self.partitions.setdefault(name, Bucket(self.partition_limit, self.partition_limit))
        ok = bucket.take(self.now, units)
        self.tally.note("dynamodb_partition_wcu", self.now, ok)
        if not ok:
            self.throttles["dynamodb_partition_wcu"] += 1
        return ok

    # -- producers ---------------------------------------------------------------------------------------
    def produce(self) -> None:
        if self.now >= RAMP_SECONDS:
            return
        rate = self.rate(self.now)
        tenant = 0 if self.rng.random() < self.w.largest_tenant_share else self.rng.randrange(1, len(self.endpoints))
        self.produced += 1
        self.request(f"evt_{self.produced}", tenant, 0)
        self.at(self.now + self.rng.expovariate(rate), self.produce)

    def request(self, event_id: str, tenant: int, tries: int) -> None:
        key = self.keys.setdefault(tenant, Bucket(self.key_rate, 2 * self.key_rate))
        key_ok = key.take(self.now)
        self.tally.note("api_key_rate", self.now, key_ok or tenant != 0)
        admitted = (
            self.take("apigw_account_rps")
            and self.take("stage_throttle")
            and key_ok
            and self.take("lambda_concurrency")
        )
        if admitted and not self.take("authorizer_reserved"):
            self.buckets["lambda_concurrency"].give()  # type: ignore[union-attr]
            admitted = False
        if not admitted:
            self.retry_request(event_id, tenant, tries)
            return
        self.at(self.now + self.seconds["authorizer"], lambda: self.authorized(event_id, tenant, tries))

    def retry_request(self, event_id: str, tenant: int, tries: int) -> None:
        backoff = min(PRODUCER_CAP_SECONDS, PRODUCER_BASE_SECONDS * 2**tries) * self.rng.random()
        self.at(self.now + backoff, lambda: self.request(event_id, tenant, tries + 1))

    def authorized(self, event_id: str, tenant: int, tries: int) -> None:
        self.buckets["authorizer_reserved"].give()  # type: ignore[union-attr]
        if not self.take("ingest_reserved"):
            self.buckets["lambda_concurrency"].give()  # type: ignore[union-attr]
            self.retry_request(event_id, tenant, tries)
            return
        self.at(self.now + self.seconds["ingest"], lambda: self.ingest(event_id, tenant, tries, 0))

    def ingest(self, event_id: str, tenant: int, tries: int, sdk_attempt: int) -> None:
        ok = all(self.take_table(table, units) for table, units in self.ingest_wru.items() if units) and all(
            self.take_partition(f"{where}:{tenant}", units) for where, units in self.tenant_wru.items() if units
        )
        if not ok and sdk_attempt + 1 < SDK_ATTEMPTS:  # the SDK's own retry, inside the same invocation
            backoff = SDK_BASE_SECONDS * 2**sdk_attempt * self.rng.random()
            self.at(self.now + backoff, lambda: self.ingest(event_id, tenant, tries, sdk_attempt + 1))
            return
        self.buckets["ingest_reserved"].give()  # type: ignore[union-attr]
        self.buckets["lambda_concurrency"].give()  # type: ignore[union-attr]
        if not ok:  # a 5xx: the producer retries with the same idempotency key
            self.retry_request(event_id, tenant, tries)
            return
        if event_id in self.accepted_ids:
            self.duplicates += 1  # the idempotency key converges: no new deliveries
            return
        self.accepted_ids.add(event_id)
        self.accepted += 1
        for endpoint in self.endpoints[tenant]:
            group = message_group_id(endpoint.id, self.max_in_flight, None, event_id)
            self.enqueue(group, event_id, endpoint, 0)

    # -- deliveries --------------------------------------------------------------------------------------
    def enqueue(self, group: str, event_id: str, endpoint: Endpoint, attempts: int) -> None:
        lane = SLOW if endpoint.slow or endpoint.failing else FAST
        source = self.source_of.setdefault(group, (endpoint.shard, lane))
        if not self.groups[group] and group not in self.in_flight:
            self.ready[source].append(group)
        self.groups[group].append((event_id, endpoint, attempts))
        self.queued += 1
        self.queued_on[source] += 1
        self.queued_at[endpoint.id] += 1
        busy, queued = self.busy_at[endpoint.id], self.queued_at[endpoint.id]
        # The largest tenant's endpoint is behind: a backlog of twice its groups, with most of them busy (its messages
        # hash to their groups unevenly, so some are idle while others queue, even past its saturation).
        if endpoint.tenant == 0 and busy >= 0.8 * self.max_in_flight and queued > 2 * self.max_in_flight:
            self.tally.backlogged("endpoint_groups", self.now)
        self.poll(source)

    def poll(self, source: tuple[int, str]) -> None:
        """The event source's poller: while it has a free slot (and the account one), an invocation of up to a
        batch of ready message groups' first messages (the slow lane: one)."""
        pool = self.sources[source]
        account = self.buckets["lambda_concurrency"]
        ready = self.ready[source]
        batch_size = self.deployment.fast_batch if source[1] == FAST else 1
        while ready:
            if pool.busy + 1 > max(1.0, pool.size) or account.busy + 1 > max(1.0, account.size):
                if self.queued_on[source] > 2 * batch_size * max(1.0, pool.size):  # the event source is behind
                    full = "delivery_max_concurrency" if pool.busy + 1 > max(1.0, pool.size) else "lambda_concurrency"
                    self.tally.backlogged(full, self.now)
                return
            if len(ready) < batch_size and source not in self.flushing:
                # A poller's receive returns what arrived during its round trip: a batch gathers that long.
                if source not in self.gathering:
                    self.gathering.add(source)
                    self.at(self.now + GATHER_SECONDS, lambda src=source: self.flush(src))
                return
            pool.take(self.now)
            account.take(self.now)
            batch: list[tuple[str, str, Endpoint, int]] = []
            while ready and len(batch) < batch_size:
                group = ready.pop(0)
                self.in_flight.add(group)
                event_id, endpoint, attempts = self.groups[group].pop(0)
                self.queued -= 1
                self.queued_on[source] -= 1
                self.queued_at[endpoint.id] -= 1
                self.busy_at[endpoint.id] += 1
                batch.append((group, event_id, endpoint, attempts))
            self.at(self.now + self.seconds["delivery"], lambda b=batch, src=source: self.invoke(src, b))  # bound now

    def flush(self, source: tuple[int, str]) -> None:
        """The poller's receive returns: an invocation of what gathered, however few."""
        self.gathering.discard(source)
        self.flushing.add(source)
        self.poll(source)
        self.flushing.discard(source)

    def invoke(self, source: tuple[int, str], batch: list[tuple[str, str, Endpoint, int]]) -> None:
        """One invocation, its AWS calls made: each message sent at once (its own thread), the invocation over
        when the slowest is answered; every message's group held till then (the batch is deleted at its end)."""
        slowest = 0.0
        for group, event_id, endpoint, attempts in batch:
            took = self.attempt(group, event_id, endpoint, attempts)
            slowest = max(slowest, took)
        self.at(self.now + slowest, lambda: self.finished(source, batch))

    def finished(self, source: tuple[int, str], batch: list[tuple[str, str, Endpoint, int]]) -> None:
        self.sources[source].give()
        self.buckets["lambda_concurrency"].give()  # type: ignore[union-attr]
        for group, _, endpoint, _ in batch:
            self.busy_at[endpoint.id] -= 1
            self.in_flight.discard(group)
            if self.groups[group]:
                self.ready[self.source_of[group]].append(group)
        self.poll(source)

    def answer_time(self, endpoint: Endpoint) -> float:
        """How long the endpoint takes: a slow one its slow latency; a fast one anything up to twice the typical
        (evenly: the slowest of a batch of ten is about BATCH_SLOWEST times it, as the model says)."""
        if endpoint.slow:
            return self.slow_latency
        return self.rng.uniform(0.0, BATCH_SLOWEST * self.latency) if self.deployment.fast_batch > 1 else self.latency

    def attempt(self, group: str, event_id: str, endpoint: Endpoint, attempts: int) -> float:
        """One message of an invocation: its claim and record (the table's write units), the circuit's gate, the
        send; how long its answer takes (0: none sent)."""
        if not self.take_table(DELIVERIES.logical_name, self.delivery_wru):
            # throttled past the SDK's retries: the message comes back after its visibility timeout
            self.at(
                self.now + VISIBILITY_SECONDS * self.rng.uniform(0.8, 1.2),
                lambda: self.enqueue(group, event_id, endpoint, attempts),
            )
            return 0.0
        if gate(endpoint.circuit, Via.QUEUE, drain_paused=False) is Gate.PARK:
            endpoint.parked.append(event_id)
            return 0.0
        took = self.answer_time(endpoint)
        self.at(self.now + took, lambda: self.answered(group, event_id, endpoint, attempts + 1))
        return took

    def answered(self, group: str, event_id: str, endpoint: Endpoint, attempts: int) -> None:
        if not self.down(endpoint):
            endpoint.failures_in_a_row = 0
            self.done(event_id, endpoint)
            return
        endpoint.failures_in_a_row += 1
        if endpoint.circuit is CircuitState.CLOSED and endpoint.failures_in_a_row >= OPEN_AFTER_FAILURES:
            endpoint.circuit, endpoint.opened_at = CircuitState.OPEN, self.now
            self.schedule_probe(endpoint)
        if endpoint.circuit is not CircuitState.CLOSED:
            endpoint.parked.append(event_id)
            return
        # a retry workflow: StartExecution (throttled: the SDK retries, then the message comes back)
        if not self.take("sfn_start_execution"):
            self.at(self.now + VISIBILITY_SECONDS, lambda: self.enqueue(group, event_id, endpoint, attempts))
            return
        wake = PROBE_SCHEDULE.next_attempt_at(
            first_attempt_at=EPOCH, attempts_made=min(attempts, 3), now=EPOCH, rng=self.rng
        )
        delay = ((wake or EPOCH) - EPOCH).total_seconds() + 1.0
        self.at(self.now + delay, lambda: self.enqueue(f"retry~{event_id}", event_id, endpoint, attempts))

    def down(self, endpoint: Endpoint) -> bool:
        return endpoint.failing and self.now < OUTAGE_ENDS

    def schedule_probe(self, endpoint: Endpoint) -> None:
        opened = EPOCH + timedelta(seconds=endpoint.opened_at)
        at = next_probe_after_failure(
            PROBE_SCHEDULE,
            opened_at=opened,
            probes_made=endpoint.probes,
            now=EPOCH + timedelta(seconds=self.now),
            retry_after=None,
        )
        self.at((at - EPOCH).total_seconds(), lambda: self.probe(endpoint))

    def probe(self, endpoint: Endpoint) -> None:
        if not endpoint.parked:
            endpoint.circuit = CircuitState.CLOSED
            return
        if not self.take("sfn_start_execution"):
            self.at(self.now + 1.0, lambda: self.probe(endpoint))
            return
        endpoint.probes += 1
        if self.down(endpoint):
            self.schedule_probe(endpoint)
            return
        # through: drain the parked deliveries in order, at the endpoint's concurrency
        endpoint.circuit, endpoint.failures_in_a_row = CircuitState.CLOSED, 0
        parked, endpoint.parked = endpoint.parked, []
        for event_id in parked:
            group = message_group_id(endpoint.id, self.max_in_flight, None, event_id)
            self.enqueue(group, event_id, endpoint, 0)

    def done(self, event_id: str, endpoint: Endpoint) -> None:
        key = f"{event_id}>{endpoint.id}"
        if key not in self.delivered_ids:
            self.delivered_ids.add(key)
            self.delivered += 1

    # -- the run -----------------------------------------------------------------------------------------
    def outstanding(self) -> bool:
        return bool(self.queued or self.in_flight)

    def run(self, until: float = RAMP_SECONDS * 4) -> Outcome:
        """The ramp and what follows it until `until`; then on while messages are still queued (a backlog past the
        saturation drains at the lanes' pace, which depends on how many groups its endpoints have) or in flight,
        up to twice as long, so that a backlog that never drains shows as deliveries missing."""
        self.at(0.0, self.produce)
        while self.heap and (self.heap[0][0] <= until or (self.outstanding() and self.heap[0][0] <= 2 * until)):
            self.now, _, action = heapq.heappop(self.heap)
            action()
        first = {key: self.rate(second) / self.scale for key, second in self.tally.first_saturation().items()}
        return Outcome(first, self.produced, self.accepted, self.delivered, self.duplicates, dict(self.throttles))


# The stack's limits raised (CDK context) and the account's concurrency (a quota increase): the CHECKED workloads
# that raise them find AWS's own quotas and the design's limits first.
RAISED = {
    "stage_throttle": 10_000.0,
    "api_key_rate": 10_000.0,
    "authorizer_reserved": 400.0,
    "ingest_reserved": 400.0,
    "delivery_max_concurrency": 1_000.0,
    "lambda_concurrency": 10_000.0,  # an account quota increase, as granted on request
}


def raised(quotas: dict[str, Quota], but: dict[str, float] | None = None) -> dict[str, Quota]:
    """The quotas with RAISED's limits, but those in `but`, set to theirs."""
    limits = {**RAISED, **(but or {})}
    return {
        k: replace(q, limit=limits[k], burst=limits[k] * 2 if q.burst else None) if k in limits else q
        for k, q in quotas.items()
    }


# Workloads whose first bottlenecks differ (the stack's own throttle, the event source, an endpoint's groups, a hot
# partition): the model's first must be the simulation's.
CHECKED: list[tuple[str, Workload, bool | dict[str, float]]] = [
    ("the stack's defaults", Workload(1_000), False),
    ("limits raised, fan-out 10", Workload(10_000, fanout=10), True),
    ("limits raised, one tenant sends half", Workload(10_000, largest_tenant_share=0.5, fanout=1), True),
    ("limits raised, 10% failing, fan-out 3", Workload(10_000, fanout=3, failing_share=0.1), True),
    (
        "limits raised, one tenant sends 80%, fan-out 10, endpoints answer in 20 ms",
        Workload(10_000, largest_tenant_share=0.8, fanout=10, endpoint_latency_ms=20),
        True,
    ),
    (
        "limits raised but each event source at 100, 10% of endpoints slow (1.5 s: the slow lanes)",
        Workload(10_000, tenants=50, endpoint_latency_ms=100, slow_share=0.1, slow_latency_ms=1_500),
        {"delivery_max_concurrency": 100.0},
    ),
]


@functools.cache
def compare() -> list[tuple[str, Workload, str, float, str, float, Outcome]]:
    """Model and simulation side by side for each CHECKED workload (seeded: the same every run)."""
    profile = load_profile()
    rows = []
    for name, workload, raise_limits in CHECKED:
        quotas = raised(all_quotas(), raise_limits if isinstance(raise_limits, dict) else None)
        if raise_limits is False:
            quotas = all_quotas()
        model = assess(workload, profile, quotas)
        outcome = Simulation(workload, profile, quotas, model).run()
        sim_first = min(outcome.first.items(), key=lambda kv: kv[1], default=("none", float("inf")))
        rows.append(
            (
                name,
                workload,
                model.first.quota.key,
                model.saturates_at(model.first),
                sim_first[0],
                sim_first[1],
                outcome,
            )
        )
    return rows


def comparison_table() -> str:
    rows = []
    for name, workload, model_key, model_rate, sim_key, sim_rate, outcome in compare():
        rows.append(
            [
                name,
                f"{model_key} at {model_rate:,.0f}/s",
                f"{sim_key} at {sim_rate:,.0f}/s",
                "yes" if model_key == sim_key else "**no**",
                f"{outcome.accepted:,} accepted, {outcome.delivered:,} delivered of"
                f" {outcome.accepted * workload.fanout:,} due,"
                f" {outcome.duplicates_accepted:,} producer retries absorbed",
                ", ".join(f"{k} {v:,}" for k, v in sorted(outcome.throttles.items())),
            ]
        )
    return table(
        [
            "workload",
            "model: first to saturate",
            "simulation: first to throttle",
            "same",
            "nothing lost",
            "throttled calls",
        ],
        rows,
    )


# --- The seeds' night at full size (issue 29): one endpoint down 02:00-08:00 with a rate limit, 100 healthy ---
#
# A second discrete-event run, on the same simulated clock, of one outage and its drain: the real rules decide what
# happens (the circuit's opening count, gate and drain window: `domain.circuit`; the default retry schedule's probe
# times: `next_probe_at`, `next_probe_after_failure`; the rate limit's slots, budget and drain room:
# `domain.pacing`; hand-overs every COMMANDS_PER_EXECUTION commands), and the rest is the shape of the system: a
# delivery takes DELIVERY_OVERHEAD_SECONDS of the function's own work plus the consumer's answer, a slow lane's
# event source runs NIGHT_SLOW_LANE_CONCURRENCY invocations at once (one message each), a message group sends one
# message at a time, the fast lane is a pool of NIGHT_FAST_LANE_CONCURRENCY shared by every endpoint.

NIGHT_EVENTS = 40_000
NIGHT_LIMIT = 50  # deliveries a second, declared by the consumer
NIGHT_HEALTHY = 100
NIGHT_HEALTHY_PER_SECOND = 5.0  # all healthy endpoints together
NIGHT_KEYS = 4  # the failing endpoint's ordering keys, over as many message groups (its max_in_flight)
NIGHT_START, OUTAGE_FROM, OUTAGE_UNTIL = 1 * 3600.0, 2 * 3600.0, 8 * 3600.0  # seconds after midnight
CONSUMER_SECONDS = 0.05  # the consumer's answer
DELIVERY_OVERHEAD_SECONDS = 0.03  # the function's own work per message (reads, claim, record)
NIGHT_SLOW_LANE_CONCURRENCY = 10  # `delivery_max_concurrency` of a stage that runs drains of this size
NIGHT_FAST_LANE_CONCURRENCY = 10


@dataclass
class NightFigures:
    executions: int  # Step Functions executions started for the outage (retry workflows and probe workflows)
    attempts: int  # attempts on the failing endpoint while it was down (first attempts and probes)
    order_violations: int
    recovered_at: float
    drained_at: float
    busiest_second: int  # the most sends to the limited endpoint starting in any one-second window
    healthy_extra_delay: float  # the healthy endpoints' worst delay beyond the same night without the outage
    delivered: int
    paused: int  # drain pauses for want of a slot within the budget

    @property
    def drain_seconds(self) -> float:
        return self.drained_at - self.recovered_at


class Night:
    """The night on a heap of timed actions; `with_outage=False` runs the healthy endpoints alone (the control)."""

    def __init__(self, *, with_outage: bool = True, seed: int = 29) -> None:
        from hookrelay.domain import pacing
        from hookrelay.domain.circuit import drain_window
        from hookrelay.domain.schedule import DEFAULT_SCHEDULE

        self.pacing, self.schedule = pacing, DEFAULT_SCHEDULE
        self.window = pacing.drain_room(drain_window(NIGHT_KEYS), NIGHT_LIMIT)
        self.interval_us = pacing.slot_interval_us(NIGHT_LIMIT)
        self.with_outage = with_outage
        self.rng = random.Random(seed)
        self.heap: list[tuple[float, int, Callable[[], None]]] = []
        self.seq = 0
        self.now = 0.0
        # The failing endpoint.
        self.circuit = CircuitState.CLOSED
        self.failures_in_a_row = 0
        self.opened_at = 0.0
        self.probes_made = 0
        self.parked: list[int] = []  # event numbers, in event order
        self.in_flight: set[int] = set()
        self.paused_until = 0.0
        self.next_us: int | None = None
        self.groups: dict[int, list[int]] = defaultdict(list)  # slow lane, per message group
        self.busy_groups: set[int] = set()
        self.slow_busy = 0
        self.sent_at: list[float] = []
        self.last_sent: dict[int, int] = {}  # per key, the last event number sent
        self.delivered: set[int] = set()
        self.executions = self.attempts = self.commands = self.violations = self.pauses = 0
        self.recovered_at = self.drained_at = 0.0
        # The healthy endpoints: the fast lane's pool, shared.
        self.fast_busy = 0
        self.fast_waiting: list[tuple[float, Callable[[], None]]] = []
        self.healthy_delays: dict[int, float] = {}

    def at(self, when: float, action: Callable[[], None]) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (when, self.seq, action))

    def down(self) -> bool:
        return OUTAGE_FROM <= self.now < OUTAGE_UNTIL

    def _clock(self, seconds: float) -> datetime:
        return EPOCH + timedelta(seconds=seconds)

    # -- the fast lane, shared ------------------------------------------------------------------------------
    def fast(self, work: Callable[[], None]) -> None:
        if self.fast_busy < NIGHT_FAST_LANE_CONCURRENCY:
            self.fast_busy += 1
            work()
        else:
            self.fast_waiting.append((self.now, work))

    def fast_done(self) -> None:
        self.fast_busy -= 1
        if self.fast_waiting:
            _, work = self.fast_waiting.pop(0)
            self.fast_busy += 1
            work()

    def healthy_event(self, n: int) -> None:
        arrived = self.now

        def send() -> None:
            self.healthy_delays[n] = self.now - arrived
            self.at(self.now + DELIVERY_OVERHEAD_SECONDS + CONSUMER_SECONDS, self.fast_done)

        self.fast(send)

    # -- the failing endpoint: arrivals, opening, probes -----------------------------------------------------
    def failing_event(self, n: int) -> None:
        if circuit_parks_new(self.circuit):
            self.parked.append(n)  # parked on arrival: no message, no execution
            return

        def first_attempt() -> None:
            self.attempts += 1
            self.at(self.now + DELIVERY_OVERHEAD_SECONDS + CONSUMER_SECONDS, lambda: self.failed_first(n))

        self.fast(first_attempt)

    def failed_first(self, n: int) -> None:
        self.fast_done()
        if not self.down():
            self.sent(n)
            return
        self.executions += 1  # its retry workflow
        self.parked.append(n)  # (parked when the circuit opens; its workflow stopped)
        self.parked.sort()
        if self.circuit is CircuitState.CLOSED:
            self.failures_in_a_row += 1
            if self.failures_in_a_row >= OPEN_AFTER_FAILURES:
                self.circuit, self.opened_at = CircuitState.OPEN, self.now
                self.executions += 1  # the probe workflow
                self.schedule_probe(first=True)

    def schedule_probe(self, *, first: bool = False) -> None:
        from hookrelay.domain.circuit import next_probe_at

        opened, now = self._clock(self.opened_at), self._clock(self.now)
        due = (
            next_probe_at(self.schedule, opened_at=opened, probes_made=0, now=now)
            if first
            else next_probe_after_failure(
                self.schedule, opened_at=opened, probes_made=self.probes_made, now=now, retry_after=None
            )
        )
        self.at((due - EPOCH).total_seconds(), self.probe)

    def command(self) -> None:
        """Each of the probe workflow's commands; a fresh execution takes over every COMMANDS_PER_EXECUTION."""
        from hookrelay.domain.circuit import COMMANDS_PER_EXECUTION

        self.commands += 1
        if self.commands % COMMANDS_PER_EXECUTION == 0:
            self.executions += 1

    def probe(self) -> None:
        self.command()
        self.attempts += 1
        if self.down():
            self.schedule_probe()  # from the probes made before this one, as `CircuitService._probe`
            self.probes_made += 1
            return
        oldest = self.parked.pop(0)  # the probe was the oldest parked delivery, and got through
        self.take_slot_and_send(oldest, lambda: None)
        self.circuit, self.recovered_at = CircuitState.DRAINING, self.now
        self.at(self.now, self.drain)

    # -- the drain and the slow lane -------------------------------------------------------------------------
    def drain(self) -> None:
        from hookrelay.domain.circuit import DRAIN_POLL_SECONDS

        self.command()
        if self.paused_until > self.now:
            self.in_flight.clear()  # after the pause the window starts afresh
            self.at(self.paused_until, self.drain)
            return
        if not self.parked and not self.in_flight:
            self.circuit, self.drained_at = CircuitState.CLOSED, self.now
            return
        if len(self.in_flight) <= self.window // 2:
            room = self.window - len(self.in_flight)
            released = [n for n in self.parked if n not in self.in_flight][:room]
            for n in released:
                self.in_flight.add(n)
                self.groups[n % NIGHT_KEYS].append(n)
            self.kick()
        self.at(self.now + DRAIN_POLL_SECONDS, self.drain)

    def kick(self) -> None:
        for group, queue in self.groups.items():
            if queue and group not in self.busy_groups and self.slow_busy < NIGHT_SLOW_LANE_CONCURRENCY:
                self.busy_groups.add(group)
                self.slow_busy += 1
                n = queue.pop(0)
                self.at(self.now + DELIVERY_OVERHEAD_SECONDS / 2, functools.partial(self.release, n, group))

    def release(self, n: int, group: int) -> None:
        def finished() -> None:
            self.busy_groups.discard(group)
            self.slow_busy -= 1
            self.kick()

        if self.paused_until > self.now or n not in self.parked:
            finished()  # the gate parks a release while the drain is paused: it stays in the lot, in order
            return
        if not self.take_slot_and_send(n, finished, budget=self.pacing.WAIT_SECONDS):
            self.pauses += 1
            self.paused_until = self.now + self.pacing.WAIT_SECONDS
            finished()

    def take_slot_and_send(self, n: int, then: Callable[[], None], budget: float | None = None) -> bool:
        now_us = round(self.now * self.pacing.MICROS)
        latest = None if budget is None else now_us + round(budget * self.pacing.MICROS)
        taken = self.pacing.reserve(self.next_us, now_us, self.interval_us, latest)
        if taken is None:
            return False
        self.next_us = taken.next_us
        if n in self.parked:
            self.parked.remove(n)
        start = taken.slot_us / self.pacing.MICROS

        def answered() -> None:
            self.landed(n)
            then()

        def send() -> None:
            self.sent(n)
            self.at(self.now + CONSUMER_SECONDS + DELIVERY_OVERHEAD_SECONDS / 2, answered)

        self.at(start, send)
        return True

    def sent(self, n: int) -> None:
        self.sent_at.append(self.now)
        key = n % NIGHT_KEYS
        if self.last_sent.get(key, -1) > n:
            self.violations += 1
        self.last_sent[key] = max(self.last_sent.get(key, -1), n)

    def landed(self, n: int) -> None:
        self.delivered.add(n)
        self.in_flight.discard(n)

    # -- the run ---------------------------------------------------------------------------------------------
    def run(self) -> NightFigures:
        outage_seconds = OUTAGE_UNTIL - OUTAGE_FROM
        if self.with_outage:
            for n in range(NIGHT_EVENTS):
                self.at(OUTAGE_FROM + outage_seconds * n / NIGHT_EVENTS, functools.partial(self.failing_event, n))
        arrivals = random.Random(7)  # the healthy endpoints' events: the same with or without the outage
        t, n = NIGHT_START, 0
        while t < 13 * 3600:
            t += arrivals.expovariate(NIGHT_HEALTHY_PER_SECOND)
            self.at(t, functools.partial(self.healthy_event, n))
            n += 1
        while self.heap:
            self.now, _, action = heapq.heappop(self.heap)
            action()
        return NightFigures(
            executions=self.executions,
            attempts=self.attempts,
            order_violations=self.violations,
            recovered_at=self.recovered_at,
            drained_at=self.drained_at,
            busiest_second=_busiest_second(self.sent_at),
            healthy_extra_delay=0.0,
            delivered=len(self.delivered),
            paused=self.pauses,
        )


def circuit_parks_new(state: CircuitState) -> bool:
    return gate(state, Via.QUEUE, drain_paused=False) is Gate.PARK


def _busiest_second(starts: list[float]) -> int:
    ordered, most, low = sorted(starts), 0, 0
    for high, start in enumerate(ordered):
        while start - ordered[low] >= 1.0:
            low += 1
        most = max(most, high - low + 1)
    return most


def night() -> NightFigures:
    """The night, and its healthy endpoints' delays against the same night without the outage."""
    outage, control = Night(), Night(with_outage=False)
    figures = outage.run()
    control.run()
    extra = max(outage.healthy_delays[n] - control.healthy_delays[n] for n in control.healthy_delays)
    return replace(figures, healthy_extra_delay=max(0.0, extra))


def _clock_time(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def night_table(figures: NightFigures) -> str:
    ideal = NIGHT_EVENTS / NIGHT_LIMIT
    rows = [
        ["executions for the outage", f"{figures.executions}", "≤ 10"],
        ["attempts for the outage", f"{figures.attempts}", "≤ 100"],
        ["events delivered", f"{figures.delivered:,} of {NIGHT_EVENTS:,}", "all"],
        ["order violations", f"{figures.order_violations}", "0"],
        [
            "recovery to drained",
            f"{figures.drain_seconds:,.0f} s ({_clock_time(figures.recovered_at)} to {_clock_time(figures.drained_at)};"
            f" {figures.drain_seconds / ideal - 1:+.1%} against {NIGHT_EVENTS:,} / {NIGHT_LIMIT} = {ideal:,.0f} s)",
            "within 5%",
        ],
        ["most sends in any second", f"{figures.busiest_second}", f"≤ {NIGHT_LIMIT}"],
        ["drain pauses for want of a slot", f"{figures.paused}", "-"],
        [f"{NIGHT_HEALTHY} healthy endpoints' extra delay", f"{figures.healthy_extra_delay:.3f} s", "none"],
    ]
    return table(["the night", "measured", "target"], rows)


if __name__ == "__main__":
    print(
        f"One endpoint down {_clock_time(OUTAGE_FROM)}-{_clock_time(OUTAGE_UNTIL)} while {NIGHT_EVENTS:,} events arrive"
        f" for it, rate limit {NIGHT_LIMIT}/s, max_in_flight {NIGHT_KEYS}, beside {NIGHT_HEALTHY} healthy endpoints"
        f" ({NIGHT_HEALTHY_PER_SECOND:g} events/s); slow lane concurrency {NIGHT_SLOW_LANE_CONCURRENCY}:\n"
    )
    print(night_table(night()))
