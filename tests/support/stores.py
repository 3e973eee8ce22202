"""The storage ports twice over, for the contract suites: the in-memory fakes, and the DynamoDB adapters on moto.

Both sides are built from the same definitions the services are wired with: the fakes from tests/support/fakes.py,
the adapters on the tables local/provision.py creates from `hookrelay.adapters.schema`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from hookrelay.adapters import aws, schema
from hookrelay.adapters.circuit import DynamoCircuits, DynamoParkingLot
from hookrelay.adapters.dynamodb import ApiKeyTable, DeliveryTable, EndpointTable, EventTable
from hookrelay.adapters.event_types import EventTypeTable
from hookrelay.services.ports import (
    ApiKeyRepository,
    CircuitRepository,
    DeliveryRepository,
    EndpointRepository,
    EventRepository,
    EventTypeRepository,
    FailingEndpoints,
    ParkingLot,
)
from tests.support.aws import moto_stack
from tests.support.fakes import (
    FakeCircuits,
    FakeDeliveries,
    FakeEndpoints,
    FakeEvents,
    FakeEventTypes,
    FakeParkingLot,
)
from tests.support.memory import MemoryApiKeys

KINDS = ("fake", "dynamodb")


@dataclass(frozen=True)
class Stores:
    """One implementation of each storage port, all over the same records (as wiring builds them)."""

    kind: str
    deliveries: DeliveryRepository
    endpoints: EndpointRepository
    failing: FailingEndpoints
    circuits: CircuitRepository
    parking: ParkingLot
    events: EventRepository
    api_keys: ApiKeyRepository
    event_types: EventTypeRepository


def fake_stores() -> Stores:
    deliveries, endpoints = FakeDeliveries(), FakeEndpoints()
    return Stores(
        kind="fake",
        deliveries=deliveries,
        endpoints=endpoints,
        failing=endpoints,  # one fake for both ports, as EndpointTable is one adapter for both
        circuits=FakeCircuits(endpoints),
        parking=FakeParkingLot(deliveries),
        events=FakeEvents(),
        api_keys=MemoryApiKeys(),
        event_types=FakeEventTypes(),
    )


@contextmanager
def dynamodb_stores() -> Iterator[Stores]:
    with moto_stack(execute_state_machine=False):

        def table(spec: schema.TableSpec) -> object:
            return aws.table(os.environ[spec.env_var])

        endpoints = EndpointTable(table(schema.ENDPOINTS))
        yield Stores(
            kind="dynamodb",
            deliveries=DeliveryTable(table(schema.DELIVERIES), table(schema.EVENT_LOG)),
            endpoints=endpoints,
            failing=endpoints,
            circuits=DynamoCircuits(table(schema.ENDPOINTS)),
            parking=DynamoParkingLot(table(schema.DELIVERIES), table(schema.PARKING_LOT), table(schema.EVENT_LOG)),
            events=EventTable(table(schema.EVENTS), table(schema.EVENT_LOG)),
            api_keys=ApiKeyTable(table(schema.API_KEYS)),
            event_types=EventTypeTable(table(schema.EVENT_TYPES)),
        )


def crash_before_next_lot_write(stores: Stores, kind: str) -> None:
    """Make the parking lot's next lot write of `kind` ("put": an entry, "drop": one) raise, once: a crash
    between the delivery record's write and the lot's."""
    parking = stores.parking
    if isinstance(parking, FakeParkingLot):
        parking.crash_before = kind
        return
    assert isinstance(parking, DynamoParkingLot)
    method = {"put": "put_item", "drop": "delete_item"}[kind]
    original = getattr(parking.lot, method)

    def crash(**request: object) -> None:
        setattr(parking.lot, method, original)
        raise RuntimeError(f"crashed before the lot entry's {kind}")

    setattr(parking.lot, method, crash)


@contextmanager
def stores_of(kind: str) -> Iterator[Stores]:
    if kind == "fake":
        yield fake_stores()
    else:
        with dynamodb_stores() as stores:
            yield stores
