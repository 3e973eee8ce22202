"""What a hostile tenant or a careless client sends gets a problem document (never a 500), and leaves no trace of
one caller on another's log lines."""

from __future__ import annotations

import logging
from urllib.parse import quote

import pytest

from hookrelay.domain.limits import DEFAULT_LIMITS
from hookrelay.domain.matching import MAX_FILTERS, MAX_STARS
from hookrelay.handlers import authorizer
from tests.support.platform import Platform

PROBLEM = "application/problem+json"
EXTREMES = ("9999-12-31T23:59:59.999999Z", "0001-01-01T00:00:00+01:00", "0001-01-01T00:00:00Z")


@pytest.fixture
def tenant(platform: Platform) -> str:
    return platform.new_tenant()[1]


@pytest.mark.parametrize(
    "event_types",
    [
        ["a*" * (MAX_STARS + 1)],  # a backtracking matcher's worst case, refused before it is stored
        [f"t{i}" for i in range(MAX_FILTERS + 1)],
        ["a" * 129],
    ],
)
def test_filters_beyond_the_caps_are_a_422_problem_at_create_and_update(
    platform: Platform, tenant: str, event_types: list[str]
) -> None:
    created = platform.call("POST", "/v1/endpoints", tenant, {"url": "http://127.0.0.1:9/h", "event_types": ["*"]})
    assert created.status == 201
    for method, path in (("POST", "/v1/endpoints"), ("PATCH", f"/v1/endpoints/{created.json()['id']}")):
        refused = platform.call(method, path, tenant, {"url": "http://127.0.0.1:9/h", "event_types": event_types})
        assert (refused.status, refused.headers["content-type"]) == (422, PROBLEM), (method, refused.body)


def test_filters_within_the_caps_are_accepted(platform: Platform, tenant: str) -> None:
    body = {
        "url": "http://127.0.0.1:9/h",
        # The deployment's limit (20 by default; MAX_FILTERS, 100, is the most a deployment may allow).
        "event_types": ["*." * MAX_STARS, *[f"t{i}" for i in range(DEFAULT_LIMITS.max_filters_per_endpoint - 1)]],
    }
    assert platform.call("POST", "/v1/endpoints", tenant, body).status == 201


@pytest.mark.parametrize("moment", EXTREMES)
def test_extreme_dates_in_the_delivery_log_are_no_500(platform: Platform, tenant: str, moment: str) -> None:
    for query in (f"since={quote(moment)}", f"until={quote(moment)}"):
        listed = platform.call("GET", f"/v1/deliveries?{query}", tenant)
        assert listed.status in (200, 422), (query, listed.status, listed.body)
        assert listed.status == 200 or listed.headers["content-type"] == PROBLEM


@pytest.mark.parametrize(("since", "until"), [(EXTREMES[1], EXTREMES[0]), (EXTREMES[2], None), (EXTREMES[1], None)])
def test_extreme_dates_in_a_redrive_are_no_500(platform: Platform, tenant: str, since: str, until: str | None) -> None:
    endpoint = platform.new_endpoint(tenant, "http://127.0.0.1:9/h")
    body = {"since": since} | ({"until": until} if until else {})
    started = platform.call("POST", f"/v1/endpoints/{endpoint['id']}/redrive", tenant, body)
    assert started.status == 202, started.body


def test_a_rotate_secret_body_that_is_not_utf8_is_a_400_problem(platform: Platform, tenant: str) -> None:
    endpoint = platform.new_endpoint(tenant, "http://127.0.0.1:9/h")
    refused = platform.call("POST", f"/v1/endpoints/{endpoint['id']}/rotate-secret", tenant, b"\xff\xfe{}")
    assert (refused.status, refused.headers["content-type"]) == (400, PROBLEM), refused.body
    assert "UTF-8" in refused.json()["detail"]


def test_a_refused_request_is_not_logged_with_the_previous_callers_key(platform: Platform, tenant: str) -> None:
    """The authorizer's Lambda is warm across callers: a key id logged for one must not reach the next's lines."""
    records: list[logging.LogRecord] = []
    collect = logging.Handler(logging.INFO)
    collect.emit = records.append  # type: ignore[method-assign]
    authorizer.logger.addHandler(collect)
    level = authorizer.logger.level
    authorizer.logger.setLevel(logging.INFO)
    try:
        assert platform.call("GET", "/v1/endpoints", tenant).status == 200
        assert platform.call("GET", "/v1/endpoints", "hrk_not_a_key").status == 403
    finally:
        authorizer.logger.removeHandler(collect)
        authorizer.logger.setLevel(level)
    [refused] = [record for record in records if record.getMessage() == "refused"]
    assert not hasattr(refused, "key_id"), vars(refused)
