"""Where a delivery message goes: the delivery queues' shards and lanes (pure rules, no AWS).

The delivery queues are N shards (a deployment setting: stacks/config.py `delivery_shards`), each a FAST lane (an
endpoint's ordinary traffic, handed to the delivery function in batches) and a SLOW lane (an endpoint that is slow,
timing out, probing or draining: one message per invocation, so it never holds a fast batch's other messages).

An endpoint's shard is chosen once, when it is created, by `shard_for` over the N configured then, and stored on the
endpoint (and copied onto each of its deliveries). Routing reads the stored shard, never the hash again: so raising N
spreads only endpoints created afterwards, and an existing endpoint's messages stay on one queue, in order. N can
only grow (the stack keeps every shard's queues): a smaller N would leave stored shards naming queues that are gone.
"""

from __future__ import annotations

import zlib
from enum import StrEnum

# The deployment's shards unless CDK context `delivery_shards` says otherwise (stacks/config.py).
DEFAULT_DELIVERY_SHARDS = 2
# The most shards a deployment may have: two queues and two event sources each; every function that sends holds
# every URL in one environment variable (Lambda's environment is 4 KiB in all; a queue URL is about 100 bytes); and
# each lane's backlog alarm takes all its queues' ages in one metric math expression (CloudWatch: 10 metrics).
# tests/infrastructure/test_as_deployed.py holds every function's environment at this many shards, its resources named
# as AWS names them, to Lambda's 4 KB.
MAX_DELIVERY_SHARDS = 8
# A slow lane's event source hands the function one message at a time: a slow endpoint holds only its own message.
SLOW_LANE_BATCH_SIZE = 1


class DeliveryLane(StrEnum):
    FAST = "fast"
    SLOW = "slow"


def shard_for(endpoint_id: str, shards: int) -> int:
    """The shard a new endpoint is given among `shards`: a stable hash (CRC-32, the same in every process and
    Python version; Python's own `hash` of a str is salted per process), so any process assigns the same."""
    if shards < 1:
        raise ValueError(f"there is at least one delivery shard, not {shards}")
    return zlib.crc32(endpoint_id.encode()) % shards


def check_shards(shards: int) -> int:
    """`shards`, if a deployment may have that many."""
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_DELIVERY_SHARDS:
        raise ValueError(f"delivery shards are a whole number 1..{MAX_DELIVERY_SHARDS}, not {shards!r}")
    return shards
