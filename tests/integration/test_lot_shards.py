"""The parking lot's write shards on DynamoDB (moto): an endpoint's entries spread over schema.LOT_SHARDS partitions
by message group, each group's in one; reads merge them in event order and count across them; and an entry written
before the lot was sharded (under the endpoint's own id) is still read, counted and drained, then dropped."""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from boto3.dynamodb.conditions import Key

from hookrelay.adapters import schema
from hookrelay.adapters.circuit import DynamoParkingLot, lot_partition
from hookrelay.domain.circuit import park_order
from hookrelay.domain.models import Delivery
from hookrelay.services.parking import Parking
from tests.support.builders import TENANT, a_delivery, an_endpoint, at
from tests.support.stores import Stores, dynamodb_stores


@pytest.fixture
def stores() -> Iterator[Stores]:
    with dynamodb_stores() as built:
        built.endpoints.put(an_endpoint("ep_1"))
        for n in range(3):
            built.circuits.count_failure(TENANT, "ep_1", f"dlv_f{n}")
        assert built.circuits.open(an_endpoint("ep_1"), at(0), at(60), threshold=3)
        yield built


def lot(stores: Stores) -> DynamoParkingLot:
    assert isinstance(stores.parking, DynamoParkingLot)
    return stores.parking


def in_group(n: int, group: int) -> Delivery:
    """Delivery `dlv_<n>`, its event at second n, in message group `ep_1#<group>`."""
    event_id = f"evt_{n:03}"
    return a_delivery(f"dlv_{n:03}", message_group_id=f"ep_1#{group}", event_order=park_order(at(n), event_id))


def park_all(stores: Stores, deliveries: list[Delivery]) -> None:
    stores.deliveries.put_many(deliveries)
    for delivery in random.Random(7).sample(deliveries, len(deliveries)):  # parked in no particular order
        stores.parking.park(delivery.id, TENANT, "ep_1", 1, at(1_000))


def partitions_holding(stores: Stores) -> dict[str, set[str]]:
    """Each delivery id in the lot table, and the partition keys its entries are under."""
    held: dict[str, set[str]] = {}
    for item in lot(stores).lot.scan(ConsistentRead=True)["Items"]:
        held.setdefault(str(item["id"]), set()).add(str(item["endpoint_id"]))
    return held


def parked_ids(stores: Stores, limit: int = 1_000) -> list[str]:
    return [p.id for p in stores.parking.parked("ep_1", limit)]


def test_a_groups_entries_share_a_partition_and_an_endpoints_groups_spread_over_the_shards(stores: Stores) -> None:
    deliveries = [in_group(n, n % 40) for n in range(80)]
    park_all(stores, deliveries)
    held = partitions_holding(stores)
    assert {d.id: {lot_partition("ep_1", d.message_group_id)} for d in deliveries} == held
    used = set().union(*held.values())
    assert "ep_1" not in used and used <= {f"ep_1#{shard}" for shard in range(schema.LOT_SHARDS)}
    assert len(used) >= min(40, schema.LOT_SHARDS) // 2  # 40 groups over the shards: far from one partition


@pytest.mark.parametrize("groups", [1, 3, 40])
def test_a_read_merges_the_shards_oldest_event_first(stores: Stores, groups: int) -> None:
    """One group (every entry in one partition, read on past its first page), a few, and many."""
    deliveries = [in_group(n, n % groups) for n in range(60)]
    park_all(stores, deliveries)
    in_order = [d.id for d in deliveries]
    for limit in (1, 7, 25, 59, 60, 100):
        assert parked_ids(stores, limit) == in_order[:limit]


def test_the_count_adds_the_shards_up_to_its_limit(stores: Stores) -> None:
    park_all(stores, [in_group(n, n % 40) for n in range(30)])
    counts = {up_to: stores.parking.count("ep_1", up_to) for up_to in (5, 29, 30, 31, 100)}
    assert {up_to: (c.counted, c.exact) for up_to, c in counts.items()} == {
        5: (5, False),
        29: (29, False),
        30: (30, True),
        31: (30, True),
        100: (30, True),
    }


# --- entries from before the lot was sharded ---


def as_before_shards(stores: Stores, delivery_id: str) -> None:
    """Move the delivery's entry to where the lot kept it before shards: under the endpoint's own id."""
    table = lot(stores).lot
    [item] = [i for i in table.scan(ConsistentRead=True)["Items"] if i["id"] == delivery_id]
    table.delete_item(Key={"endpoint_id": item["endpoint_id"], "slot": item["slot"]})
    table.put_item(Item={**item, "endpoint_id": "ep_1"})


def old_and_new(stores: Stores) -> list[Delivery]:
    """dlv_001 and dlv_003 parked before the lot was sharded, dlv_002 after."""
    deliveries = [in_group(n, n) for n in (1, 2, 3)]
    park_all(stores, deliveries)
    as_before_shards(stores, "dlv_001")
    as_before_shards(stores, "dlv_003")
    return deliveries


