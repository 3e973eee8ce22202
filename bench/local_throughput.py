"""The local stack at speed: events/s end to end, and a healthy endpoint's latency beside a hanging one.

    python bench/local_throughput.py [--events N] [--hang-events M] [--control-events K] [--clients C] [--rate R]

Runs the real local stack as a process (`python -m local --json --fast --port 0`, as the end-to-end tests and
a person start it) and demo consumers (`python -m local.consumer`), all on 127.0.0.1. Three phases, each with a
fresh tenant, measured in the same run:

1. alone: one healthy endpoint with 8 message groups (`max_in_flight` 8) gets N events, offered at R per
   second in all by C producer clients, over 8 ordering keys that land in the endpoint's 8 groups;
2. beside a healthy endpoint, the control: the same set-up plus a second endpoint like it, subscribed to every
   event, K events (default M) at the same rate. Every event is then two deliveries: what the second endpoint
   costs the first when it is healthy;
3. beside a hanging endpoint: the same, but the second endpoint's consumer never answers (each attempt is held
   until the 8 s attempt timeout); M events at the same rate.

The healthy endpoint's latency beside the hanging one is printed as a ratio to alone (issue 11's target) and to
the control: the second ratio is what the hang costs beyond a second endpoint's deliveries.

Each client sends its share paced at R / C per second, and waits for each answer (so a slow stack slows the
offer down: "accepted/s" is what the stack sustained). Ingest latency is the POST /v1/events round trip;
delivery latency is from just before the POST to the healthy consumer receiving the verified webhook (both
clocks are this machine's). Each phase also prints the stack's CPU per event: the CPU seconds its processes used
from the phase's first POST until every delivery was seen (read from /proc), over the events accepted, in all and
by process (the stack names its processes: `hookrelay-local`, `moto-dynamodb`, `moto-aws`, `fn-<function>`).
For each phase beside a second endpoint it prints where the healthy endpoint's p99 comes from: when in the phase
the slowest 1% of its events were sent, when the second endpoint's circuit opened (as the API reports it), and its
delivery p50 by second sent.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import heading, machine, percentile, table
from hookrelay.domain.clock import from_rfc3339
from tests.e2e.harness import HTTP_TIMEOUT, Consumer, LocalStack, stack_and_consumers

GROUPS = 8  # the healthy endpoint's message groups (its max_in_flight), one ordering key each
SETTLE_LIMIT_SECONDS = 900.0  # every phase ends within this after its last event, delivered or not
POLL_SECONDS = 2.0


def tree_cpu_seconds(root: int) -> dict[str, float]:
    """CPU seconds (user + system) so far of a process and its live descendants, from /proc (Linux), by process
    name: the local stack (`hookrelay-local`), its moto servers (`moto-*`) and its function workers (`fn-<function>`,
    summed over a function's workers). In all, per event, it is the load the stack puts on the machine, a figure
    that the machine's other tenants disturb far less than they do a rate."""
    parents: dict[int, int] = {}
    times: dict[int, tuple[str, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            head, tail = (entry / "stat").read_text().rsplit(")", 1)
        except OSError:  # ended while listed
            continue
        fields = tail.split()
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        ticks = int(fields[11]) + int(fields[12])  # utime + stime
        times[pid] = (head.split("(", 1)[1], ticks / os.sysconf("SC_CLK_TCK"))
    tree, grown = {root}, True
    while grown:
        below = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= below
        grown = bool(below)
    by_name: dict[str, float] = {}
    for pid in tree & times.keys():
        name, seconds = times[pid]
        by_name[name] = by_name.get(name, 0.0) + seconds
    return by_name


def used_since(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {name: after[name] - before.get(name, 0.0) for name in after}


def ordering_keys(groups: int = GROUPS) -> list[str]:
    """One ordering key per message group: the envelope puts a key in group crc32(key) % groups."""
    keys: dict[int, str] = {}
    n = 0
    while len(keys) < groups:
        key = f"account-{n}"
        keys.setdefault(zlib.crc32(key.encode()) % groups, key)
        n += 1
    return [keys[slot] for slot in range(groups)]


@dataclass
class Phase:
    name: str
    sent: dict[str, float]  # event id -> when its POST started
    ingest: list[float]  # seconds, one per POST
    offered_seconds: float  # first POST started -> last POST answered
    received: dict[str, float]  # event id -> when the healthy consumer accepted it
    errors: int  # POSTs that were not accepted
    cpu_by_process: dict[str, float]  # the stack's process tree, from the first POST until every delivery was seen
    circuit_opened: float | None = None  # when the second endpoint's circuit opened, from the first POST; None: never

    @property
    def cpu_seconds(self) -> float:
        return sum(self.cpu_by_process.values())

    def started(self) -> float:
        return min(self.sent.values(), default=0.0)

    def delivered(self) -> list[tuple[float, float]]:
        """(when its event was sent, from the first POST; its delivery latency) of each healthy delivery."""
        start = self.started()
        return [
            (at - start, self.received[event_id] - at)
            for event_id, at in self.sent.items()
            if event_id in self.received
        ]

    def by_second_sent(self) -> dict[int, list[float]]:
        """The healthy endpoint's delivery latencies by the whole second, from the first POST, its event was sent in."""
        seconds: dict[int, list[float]] = {}
        for sent, latency in self.delivered():
            seconds.setdefault(int(sent), []).append(latency)
        return dict(sorted(seconds.items()))

    def slowest_sent(self, fraction: float = 0.99) -> list[float]:
        """When (from the first POST) the events whose delivery took at least the `fraction` percentile were sent."""
        slow = percentile(self.delivery(), fraction)
        return sorted(sent for sent, latency in self.delivered() if latency >= slow)

    def delivery(self) -> list[float]:
        return [latency for _, latency in self.delivered()]

    def delivered_seconds(self) -> float:
        return max(self.received.values(), default=0.0) - self.started()


def endpoint_on(stack: LocalStack, tenant_key: str, consumer: Consumer) -> str:
    endpoint = stack.created(
        "/v1/endpoints", tenant_key, {"url": consumer.url, "event_types": ["*"], "max_in_flight": GROUPS}
    )
    consumer.control(secret=endpoint["secret"])
    return str(endpoint["id"])


def circuit_opened_at(stack: LocalStack, tenant_key: str, endpoint_id: str) -> float | None:
    """When the endpoint's circuit opened (epoch seconds, as the API reports it), or None if it is closed."""
    response = stack.call("GET", f"/v1/endpoints/{endpoint_id}/health", tenant_key)
    response.raise_for_status()
    opened = response.json()["circuit"]["opened_at"]
    return None if opened is None else from_rfc3339(opened).timestamp()


class Producers:
    """C clients, each on its own connection, sending its share of the events paced at rate / C per second."""

    def __init__(self, stack: LocalStack, tenant_id: str, clients: int, rate: float) -> None:
        self.stack, self.tenant_id, self.clients, self.rate = stack, tenant_id, clients, rate
        self.keys = ordering_keys()
        self.lock = threading.Lock()
        self.sent: dict[str, float] = {}
        self.ingest: list[float] = []
        self.errors = 0

    def run(self, events: int) -> float:
        begin = time.monotonic()
        threads = [threading.Thread(target=self._client, args=(c, events, begin)) for c in range(self.clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return time.monotonic() - begin

    def _client(self, client: int, events: int, begin: float) -> None:
        http = requests.Session()
        headers = {"authorization": f"Bearer {self.stack.producer_key}"}
        for number in range(client, events, self.clients):
            time.sleep(max(0.0, begin + number / self.rate - time.monotonic()))
            body = {"tenant_id": self.tenant_id, "type": "order.updated", "data": {"n": number}}
            body["ordering_key"] = self.keys[number % len(self.keys)]
            at, started = time.time(), time.monotonic()
            response = http.post(
                self.stack.api_url + "/v1/events", json=body, headers=headers, timeout=10 * HTTP_TIMEOUT
            )
            elapsed = time.monotonic() - started
            with self.lock:
                if response.status_code == 202:
                    self.sent[response.json()["event_id"]] = at
                    self.ingest.append(elapsed)
                else:
                    self.errors += 1
        http.close()


def wait_for(healthy: Consumer, sent: dict[str, float]) -> dict[str, float]:
    deadline = time.monotonic() + SETTLE_LIMIT_SECONDS
    received: dict[str, float] = {}
    while time.monotonic() < deadline:
        received = {e["webhook_id"]: e["at"] for e in healthy.received()["events"] if e["webhook_id"] in sent}
        if len(received) == len(sent):
            break
        time.sleep(POLL_SECONDS)
    return received


ALONE = "alone"
CONTROL = "beside a healthy endpoint (control)"
HANGING = "beside a hanging endpoint"
SECOND_CONSUMER = {CONTROL: "ok", HANGING: "hang"}  # the second endpoint's consumer, by phase
SLUG = {ALONE: "alone", CONTROL: "control", HANGING: "hanging"}  # the phase in its consumers' names


def run_phase(
    stack: LocalStack, consumer: Callable[..., Consumer], name: str, events: int, args: argparse.Namespace
) -> Phase:
    tenant_id, tenant_key = stack.new_tenant(f"throughput {name}")
    healthy = consumer(f"healthy-{SLUG[name]}")
    endpoint_on(stack, tenant_key, healthy)
    second = None
    if name in SECOND_CONSUMER:
        second = endpoint_on(stack, tenant_key, consumer(f"second-{SLUG[name]}", mode=SECOND_CONSUMER[name]))
    producers = Producers(stack, tenant_id, args.clients, args.rate)
    cpu_before = tree_cpu_seconds(stack.process.popen.pid)
    offered = producers.run(events)
    received = wait_for(healthy, producers.sent)
    cpu = used_since(cpu_before, tree_cpu_seconds(stack.process.popen.pid))
    phase = Phase(name, producers.sent, producers.ingest, offered, received, producers.errors, cpu)
    opened = circuit_opened_at(stack, tenant_key, second) if second is not None else None
    phase.circuit_opened = None if opened is None else opened - phase.started()
    return phase


def ms(values: list[float], fraction: float) -> str:
    return f"{1000 * percentile(values, fraction):.0f}" if values else "-"


def report(phases: list[Phase], args: argparse.Namespace) -> None:
    print(f"# The local stack at speed ({machine()})")
    heading(
        f"{args.clients} clients offering {args.rate:g} events/s in all, one healthy endpoint with {GROUPS} message"
        " groups; fast schedule"
    )
    rows = []
    for phase in phases:
        delivery = phase.delivery()
        rows.append(
            [
                phase.name,
                f"{len(phase.sent)}",
                f"{len(phase.sent) / phase.offered_seconds:.1f}",
                f"{len(phase.received) / phase.delivered_seconds():.1f}" if phase.received else "-",
                f"{len(phase.received)}",
                f"{phase.errors}",
                ms(phase.ingest, 0.5),
                ms(phase.ingest, 0.99),
                ms(delivery, 0.5),
                ms(delivery, 0.99),
                f"{1000 * phase.cpu_seconds / max(1, len(phase.sent)):.0f}",
            ]
        )
    print(
        table(
            [
                "healthy endpoint",
                "events",
                "accepted/s",
                "delivered/s",
                "delivered",
                "refused",
                "ingest p50 ms",
                "ingest p99 ms",
                "delivery p50 ms",
                "delivery p99 ms",
                "stack CPU ms/event",
            ],
            rows,
        )
    )
    names = sorted(
        {name for phase in phases for name in phase.cpu_by_process}, key=lambda n: -phases[0].cpu_by_process.get(n, 0)
    )
    print("\nstack CPU ms per event accepted, by process (workers of a function summed)")
    print(
        table(
            ["process", *(phase.name for phase in phases)],
            [
                [
                    name,
                    *(
                        f"{1000 * phase.cpu_by_process.get(name, 0.0) / max(1, len(phase.sent)):.1f}"
                        for phase in phases
                    ),
                ]
                for name in names
            ],
        )
    )
    latencies = {phase.name: phase.delivery() for phase in phases}
    beside = latencies.get(HANGING)
    for baseline, label in ((ALONE, "alone"), (CONTROL, "beside a healthy one (the control)")):
        against = latencies.get(baseline)
        if beside and against:
            p50 = percentile(beside, 0.5) / percentile(against, 0.5)
            p99 = percentile(beside, 0.99) / percentile(against, 0.99)
            print(f"\nhealthy endpoint beside a hanging one / {label}: p50 ratio {p50:.2f}, p99 ratio {p99:.2f}")
    for phase in phases:
        if phase.name in SECOND_CONSUMER and phase.received:
            when(phase)


def when(phase: Phase) -> None:
    """When in the phase the healthy endpoint's slowest deliveries were sent, and when the second endpoint's circuit
    opened: where the p99 comes from."""
    slowest = phase.slowest_sent()
    circuit = "stayed closed" if phase.circuit_opened is None else f"opened {phase.circuit_opened:.1f} s into the phase"
    print(
        f"\n{phase.name}: the second endpoint's circuit {circuit}; the healthy endpoint's slowest 1%"
        f" ({len(slowest)}) were sent {slowest[0]:.1f} to {slowest[-1]:.1f} s into the phase"
    )
    seconds = phase.by_second_sent().items()
    p50s = (f"{second}s {1000 * percentile(latencies, 0.5):.0f}" for second, latencies in seconds)
    print("  its delivery p50 by second sent, ms: " + ", ".join(p50s))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2000, help="events of the throughput phase (default 2000)")
    parser.add_argument("--hang-events", type=int, default=600, help="events beside the hanging endpoint (600)")
    parser.add_argument(
        "--control-events", type=int, help="events beside a second healthy endpoint (default: --hang-events; 0: none)"
    )
    parser.add_argument("--clients", type=int, default=8, help="producer clients (default 8)")
    parser.add_argument("--rate", type=float, default=33.0, help="events offered per second, in all (default 33)")
    args = parser.parse_args(argv)
    with stack_and_consumers("bench-throughput-") as (stack, consumer):
        control = args.hang_events if args.control_events is None else args.control_events
        phases = [
            run_phase(stack, consumer, ALONE, args.events, args),
            *([run_phase(stack, consumer, CONTROL, control, args)] if control else []),
            run_phase(stack, consumer, HANGING, args.hang_events, args),
        ]
        report(phases, args)  # before stopping: the figures are kept even if stopping fails
    return 0


if __name__ == "__main__":
    sys.exit(main())
