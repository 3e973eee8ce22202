"""Issue 27's finding, through the API: with the deployed guard on, `https://127.0.0.1.:9311/` and
`https://8.8.8.8:22/` were registered (201). Written against the interfaces that existed before the fix (the guard
turned on in the running stack, as deployed), so it runs, and fails, on the old code; the full behaviour is in
tests/integration/test_endpoint_destinations.py."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from hookrelay import wiring
from hookrelay.adapters import schema
from tests.support.platform import Platform


@pytest.fixture
def guarded(platform: Platform) -> Iterator[Platform]:
    """The stack with ALLOW_PRIVATE_DESTINATIONS as deployed (not "true"), restored before the stack stops."""
    os.environ[schema.ALLOW_PRIVATE_DESTINATIONS] = "false"
    wiring.reset()
    try:
        yield platform
    finally:
        os.environ[schema.ALLOW_PRIVATE_DESTINATIONS] = "true"
        wiring.reset()


@pytest.mark.parametrize("url", ["https://127.0.0.1.:9311/", "https://169.254.169.254.:9311/", "https://8.8.8.8:22/"])
def test_the_api_refuses_the_findings_urls_with_the_guard_on(guarded: Platform, url: str) -> None:
    _, token = guarded.new_tenant()
    created = guarded.call("POST", "/v1/endpoints", token, {"url": url, "event_types": ["*"]})
    assert created.status == 422, created.body
    assert created.headers["content-type"] == "application/problem+json"