def test_an_entry_from_before_shards_is_read_and_counted_in_event_order(stores: Stores) -> None:
    deliveries = old_and_new(stores)
    assert partitions_holding(stores)["dlv_001"] == {"ep_1"}
    assert parked_ids(stores) == ["dlv_001", "dlv_002", "dlv_003"] and parked_ids(stores, 1) == ["dlv_001"]
    assert stores.parking.count("ep_1", 100).counted == 3
    assert stores.parking.missing(deliveries) == set()  # the reconciler takes none of them out


def test_an_entry_from_before_shards_holds_the_circuit_open_until_its_stale_copy_is_dropped(stores: Stores) -> None:
    old_and_new(stores)
    endpoint = stores.endpoints.get(TENANT, "ep_1")
    assert endpoint is not None and stores.circuits.start_drain(endpoint, endpoint.circuit_step)
    parking = Parking(stores.parking, stores.circuits, stores.endpoints)
    for delivery_id in ("dlv_001", "dlv_002", "dlv_003"):
        claimed = stores.parking.claim(delivery_id, TENANT, "ep_1", 1, at(2_000))
        assert claimed is not None and claimed.parked_at is None
    # The claims dropped the entry where a delivery parked now has it: the old entries are left, stale.
    assert parked_ids(stores) == ["dlv_001", "dlv_003"]
    assert not parking.close_if_empty(endpoint, endpoint.circuit_step)
    # The drain releases them again; each refused claim (the attempt is taken) drops its entry wherever it is.
    for delivery_id in ("dlv_001", "dlv_003"):
        assert stores.parking.claim(delivery_id, TENANT, "ep_1", 1, at(2_001)) is None
    assert parked_ids(stores) == [] and partitions_holding(stores) == {}
    assert parking.close_if_empty(endpoint, endpoint.circuit_step)


def test_an_entry_both_before_and_after_shards_is_read_once(stores: Stores) -> None:
    """A crash can leave a delivery's old entry beside the one written when it parked again: one parked delivery."""
    [delivery] = [in_group(1, 1)]
    park_all(stores, [delivery])
    item: dict[str, Any] = lot(stores).lot.query(
        KeyConditionExpression=Key("endpoint_id").eq(lot_partition("ep_1", delivery.message_group_id))
    )["Items"][0]
    lot(stores).lot.put_item(Item={**item, "endpoint_id": "ep_1"})
    assert partitions_holding(stores)["dlv_001"] == {"ep_1", lot_partition("ep_1", "ep_1#1")}
    assert parked_ids(stores) == ["dlv_001"]
    [read] = stores.parking.parked("ep_1", 10)
    stores.parking.forget(read, "ep_1")  # a probe's entry, once its attempt is settled: gone from both
    assert partitions_holding(stores) == {}


# --- entries parked under an earlier count of shards (schema.EARLIER_LOT_SHARDS) ---


def moved_by_the_count(earlier: int) -> int:
    """A message group of ep_1 whose shard under the earlier count is not its shard now."""
    return next(g for g in range(100) if _crc(f"ep_1#{g}") % schema.LOT_SHARDS != _crc(f"ep_1#{g}") % earlier)


def _crc(group: str) -> int:
    return zlib.crc32(group.encode())


@pytest.mark.parametrize("earlier", schema.EARLIER_LOT_SHARDS)
def test_an_entry_parked_under_an_earlier_count_is_read_drained_once_and_dropped(stores: Stores, earlier: int) -> None:
    """A delivery parked when the lot had fewer shards: its entry is in that count's shard, which a read still
    queries (a larger count names every partition of a smaller one), the reconciler still finds, and its claim does
    not drop (it looks in the shard of the count now); its release again is refused, and that drops it."""
    group = moved_by_the_count(earlier)
    old, new = in_group(1, group), in_group(2, group + 1)
    park_all(stores, [old, new])
    table = lot(stores).lot
    [item] = [i for i in table.scan(ConsistentRead=True)["Items"] if i["id"] == old.id]
    table.delete_item(Key={"endpoint_id": item["endpoint_id"], "slot": item["slot"]})
    then = f"ep_1#{_crc(old.message_group_id) % earlier}"
    table.put_item(Item={**item, "endpoint_id": then})
    assert partitions_holding(stores)[old.id] == {then} != {lot_partition("ep_1", old.message_group_id)}

    assert parked_ids(stores) == [old.id, new.id] and stores.parking.count("ep_1", 100).counted == 2
    assert stores.parking.missing([old, new]) == set()  # the reconciler takes neither out
    endpoint = stores.endpoints.get(TENANT, "ep_1")
    assert endpoint is not None and stores.circuits.start_drain(endpoint, endpoint.circuit_step)
    parking = Parking(stores.parking, stores.circuits, stores.endpoints)
    for delivery in (old, new):
        claimed = stores.parking.claim(delivery.id, TENANT, "ep_1", 1, at(2_000))
        assert claimed is not None
    assert parked_ids(stores) == [old.id] and not parking.close_if_empty(endpoint, endpoint.circuit_step)
    assert stores.parking.claim(old.id, TENANT, "ep_1", 1, at(2_001)) is None  # released again: refused, dropped
    assert partitions_holding(stores) == {} and parking.close_if_empty(endpoint, endpoint.circuit_step)
