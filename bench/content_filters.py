"""What content filters cost fan-out at their worst (issue 29 item 4), next to a plain event-type match.

    python bench/content_filters.py [--endpoints N] [--repeat R]

In process, on the domain code ingest runs (`domain/content_filter.py`, `domain/matching.py`), one run, side by side:

- the event: an envelope of about 256 KiB (the API's body limit), its `data` holding a list of strings and a list of
  numbers, each nested nine arrays deep, so that every path from `data.s` to `data.s.0.0.0.0.0.0.0.0` (and the same
  for `data.n`) reaches every scalar of one list: the most scalars a path can make a summary sort;
- the maximal filter: at the caps (depth 8: seven nested `$or`; 64 nodes: 7 `$or` and 57 tests over those 18 paths,
  with `$in` lists, `$gt`/`$lte` and `$startsWith`), none of whose tests holds, so that nothing short-circuits;
- the plain match: a `FilterIndex` of one endpoint with the longest wildcard filter the schema allows (122
  characters, 8 stars), built and asked afresh, as ingest does once per request.

It prints the time of one evaluation (parsing the envelope apart), the maximal filter for one endpoint and for the
worst tenant (`--endpoints`, 1,000 by default: each its own maximal filter, all reading one `EventView`), and what
refusing hostile filters costs (nesting 900 deep, a 100,000-value `$in`). Medians of `--repeat`; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import heading, machine, table
from hookrelay.domain.content_filter import ContentFilter, EventView, compile_filter
from hookrelay.domain.errors import InvalidDocument
from hookrelay.domain.limits import MAX_FILTER_BYTES, MAX_FILTER_DEPTH, MAX_FILTER_NODES
from hookrelay.domain.matching import MAX_LENGTH, MAX_STARS, FilterIndex

BODY_BYTES = 256 * 1024
NESTING = 9  # arrays around each list: paths of 2 to 10 segments all reach the whole list
EVENT_TYPE = "a" * (MAX_LENGTH - 1) + "b"
WORST_GLOB = "a*" + "a" * 10 + "c" + "*a" * (MAX_STARS - 1) + "a" * (MAX_LENGTH - 2 * MAX_STARS - 14) + "b"


def envelope(count: int) -> dict[str, Any]:
    """An event whose two lists of `count` scalars every path of the filter reaches in full."""
    strings: Any = [f"s{i:07d}" for i in range(count)]
    numbers: Any = [i * 7 % 1_000_003 for i in range(count)]
    for _ in range(NESTING - 1):
        strings, numbers = [strings], [numbers]
    return {
        "id": "evt_bench",
        "type": EVENT_TYPE,
        "timestamp": "2026-12-03T12:00:00.000Z",
        "data": {"s": strings, "n": numbers},
    }


def paths(root: str) -> list[str]:
    return ["data." + ".".join([root, *["0"] * extra]) for extra in range(NESTING)]


LEVELS = MAX_FILTER_DEPTH - 1  # nested `$or`: the tests inside the deepest are at the depth cap
TESTS = MAX_FILTER_NODES - LEVELS


def failing_tests(variant: int) -> list[dict[str, Any]]:
    """Tests that never hold, each on one of the 18 paths: nothing short-circuits."""
    tests: list[dict[str, Any]] = []
    string_paths, number_paths = paths("s"), paths("n")
    for i in range(TESTS):
        operator: tuple[str, Any]
        if i % 2:
            path = string_paths[i // 2 % NESTING]
            operator = ("$startsWith", f"zz{variant}") if i % 4 == 1 else ("$gt", f"t{variant}")
        else:
            path = number_paths[i // 2 % NESTING]
            if i % 8 == 0:
                operator = ("$in", [-(n + 1) for n in range(30)])
            else:
                operator = ("$lte", -1 - variant) if i % 4 == 0 else ("$gt", 10_000_000 + variant)
        tests.append({path: {operator[0]: operator[1]}})
    return tests


def maximal_filter(variant: int = 0) -> dict[str, Any]:
    """Seven nested `$or` (the depth cap: the filter is level 1, each `$or` one deeper) holding 57 tests (64 nodes,
    the node cap), spread over the levels."""
    tests = failing_tests(variant)
    share = -(-TESTS // LEVELS)
    level: dict[str, Any] | None = None
    for depth in range(LEVELS):
        branch: list[Any] = tests[depth * share : (depth + 1) * share]
        level = {"$or": branch + ([level] if level is not None else [])}
    assert level is not None
    return level


def median_seconds(repeat: int, act: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        act()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def refused_in(raw: Any) -> float:
    start = time.perf_counter()
    try:
        compile_filter(raw)
    except InvalidDocument:
        return time.perf_counter() - start
    raise AssertionError("a hostile filter was accepted")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoints", type=int, default=1_000, help="the worst tenant's endpoints (1,000)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per measure; the median is shown")
    args = parser.parse_args()
    print(machine())

    count = BODY_BYTES // 18  # a string and a number per position: about 18 bytes written out
    while len(json.dumps(envelope(count), separators=(",", ":"))) > BODY_BYTES:
        count -= 500
    event, small = envelope(count), envelope(10)
    body = json.dumps(event, separators=(",", ":"))
    worst = compile_filter(maximal_filter())
    print(
        f"event: {len(body.encode()):,} bytes; maximal filter: {len(worst.text.encode()):,} of {MAX_FILTER_BYTES:,} "
        f"bytes, {worst.nodes} of {MAX_FILTER_NODES} nodes, depth {MAX_FILTER_DEPTH}"
    )
    assert not worst.matches(event)
    filters: list[ContentFilter] = [compile_filter(maximal_filter(v)) for v in range(args.endpoints)]

    def type_match() -> object:
        return FilterIndex([("ep", [WORST_GLOB])]).matching(EVENT_TYPE)

    def tenant() -> object:
        view = EventView(event)  # one per event, shared by every endpoint's filter
        return [view.passes(f) for f in filters]

    type_s = median_seconds(args.repeat * 200, type_match)
    parse_s = median_seconds(args.repeat, lambda: json.loads(body))
    one_s = median_seconds(args.repeat, lambda: worst.matches(event))
    small_s = median_seconds(args.repeat * 20, lambda: worst.matches(small))
    tenant_s = median_seconds(args.repeat, tenant)
    deep: dict[str, Any] = {"a": 1}
    for _ in range(900):
        deep = {"$not": deep}
    long_in = {"data.x": {"$in": list(range(100_000))}}
    rows = [
        ["plain event-type match (1 endpoint, 8-star glob)", f"{type_s * 1e6:,.1f} µs", "1x"],
        ["parse the envelope (once per event, if any filter)", f"{parse_s * 1e3:,.2f} ms", f"{parse_s / type_s:,.0f}x"],
        [
            "maximal filter, 1 endpoint, a small event (10 of each)",
            f"{small_s * 1e6:,.1f} µs",
            f"{small_s / type_s:,.0f}x",
        ],
        ["maximal filter, 1 endpoint", f"{one_s * 1e3:,.2f} ms", f"{one_s / type_s:,.0f}x"],
        [
            f"maximal filters, {args.endpoints:,} endpoints (one EventView)",
            f"{tenant_s * 1e3:,.2f} ms ({tenant_s / args.endpoints * 1e6:,.1f} µs each)",
            f"{tenant_s / type_s:,.0f}x",
        ],
        ["refuse a filter nested 900 deep", f"{refused_in(deep) * 1e6:,.1f} µs", f"{refused_in(deep) / type_s:,.1f}x"],
        ["refuse a 100,000-value $in", f"{refused_in(long_in) * 1e6:,.1f} µs", f"{refused_in(long_in) / type_s:,.1f}x"],
    ]
    size = f"{len(body.encode()) / 1024:,.0f} KiB"
    heading(f"Content filters at their worst, against a {size} event (medians; ratio to the type match)")
    print(table(["work", "time", "ratio"], rows))
    print(
        f"issue 29: maximal filter on a {size} event {one_s * 1e3:.2f} ms ({one_s / type_s:,.0f}x a type match); "
        f"{args.endpoints:,} maximal filters {tenant_s * 1e3:.1f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
