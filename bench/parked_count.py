"""Parked count: what counting an open circuit's parked deliveries reads, whole lot vs. up to the limit.

    python bench/parked_count.py [--parked N ...]

The endpoint health read, a parked delivery's `waiting_on` and the sweeper's each count the deliveries parked behind
an open circuit: strongly consistent `COUNT` queries of the endpoint's lot partitions in turn (adapters/circuit.py;
its entries spread over them by message group, here 50). Counted whole, each read reads every entry, one
sequential 1 MB page after another, and an outage at volume parks millions (an hour at 1,000 events a second,
3.6 million). Since issue 28 a count reads at most `PARKED_COUNT_LIMIT` + 1 entries
(domain/circuit.py) and says "at least" past the limit. For each N, N lot entries are written on moto (in this
process, as the contract tests' stores are) and counted both ways, the whole lot as before and as the code counts
now, with the queries made and the entries they read; read units are the entries' bytes over 4 KB (a strongly
consistent read), each entry's size taken as its JSON's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lambdas"))

from bench.common import heading, machine, table
from bench.metering import Meter
from hookrelay.adapters.circuit import DynamoParkingLot
from hookrelay.domain.circuit import PARKED_COUNT_LIMIT, park_order
from hookrelay.domain.paging import BoundedCount
from tests.support.builders import a_delivery, at
from tests.support.stores import dynamodb_stores

WHOLE_LOT = 10**12  # as many as there are: the count before issue 28's limit
GROUPS = 50  # the endpoint's message groups (its max_in_flight, at the most): its lot's entries spread by them


def park(lot: DynamoParkingLot, parked: int) -> int:
    """`parked` entries in endpoint ep_1's lot; the size of one, in bytes."""
    lot.enter(
        [
            a_delivery(
                f"dlv_{n:09}",
                event_order=park_order(at(n), f"evt_{n:09}"),
                parked_at=at(n),
                message_group_id=f"ep_1#{n % GROUPS}",
            )
            for n in range(parked)
        ]
    )
    entry = lot.lot.scan(Limit=1)
    return len(json.dumps(entry["Items"][0], default=str))


def measured(lot: DynamoParkingLot, up_to: int) -> tuple[BoundedCount, list[int]]:
    """The count, and the entries each of its queries read (bench/metering.py)."""
    meter = Meter(size_dynamodb=False)
    with meter.installed(capture_stdout=False), meter.recorded():
        counted = lot.count("ep_1", up_to)
    return counted, [call.returned for call in meter.calls if call.operation == "Query"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parked", type=int, nargs="+", default=[500, 5_000, 20_000], help="lot sizes to count")
    args = parser.parse_args(argv)
    rows = []
    for parked in args.parked:
        with dynamodb_stores() as stores:
            lot = stores.parking
            assert isinstance(lot, DynamoParkingLot)
            size = park(lot, parked)
            for how, up_to in (
                ("the whole lot (before)", WHOLE_LOT),
                ("up to the limit (now)", PARKED_COUNT_LIMIT),  # as Parking.parked_behind
            ):
                counted, pages = measured(lot, up_to)  # what the API shows ("+": at least)
                units = sum(pages) * size / 4096
                rows.append(
                    [
                        f"{parked:,}",
                        how,
                        f"{counted.counted:,}{'' if counted.exact else '+'}",
                        str(len(pages)),
                        f"{sum(pages):,}",
                        f"{units:,.0f}",
                    ]
                )
    print(f"# Parked count ({machine()})")
    heading(f"Counting an endpoint's parked deliveries, PARKED_COUNT_LIMIT = {PARKED_COUNT_LIMIT:,}")
    columns = ["parked", "how counted", "count shown", "queries", "entries read", "read units (consistent)"]
    print(table(columns, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
