"""What the worst tenant the limits allow costs ingest, against a tenant with no endpoints (issue 27).

    python bench/filter_limits.py [--endpoints N] [--filters F] [--batch B] [--runs R]

The worst tenant: `max_endpoints_per_tenant` endpoints (1,000 by default) with `max_filters_per_endpoint` filters each
(20), every filter a distinct pattern of the finding's shape (`a*aaaaaaaaaac01234*…*b`: 122 characters, 8 stars, the
most the schema allows of both), none of which the published type (`aaaa…ab`, 128 characters) matches. The empty
tenant has no endpoints. Both publish through `local.gateway` (the real authorizer and ingest function, each run as
deployed) on moto, in this process: one event (`POST /v1/events`), and a batch of `--batch` events (`POST
/v1/events/batch`, 100 by default) of one type, then of as many distinct types as events (the per-type memo's worst).

Before and after, side by side in one run, on the same tables:

- before: the matching path ingest had before issue 27, kept here only as a reference implementation
  (`old_fan_out`): every event matched against every endpoint's every filter with the step-by-step glob
  (`old_glob`: the matcher as it was, a Python loop over candidate positions), once per event of a batch;
- after: the code as it is (`domain.matching.FilterIndex`: one matching per distinct type, exact filters in a dict,
  each distinct wildcard pattern once, found with `str.find`).

It prints each request's wall time (median of `--runs`), and the ratio to the empty tenant's, measured in the same
run. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import heading, machine, table
from hookrelay.adapters import aws, schema
from hookrelay.adapters.dynamodb import to_item
from hookrelay.domain import ids
from hookrelay.domain.clock import utcnow
from hookrelay.domain.lifecycle import new_delivery
from hookrelay.domain.limits import DEFAULT_LIMITS
from hookrelay.domain.matching import MAX_LENGTH, MAX_STARS, WILDCARD, filter_problem
from hookrelay.domain.models import Delivery, Endpoint, Event, SigningSecret
from hookrelay.services import ingest
from scripts.create_admin_key import create_admin_key
from tests.support.aws import moto_stack
from tests.support.platform import Platform

EVENT_TYPE = "a" * (MAX_LENGTH - 1) + "b"  # starts and ends as every hostile filter does; has no `c`


def hostile_filter(number: int) -> str:
    """The finding's shape, distinct per number: `a`, 7 middle parts of 16 characters, `b` (8 stars)."""
    middle = "a" * 10 + "c" + f"{number:05d}"
    pattern = "*".join(["a", *[middle] * (MAX_STARS - 1), "b"])
    assert filter_problem(pattern) is None and pattern.count("*") == MAX_STARS, pattern
    return pattern


def old_glob(pattern: str, event_type: str) -> bool:
    """The glob ingest matched with before issue 27 (reference only): each middle part looked for position by
    position in Python, leftmost first."""
    if WILDCARD not in pattern:
        return pattern == event_type
    first, *middle, last = pattern.split(WILDCARD)
    if len(first) + len(last) > len(event_type) or not (event_type.startswith(first) and event_type.endswith(last)):
        return False
    position, end = len(first), len(event_type) - len(last)
    for part in middle:
        if not part:
            continue
        found = next((c for c in range(position, end - len(part) + 1) if event_type.startswith(part, c)), -1)
        if found < 0:
            return False
        position = found + len(part)
    return True


def old_fan_out(event: Event, endpoints: list[Endpoint], now: datetime) -> list[Delivery]:
    """Ingest's fan-out before issue 27 (reference only): every filter of every endpoint, for every event."""
    return [
        new_delivery(event, e, now)
        for e in endpoints
        if any(old_glob(pattern, event.type) for pattern in e.event_types)
    ]


@contextmanager
def old_matching() -> Iterator[None]:
    index, fan_out = ingest._index, ingest._fan_out
    ingest._index = lambda endpoints: endpoints  # type: ignore[assignment,return-value]
    ingest._fan_out = old_fan_out  # type: ignore[assignment]
    try:
        yield
    finally:
        ingest._index, ingest._fan_out = index, fan_out  # type: ignore[method-assign]


