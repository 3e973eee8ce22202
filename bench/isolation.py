"""Isolation: a healthy endpoint's delivery latency with a hanging endpoint beside it vs. without.

    python bench/isolation.py [--events N] [--rate R] [--rounds K]

Runs the real local stack as a process (`python -m local --json --fast --port 0`, the way the end-to-end
tests and a person start it) and demo consumers (`python -m local.consumer`), all on 127.0.0.1. Three
kinds of phase, each with a fresh tenant and fresh consumers:

1. alone: the tenant has one endpoint, healthy; N events are published at R per second;
2. beside a healthy endpoint: a second endpoint, also healthy, subscribed to every event too, so each
   event fans out to both (the control: twice the deliveries, nothing hanging);
3. beside a hanging endpoint: the second endpoint's consumer never answers, so each of its attempts holds
   an invocation for the whole attempt timeout (8 s), and its retries come back on the fast schedule.

Latency is from just before the producer's POST /v1/events to the healthy consumer receiving the
verified webhook (both clocks are this machine's).

The control and the hanging phase run in K rounds, their order swapped each round, and the ratio is of their pooled
samples: a p99 of one phase of 100 events is its second-worst event, so one stall of this shared machine (a
collection, another process) in either phase moved a single run's ratio anywhere from 0.9 to 2.6. Rounds side by
side spread the machine's load over both phases alike; each round's own ratio is printed too.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import heading, machine, median, percentile, table
from tests.e2e.harness import Consumer, LocalStack, eventually, stack_and_consumers

SETTLE_LIMIT_SECONDS = 60.0
P99_RATIO_BAR = 1.2  # issue 28: a hanging endpoint costs a healthy one at most 20% at p99


@dataclass(frozen=True)
class Phase:
    name: str
    latencies: list[float]  # seconds, one per event
    second_requests: int | None  # requests the second endpoint's consumer received, if there is one


PHASES = {None: "alone", "ok": "beside a healthy endpoint", "hang": "beside a hanging endpoint"}


def endpoint_on(stack: LocalStack, tenant_key: str, consumer: Consumer) -> None:
    endpoint = stack.created("/v1/endpoints", tenant_key, {"url": consumer.url, "event_types": ["*"]})
    consumer.control(secret=endpoint["secret"])


def run_phase(
    stack: LocalStack, consumer: Callable[..., Consumer], second: str | None, events: int, rate: float
) -> Phase:
    name = PHASES[second]
    tenant_id, tenant_key = stack.new_tenant(f"isolation {name}")
    healthy = consumer(f"healthy-{second or 'alone'}")
    endpoint_on(stack, tenant_key, healthy)
    other = None
    if second is not None:
        other = consumer(f"second-{second}", mode=second)
        endpoint_on(stack, tenant_key, other)

    sent: dict[str, float] = {}
    begin = time.monotonic()
    for number in range(events):
        time.sleep(max(0.0, begin + number / rate - time.monotonic()))
        at = time.time()
        accepted = stack.publish(tenant_id, "order.updated", {"order_id": number})
        sent[accepted["event_id"]] = at
    received = eventually(
        lambda: {e["webhook_id"]: e["at"] for e in healthy.received()["events"] if e["webhook_id"] in sent},
        f"all {events} events at the healthy consumer ({name})",
        timeout=SETTLE_LIMIT_SECONDS,
        predicate=lambda got: len(got) == events,
        interval=0.5,
    )
    second_requests = len(other.received()["requests"]) if other else None
    return Phase(name, [received[event_id] - at for event_id, at in sent.items()], second_requests)


def _round(
    stack: LocalStack, consumer: Callable[..., Consumer], number: int, events: int, rate: float
) -> dict[str, Phase]:
    """The control and the hanging phase, the control first in even rounds (counting from 0), last in odd ones."""
    order = ("ok", "hang") if number % 2 == 0 else ("hang", "ok")
    return {second: run_phase(stack, consumer, second, events, rate) for second in order}


def _pooled(phases: list[Phase]) -> Phase:
    latencies = [s for phase in phases for s in phase.latencies]
    return Phase(phases[0].name, latencies, sum(phase.second_requests or 0 for phase in phases))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100, help="events per phase (default 100)")
    parser.add_argument("--rate", type=float, default=4.0, help="events published per second (default 4)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the control and the hanging phase (default 3)")
    args = parser.parse_args(argv)
    with stack_and_consumers("bench-isolation-") as (stack, consumer):
        alone = run_phase(stack, consumer, None, args.events, args.rate)
        rounds = [_round(stack, consumer, number, args.events, args.rate) for number in range(args.rounds)]
    phases = [alone, *(_pooled([r[second] for r in rounds]) for second in ("ok", "hang"))]

    print(f"# Isolation ({machine()})")
    heading(
        f"A healthy endpoint's latency, publish to receipt, {args.events} events at {args.rate:g}/s per phase; "
        f"the control and the hanging phase in {args.rounds} rounds, pooled"
    )
    rows = []
    for phase in phases:
        ms = [1000 * s for s in phase.latencies]
        rows.append(
            [
                phase.name,
                f"{median(ms):.0f}",
                f"{percentile(ms, 0.95):.0f}",
                f"{percentile(ms, 0.99):.0f}",
                f"{max(ms):.0f}",
                f"{min(ms):.0f}",
                "-" if phase.second_requests is None else str(phase.second_requests),
            ]
        )
    columns = ["healthy endpoint", "p50 ms", "p95 ms", "p99 ms", "max ms", "min ms", "second endpoint's requests"]
    print(table(columns, rows))
    control, hanging = (phase.latencies for phase in phases[1:])
    print(
        f"\nbeside a hanging endpoint / beside a healthy one (the control, the same fan-out), pooled: "
        f"p50 ratio {median(hanging) / median(control):.2f}, "
        f"p99 ratio {percentile(hanging, 0.99) / percentile(control, 0.99):.2f} "
        f"(the bar: at most {P99_RATIO_BAR} at p99)"
    )
    for number, phases_of in enumerate(rounds, 1):
        first = "the control" if number % 2 else "the hanging phase"
        control_ms, hanging_ms = phases_of["ok"].latencies, phases_of["hang"].latencies
        print(
            f"round {number} ({first} first): p50 ratio {median(hanging_ms) / median(control_ms):.2f}, "
            f"p99 ratio {percentile(hanging_ms, 0.99) / percentile(control_ms, 0.99):.2f}"
        )
    for phase in phases:
        print(f"\n{phase.name}, sorted (ms): {' '.join(f'{1000 * s:.0f}' for s in sorted(phase.latencies))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
