"""Lot shards: where a failing endpoint's parks land, one partition per endpoint vs. its message groups' shards.

    python bench/lot_shards.py [--parked N] [--groups G]

While an endpoint's circuit is open, ingest writes a lot entry for every event it accepts for it, and the drain
deletes each as it releases it. A DynamoDB partition takes at most 1,000 write units a second, and a key whose sort
key only grows (the lot's: event order) is one partition whatever adaptive capacity does, so with one partition per
endpoint the busiest endpoint's outage could be taken in only as fast as that partition writes. Since issue 28 the
lot is sharded by message group (schema.LOT_SHARDS, adapters/circuit.py `lot_partition`; 16 shards before the
counts in schema.EARLIER_LOT_SHARDS grew to today's). For each layout, side by
side in one run on moto (in this process, through the real parking-lot adapter): N deliveries of one endpoint with
G message groups (its max_in_flight) are parked as ingest parks them (`enter`), then drained as the drain does
(windows read oldest first, each delivery claimed out of the lot), then the lot read empty as the close does. It
prints the lot's write units per parked delivery, the hottest partition's share of them and so the parked
deliveries a second one endpoint's outage takes before that partition reaches 1,000 write units a second, and what
the drain's reads cost (queries and strongly consistent read units per released delivery). "Before" is the same
code with one shard: the layout before, one partition per endpoint (its reads also query the endpoint's own id, for
entries from before shards: one query more a read than the code before made).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lambdas"))

from bench.common import heading, machine, table
from bench.metering import Meter
from hookrelay.adapters import schema
from hookrelay.adapters.circuit import DynamoParkingLot
from hookrelay.domain.circuit import drain_window, park_order
from hookrelay.domain.envelope import message_group_id
from hookrelay.domain.lanes import MAX_IN_FLIGHT
from tests.support.builders import TENANT, a_delivery, at
from tests.support.stores import dynamodb_stores

PARTITION_WCU = 1_000  # DynamoDB's writes a second to one partition
INGEST_BATCH = 25  # entries a BatchWriteItem carries


@contextmanager
def lot_shards(count: int) -> Iterator[None]:
    """The lot's shards for the duration (the adapter reads schema.LOT_SHARDS at each call)."""
    deployed = schema.LOT_SHARDS
    schema.LOT_SHARDS = count
    try:
        yield
    finally:
        schema.LOT_SHARDS = deployed


def outage(lot: DynamoParkingLot, stores_put: object, parked: int, groups: int, meter: Meter) -> dict[str, float]:
    """Park `parked` deliveries as ingest does, drain them as the drain does, then read the lot empty."""
    deliveries = [
        a_delivery(
            f"dlv_{n:07}",
            event_order=park_order(at(n), f"evt_{n:07}"),
            parked_at=at(n),
            message_group_id=message_group_id("ep_1", groups, None, f"evt_{n:07}"),
        )
        for n in range(parked)
    ]
    stores_put(deliveries)  # type: ignore[operator]
    window = drain_window(groups)
    with meter.recorded():
        with meter.origin("ingest"):
            for start in range(0, parked, INGEST_BATCH):
                lot.enter(deliveries[start : start + INGEST_BATCH])
        with meter.origin("drain"):
            windows = 0
            while page := lot.parked("ep_1", window):
                windows += 1
                for entry in page:
                    claimed = lot.claim(entry.id, TENANT, "ep_1", entry.attempt_count + 1, at(parked + 1))
                    assert claimed is not None, f"{entry.id} was not claimed"
    lot_table = schema.PARKING_LOT.logical_name
    by_partition: Counter[str] = Counter()
    for call in meter.calls:
        for table_name, _, partition, units in call.partitions:
            if table_name.endswith(lot_table):
                by_partition[str(partition)] += units
    drain_reads = [c for c in meter.calls if c.origin == "drain" and c.operation == "Query"]
    written = sum(by_partition.values())
    hottest = max(by_partition.values())
    return {
        "partitions": len(by_partition),
        "units_per_parked": written / parked,
        "hottest_share": hottest / written,
        "queries_per_read": len(drain_reads) / (windows + 1),  # the windows, and the read that finds it empty
        "read_units_per_released": sum(c.read_units for c in drain_reads) / parked,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parked", type=int, default=2_000, help="deliveries parked behind the endpoint's circuit")
    parser.add_argument(
        "--groups", type=int, default=50, help=f"its message groups (max_in_flight; {MAX_IN_FLIGHT:,} at most)"
    )
    args = parser.parse_args(argv)
    rows = []
    layouts = [("one partition per endpoint (before shards)", 1)]
    layouts += [(f"by message group, {count} shards (before)", count) for count in schema.EARLIER_LOT_SHARDS]
    layouts += [(f"by message group, {schema.LOT_SHARDS} shards (now)", schema.LOT_SHARDS)]
    for how, shards in layouts:
        meter = Meter()
        with lot_shards(shards), dynamodb_stores() as stores, meter.installed(capture_stdout=False):
            lot = stores.parking
            assert isinstance(lot, DynamoParkingLot)
            got = outage(lot, stores.deliveries.put_many, args.parked, args.groups, meter)
        takes = PARTITION_WCU / (got["units_per_parked"] * got["hottest_share"])
        rows.append(
            [
                how,
                f"{shards}",
                f"{got['partitions']:.0f}",
                f"{got['units_per_parked']:.2f}",
                f"{got['hottest_share']:.1%}",
                f"{takes:,.0f}",
                f"{got['queries_per_read']:.1f}",
                f"{got['read_units_per_released']:.3f}",
            ]
        )
    print(f"# Lot shards ({machine()})")
    heading(f"One endpoint's outage: {args.parked:,} deliveries over {args.groups} message groups, parked and drained")
    columns = [
        "lot layout",
        "shards",
        "partitions written",
        "lot WU per parked delivery",
        "hottest partition's share",
        "parked/s at 1,000 WCU/s",
        "queries per lot read",
        "drain read units per delivery",
    ]
    print(table(columns, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