def seed(env: dict[str, str], tenant_id: str, endpoints: int, filters: int) -> None:
    now = utcnow()
    table_ = aws.table(env[schema.ENDPOINTS.env_var])
    with table_.batch_writer() as batch:
        for n in range(endpoints):
            endpoint = Endpoint(
                id=ids.endpoint_id(),
                tenant_id=tenant_id,
                url="https://consumer.example/hook",
                event_types=[hostile_filter(n * filters + f) for f in range(filters)],
                secrets=[SigningSecret(secret="whsec_" + "A" * 32, created_at=now)],
                created_at=now,
                updated_at=now,
            )
            batch.put_item(Item=to_item(endpoint))


def timed(runs: int, act: Callable[[], None]) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        act()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--endpoints", type=int, default=DEFAULT_LIMITS.max_endpoints_per_tenant)
    parser.add_argument("--filters", type=int, default=DEFAULT_LIMITS.max_filters_per_endpoint)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    heading(f"Filter limits (issue 27): worst tenant vs no endpoints, ingest on moto ({machine()})")
    print(
        f"worst tenant: {args.endpoints:,} endpoints x {args.filters} filters = {args.endpoints * args.filters:,} "
        f"distinct patterns like {hostile_filter(0)!r} ({len(hostile_filter(0))} characters), none matching "
        f"{EVENT_TYPE[:12]}...{EVENT_TYPE[-4:]} ({len(EVENT_TYPE)} characters)"
    )
    with moto_stack() as env:
        platform = Platform(env=env, admin_token=create_admin_key(env["API_KEYS_TABLE"]).token)
        worst, _ = platform.new_tenant("worst")
        empty, _ = platform.new_tenant("empty")
        producer = platform.new_key("producer")
        started = time.perf_counter()
        seed(env, worst, args.endpoints, args.filters)
        print(f"seeded in {time.perf_counter() - started:.1f} s")

        def one(tenant_id: str) -> Callable[[], None]:
            def act() -> None:
                body = {"tenant_id": tenant_id, "type": EVENT_TYPE, "data": {"n": 1}}
                answer = platform.call("POST", "/v1/events", producer, body)
                assert answer.status == 202 and answer.json()["delivery_ids"] == [], answer.body

            return act

        def batch(tenant_id: str, distinct: bool) -> Callable[[], None]:
            def act() -> None:
                types = [
                    EVENT_TYPE[: MAX_LENGTH - 5] + f"{n:04d}b" if distinct else EVENT_TYPE for n in range(args.batch)
                ]
                events = [{"type": t, "data": {"n": n}} for n, t in enumerate(types)]
                answer = platform.call("POST", "/v1/events/batch", producer, {"tenant_id": tenant_id, "events": events})
                document = answer.json()
                assert answer.status == 200 and document["accepted"] == args.batch, answer.body
                assert all(not item.get("delivery_ids") for item in document["results"]), answer.body

            return act

        cases: list[tuple[str, Callable[[str], Callable[[], None]], bool]] = [
            ("one event", one, True),
            (f"batch of {args.batch}, one type", lambda t: batch(t, False), True),
            (f"batch of {args.batch}, {args.batch} types", lambda t: batch(t, True), False),
        ]
        one(worst)()  # warm both functions up
        rows: list[list[Any]] = []
        for name, make, with_before in cases:
            empty_s = timed(args.runs, make(empty))
            after_s = timed(args.runs, make(worst))
            if with_before:
                with old_matching():
                    before_s = timed(1 if "batch" in name else args.runs, make(worst))
                before = f"{before_s:.3f} s ({before_s / empty_s:,.0f}x)"
            else:
                before = "(not run: one type or many, the old path matched every event)"
            rows.append([name, f"{empty_s:.3f} s", before, f"{after_s:.3f} s ({after_s / empty_s:,.1f}x)"])
            print(f"issue 27: {name}: empty {empty_s:.3f} s, worst before {before}, worst after {after_s:.3f} s")
    heading("Wall time per request (median), and the ratio to the tenant with no endpoints")
    print(table(["request", "no endpoints", "worst tenant, before", "worst tenant, after"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
