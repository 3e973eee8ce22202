"""Every contract case runs twice: on the in-memory fake and on the DynamoDB adapter (moto)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.stores import KINDS, Stores, stores_of


@pytest.fixture(params=KINDS)
def stores(request: pytest.FixtureRequest) -> Iterator[Stores]:
    with stores_of(request.param) as built:
        yield built
