"""Where endpoints may point, through the API with the deployed guard on (issue 27): no trailing-dot literal of an
internal address, no port outside the policy; 422 problem details on create and PATCH, and an attempt refused
(recorded as a blocked destination) for a URL stored before the rule."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pytest

from hookrelay import wiring
from hookrelay.domain.addresses import EndpointPorts
from scripts.create_admin_key import create_admin_key
from tests.support.aws import moto_stack
from tests.support.consumer import ScriptedConsumer
from tests.support.platform import Platform

PROBLEM = "application/problem+json"
PUBLIC = "https://8.8.8.8/hook"  # a public literal: accepted, and never looked up in DNS


@contextmanager
def _platform(**settings: Any) -> Iterator[Platform]:
    with moto_stack(**settings) as env:
        yield Platform(env=env, admin_token=create_admin_key(env["API_KEYS_TABLE"]).token)


@pytest.fixture
def guarded() -> Iterator[Platform]:
    """As deployed: ALLOW_PRIVATE_DESTINATIONS unset, the default (wide) port policy."""
    with _platform(allow_private_destinations=False) as platform:
        yield platform


def _refused(response: Any, message: str) -> None:
    assert response.status == 422, response.body
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert problem["status"] == 422 and problem["title"] == "Unprocessable request"
    assert message in problem["detail"], problem


# The finding's payloads, each accepted with the guard on before, and what the refusal says.
REFUSED = [
    ("https://127.0.0.1.:9311/", "url must point to a public address: 127.0.0.1. is not a public address"),
    ("https://169.254.169.254.:9311/", "url must point to a public address: 169.254.169.254. is not a public address"),
    ("https://8.8.8.8:22/", "url must not use port 22: endpoints may listen on 443, 8443 or 1024-65535"),
    ("https://8.8.8.8:0/", "url must not use port 0"),
    ("https://../hook", "url must name a host, with at most one trailing dot"),
]


@pytest.mark.parametrize(("url", "message"), REFUSED)
def test_create_refuses_with_problem_details(guarded: Platform, url: str, message: str) -> None:
    _, token = guarded.new_tenant()
    _refused(guarded.call("POST", "/v1/endpoints", token, {"url": url, "event_types": ["*"]}), message)
    assert guarded.call("GET", "/v1/endpoints", token).json()["data"] == []


@pytest.mark.parametrize(("url", "message"), REFUSED)
def test_patch_refuses_with_problem_details_and_keeps_the_url(guarded: Platform, url: str, message: str) -> None:
    _, token = guarded.new_tenant()
    endpoint = guarded.new_endpoint(token, PUBLIC)
    _refused(guarded.call("PATCH", f"/v1/endpoints/{endpoint['id']}", token, {"url": url}), message)
    assert guarded.call("GET", f"/v1/endpoints/{endpoint['id']}", token).json()["url"] == PUBLIC


def test_the_allowed_ports_are_accepted(guarded: Platform) -> None:
    _, token = guarded.new_tenant()
    for url in (
        "https://8.8.8.8:443/",
        "https://8.8.8.8:8443/",
        "https://8.8.8.8:9311/",
        "https://hooks.example.com./",
    ):
        guarded.new_endpoint(token, url)


def test_a_narrow_deployment_allows_443_and_8443_only() -> None:
    with _platform(allow_private_destinations=False, endpoint_ports=EndpointPorts.NARROW) as platform:
        _, token = platform.new_tenant()
        platform.new_endpoint(token, "https://8.8.8.8:8443/")
        refused = platform.call("POST", "/v1/endpoints", token, {"url": "https://8.8.8.8:9311/", "event_types": ["*"]})
        _refused(refused, "url must not use port 9311: endpoints may listen on 443 or 8443")


def test_an_attempt_at_a_url_stored_before_the_rule_is_refused_as_a_blocked_destination(guarded: Platform) -> None:
    tenant_id, token = guarded.new_tenant()
    created = guarded.new_endpoint(token, PUBLIC)
    endpoints = wiring.endpoint_service().endpoints
    stored = endpoints.get(tenant_id, created["id"])
    assert stored is not None
    endpoints.put(replace(stored, url="https://8.8.8.8:22/"))  # as registration let it through before
    producer = guarded.new_key("producer")
    accepted = guarded.call("POST", "/v1/events", producer, {"tenant_id": tenant_id, "type": "order.paid", "data": {}})
    guarded.pump()

    delivery = guarded.call("GET", f"/v1/deliveries/{accepted.json()['delivery_ids'][0]}", token).json()
    [attempt] = delivery["attempts"]
    assert attempt["status_code"] is None
    assert (
        attempt["error"] == "blocked_address: url must not use port 22: endpoints may listen on 443, 8443 or 1024-65535"
    )


def test_local_mode_still_delivers_to_loopback_on_an_ephemeral_port(consumer: ScriptedConsumer) -> None:
    """Even under the narrow policy: the demo consumer (local/consumer.py) listens on whatever port it is given."""
    with _platform(endpoint_ports=EndpointPorts.NARROW) as platform:
        tenant_id, token = platform.new_tenant()
        platform.new_endpoint(token, consumer.url)
        producer = platform.new_key("producer")
        platform.call("POST", "/v1/events", producer, {"tenant_id": tenant_id, "type": "order.paid", "data": {}})
        platform.pump()
        assert len(consumer.wait_for(1)) == 1
