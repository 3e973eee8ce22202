"""Ingest's read of a tenant's endpoints, kept for two seconds per warm container.

Why: ingest fans every event out over its tenant's endpoints, and all of a tenant's endpoints are items under one
partition key of the Endpoints table. A partition serves at most 3,000 read units a second, so reading the list per
request would cap one tenant at about 6,000 single-event requests a second, and past that throttle its ingest. Kept
for `ENDPOINT_LIST_SECONDS`, the list is read at most once per that time per container: a tenant's reads are bounded by
ingest's concurrency, not by its request rate (bench/capacity.py, `list_reads`). Two seconds, not one: at 100,000
events a second with one tenant sending half, the busiest endpoint's item takes its deliveries' reads (1,000 read
units a second) and the tenant's list reads of about 4,500 containers, 2,100 read units a second if kept one second,
past the partition's 3,000 together; 1,100 kept two.

What it costs, the contract's one concession (docs/consumer-guide.md): a change to a tenant's endpoints (one created,
its filters changed, disabled, enabled again, deleted) applies to the events a container accepts at most
`ENDPOINT_LIST_SECONDS` after the change. Nothing else reads the kept list, and nothing else depends on it being
fresh: a delivery made for an endpoint since disabled or deleted is cancelled when the delivery function reads the
endpoint itself; one made while its circuit is read closed although it opened meanwhile is parked by the delivery
function, and one parked on arrival while the circuit is read open although it closed is sent after all, as
`Parking.park_new` reads the endpoint again (both as with any read before the change); an endpoint's queue shard
never changes.

The memory is bounded: at most `CACHED_ENDPOINTS_LIMIT` endpoints are kept over all tenants, the least recently read
tenant's forgotten first.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from hookrelay.domain.models import Endpoint
from hookrelay.services.ports import EndpointLists

ENDPOINT_LIST_SECONDS = 2.0
CACHED_ENDPOINTS_LIMIT = 5_000  # a tenant may have up to 10,000: its list is kept alone then, and read again after


@dataclass
class RecentEndpointLists:
    """`EndpointLists` over another, each tenant's list kept `ttl_seconds` from the moment its read began."""

    lists: EndpointLists
    ttl_seconds: float = ENDPOINT_LIST_SECONDS
    max_endpoints: int = CACHED_ENDPOINTS_LIMIT
    clock: Callable[[], float] = time.monotonic
    _kept: OrderedDict[str, tuple[float, list[Endpoint]]] = field(default_factory=OrderedDict, init=False)
    _held: int = field(default=0, init=False)  # endpoints kept, over every tenant
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def list_for_tenant(self, tenant_id: str) -> list[Endpoint]:
        began = self.clock()  # before the read: a change it may have missed is at most ttl_seconds old when dropped
        with self._lock:
            kept = self._kept.get(tenant_id)
            if kept is not None and 0 <= began - kept[0] < self.ttl_seconds:
                self._kept.move_to_end(tenant_id)
                return list(kept[1])
        listed = self.lists.list_for_tenant(tenant_id)
        with self._lock:
            self._keep(tenant_id, began, listed)
        return list(listed)

    def _keep(self, tenant_id: str, began: float, listed: list[Endpoint]) -> None:
        replaced = self._kept.pop(tenant_id, None)
        if replaced is not None:
            self._held -= len(replaced[1])
        self._kept[tenant_id] = (began, listed)
        self._held += len(listed)
        while self._held > self.max_endpoints and len(self._kept) > 1:
            _, (_, forgotten) = self._kept.popitem(last=False)
            self._held -= len(forgotten)
