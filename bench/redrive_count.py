"""Redrive count: what a redrive's first job reads to count its window, whole (as before) vs. up to the limit (now).

    python bench/redrive_count.py [--dead N ...]

A redrive's first job replays its first page and counts the deliveries in its window (services/redrive.py): every
log entry of the window, newest first, each match read back from its record (BatchGetItem, eventually consistent).
Counted whole, a window of millions (an hour's outage at 1,000 events a second) takes the job past the redrive
function's timeout, on every retry of it, so the redrive never records its first page. Since issue 28 the count
reads at most `REDRIVE_COUNT_LIMIT` entries (domain/redrive.py) and says "at least" past them, until the last page
records the exact number. For each N, N dead deliveries of one endpoint are written on moto (in this process, as the
contract tests' stores are) and the window is counted both ways, side by side: the count shown, the calls made, the
entries and records read, and the seconds each took here (moto in process, not DynamoDB: a ratio, not a latency).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lambdas"))

from bench.common import heading, machine, table
from bench.metering import Meter
from hookrelay.adapters.dynamodb import DeliveryTable
from hookrelay.domain.clock import utcnow
from hookrelay.domain.paging import BoundedCount
from hookrelay.domain.redrive import REDRIVE_COUNT_LIMIT
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ports import DeliveryFilter
from tests.support.records import make
from tests.support.stores import dynamodb_stores

WHOLE_WINDOW = 10**12  # as many as there are: the count before issue 28's limit
TENANT, ENDPOINT = "tnt_bench", "ep_bench"


def seed(deliveries: DeliveryTable, dead: int) -> DeliveryFilter:
    """`dead` dead deliveries of one endpoint, a second apart, ending an hour ago; the filter of a redrive of them."""
    start = (utcnow() - timedelta(hours=1, seconds=dead)).replace(microsecond=0)
    deliveries.put_many([make(TENANT, ENDPOINT, start + timedelta(seconds=n)).delivery for n in range(dead)])
    return DeliveryFilter(
        tenant_id=TENANT,
        status=DeliveryStatus.DEAD,
        endpoint_id=ENDPOINT,
        since=start,
        until=start + timedelta(seconds=dead),
        ended_before=utcnow(),
    )


def measured(deliveries: DeliveryTable, where: DeliveryFilter, up_to: int) -> tuple[BoundedCount, Counter[str], float]:
    """The count, the calls it made with what they returned (entries, records: bench/metering.py), and its seconds."""
    meter = Meter(size_dynamodb=False)
    with meter.installed(capture_stdout=False), meter.recorded():
        began = time.perf_counter()
        counted = deliveries.count(where, utcnow(), up_to)
        seconds = time.perf_counter() - began
    calls = Counter(call.operation for call in meter.calls)
    calls["entries"] = sum(call.returned for call in meter.calls if call.operation == "Query")
    calls["records"] = sum(call.returned for call in meter.calls if call.operation == "BatchGetItem")
    return counted, calls, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dead", type=int, nargs="+", default=[2_000, 20_000], help="window sizes to count")
    args = parser.parse_args(argv)
    rows = []
    for dead in args.dead:
        with dynamodb_stores() as stores:
            deliveries = stores.deliveries
            assert isinstance(deliveries, DeliveryTable)
            where = seed(deliveries, dead)
            runs = {
                how: measured(deliveries, where, up_to)
                for how, up_to in (("whole", WHOLE_WINDOW), ("now", REDRIVE_COUNT_LIMIT))
            }
        whole_seconds = runs["whole"][2]
        for how, label in (("whole", "the whole window (before)"), ("now", "up to the limit (now)")):
            counted, calls, seconds = runs[how]
            rows.append(
                [
                    f"{dead:,}",
                    label,
                    f"{counted.counted:,}{'' if counted.exact else '+'}",
                    str(calls["Query"]),
                    str(calls["BatchGetItem"]),
                    f"{calls['entries']:,}",
                    f"{calls['records']:,}",
                    f"{seconds:.2f}",
                    f"{seconds / whole_seconds:.2f}",
                ]
            )
    print(f"# Redrive count ({machine()})")
    heading(
        f"Counting a redrive's window of one endpoint's dead deliveries, REDRIVE_COUNT_LIMIT = {REDRIVE_COUNT_LIMIT:,}"
    )
    columns = [
        "dead",
        "how counted",
        "total shown",
        "queries",
        "batch reads",
        "entries read",
        "records read",
        "s here",
        "vs whole",
    ]
    print(table(columns, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
