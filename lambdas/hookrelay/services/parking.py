"""Parking a delivery behind its endpoint's circuit, and closing the circuit, without a count kept per park.

The drain closes the circuit only when its endpoint's lot is empty. Parking is two writes (the delivery's
mark, then its lot entry) with no transaction and no counter on the endpoint record, so the close and a
park racing it must agree some other way. They do by each writing before they read:

- a parker writes its lot entry, then reads the endpoint (strongly consistent);
- the closer marks the endpoint `circuit_closing`, then reads the lot (strongly consistent), then closes
  only if the mark is still there.

A parker that reads the circuit `open`, or `draining` without the mark, stays parked: its entry was written
before the closer marked the endpoint, so the closer's read of the lot finds it and the circuit stays
open. A parker that reads the mark clears it (`hold_open`), so that close fails whatever the closer read,
and stays parked. A parker that reads the circuit `closed` (or the endpoint disabled) takes its delivery back
out and has it attempted as any new delivery is: the circuit is closed, and its message group's order holds.

Nothing parked is left behind a closed circuit, and no park costs a write on the endpoint record: the
endpoint is read once per park, and written only in the rare race with a close.

Ingest parks on arrival (`park_new`): a new delivery to an endpoint whose circuit it reads open is written
already marked, then its entry, then the same read, once for all of an endpoint's deliveries. Its parker is
the same kind of writer-then-reader as above, so the close's reasoning holds unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from hookrelay.domain.circuit import NONE_PARKED, PARKED_COUNT_LIMIT, CircuitState
from hookrelay.domain.lifecycle import circuit_stands
from hookrelay.domain.models import Delivery, Endpoint
from hookrelay.domain.paging import BoundedCount
from hookrelay.services.ports import CircuitRepository, EndpointRepository, ParkingLot, ParkOutcome

# A park re-reads the endpoint until it sees a settled state; each extra round means the circuit changed
# under it (a close began, or ended), which cannot go on: this bound only turns a bug into an error.
_MAX_ROUNDS = 5


@dataclass(frozen=True)
class Parking:
    """The parking protocol over the lot, the circuits and the endpoints; `lot` for everything else."""

    lot: ParkingLot
    circuits: CircuitRepository
    endpoints: EndpointRepository

    def park(
        self,
        delivery_id: str,
        tenant_id: str,
        endpoint_id: str,
        attempt_number: int | None,
        at: datetime,
        unstored: Delivery | None = None,
    ) -> ParkOutcome:
        """Park the delivery; CIRCUIT_CLOSED (and not parked) if the circuit closed or the endpoint was disabled."""
        outcome = self.lot.park(delivery_id, tenant_id, endpoint_id, attempt_number, at, unstored)
        if outcome is ParkOutcome.NOT_PARKABLE or self._still_stands(tenant_id, endpoint_id):
            return outcome
        # Taken back out; if the drain took it first, it is the drain's now, as parked.
        return ParkOutcome.CIRCUIT_CLOSED if self.lot.unpark(delivery_id, endpoint_id) else outcome

    def park_new(self, deliveries: Sequence[Delivery], tenant_id: str, endpoint_id: str) -> list[Delivery]:
        """Deliveries ingest has just written parked (their records marked, `parked_at` set), all to one endpoint:
        their lot entries, then the same read as `park`, once for them all. Returns those taken back out because
        the circuit closed (or the endpoint was disabled) meanwhile: the caller sends their first messages.

        Between the records and their entries, and between the entries and the read, a crash leaves deliveries
        that nothing would release: marked with no entry (the drain never reads them), or entered behind a circuit
        that closed without seeing them. The reconciler finds both (`services/reconcile.py`, `_parked_stranded`)."""
        self.lot.enter(deliveries)
        if self._still_stands(tenant_id, endpoint_id):
            return []
        return [d for d in deliveries if self.lot.unpark(d.id, endpoint_id)]

    def _still_stands(self, tenant_id: str, endpoint_id: str) -> bool:
        """After lot entries are written: whether the circuit still stands (they stay parked, and a close that began
        is held open) or has closed, or the endpoint is no longer enabled (they come back out)."""
        for _ in range(_MAX_ROUNDS):
            endpoint = self.endpoints.get(tenant_id, endpoint_id)
            if endpoint is None or not circuit_stands(endpoint):
                return False
            if not endpoint.circuit_closing or self.circuits.hold_open(endpoint):
                return True
        raise RuntimeError(f"the circuit of endpoint {endpoint_id} kept changing while deliveries parked behind it")

    def close_if_empty(self, endpoint: Endpoint, step: int) -> bool:
        """draining → closed, only on a lot read empty after the close began (and not held open since)."""
        return (
            self.circuits.begin_close(endpoint, step)
            and not self.lot.parked(endpoint.id, 1)
            and self.circuits.close(endpoint, step)
        )

    def parked_behind(self, endpoint: Endpoint) -> BoundedCount:
        """How many deliveries wait behind the endpoint's circuit, up to PARKED_COUNT_LIMIT: none while it is closed,
        without a read."""
        if endpoint.circuit is CircuitState.CLOSED:
            return NONE_PARKED
        return self.lot.count(endpoint.id, PARKED_COUNT_LIMIT)
