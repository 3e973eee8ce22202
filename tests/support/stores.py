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
from hookrelay.services.ports import (
    ApiKeyRepository,
    CircuitRepository,
    DeliveryRepository,
    EndpointRepository,
    EventRepository,
    FailingEndpoints,
    ParkingLot,
)
from tests.support.aws import moto_stack
from tests.support.fakes import FakeCircuits, FakeDeliveries, FakeEndpoints, FakeEvents, FakeParkingLot
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


def fake_stores() -> Stores:
    deliveries, endpoints = FakeDeliveries(), FakeEndpoints()
    return Stores(
        kind="fake",
        deliveries=deliveries,
        endpoints=endpoints,
        failing=endpoints,  # one fake for both ports, as EndpointTable is one adapter for both
        circuits=FakeCircuits(endpoints),
        parking=FakeParkingLot(deliveries, endpoints),
        events=FakeEvents(),
        api_keys=MemoryApiKeys(),
    )


@contextmanager
def dynamodb_stores() -> Iterator[Stores]:
    with moto_stack(execute_state_machine=False):

        def table(spec: schema.TableSpec) -> object:
            return aws.table(os.environ[spec.env_var])

        endpoints = EndpointTable(table(schema.ENDPOINTS))
        yield Stores(
            kind="dynamodb",
            deliveries=DeliveryTable(table(schema.DELIVERIES)),
            endpoints=endpoints,
            failing=endpoints,
            circuits=DynamoCircuits(table(schema.ENDPOINTS)),
            parking=DynamoParkingLot(table(schema.DELIVERIES), table(schema.ENDPOINTS)),
            events=EventTable(table(schema.EVENTS)),
            api_keys=ApiKeyTable(table(schema.API_KEYS)),
        )


@contextmanager
def stores_of(kind: str) -> Iterator[Stores]:
    if kind == "fake":
        yield fake_stores()
    else:
        with dynamodb_stores() as stores:
            yield stores
