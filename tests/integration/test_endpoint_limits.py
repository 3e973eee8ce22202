"""Per-tenant limits on moto, through the API as deployed (issue 27): endpoints per tenant counted on the tenant's
record in the same transaction as the endpoint (refused 409 past the limit, whatever the interleaving, and right
after a crash at any call), filters per endpoint (422), and GET /v1/endpoints paged with a tenant-bound cursor."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from hookrelay.adapters import aws, schema
from hookrelay.adapters.dynamodb import ENDPOINT_COUNT, CountedEndpoints, EndpointTable
from hookrelay.domain import ids
from hookrelay.domain.clock import utcnow
from hookrelay.domain.limits import TenantLimits
from hookrelay.domain.models import Endpoint, EndpointState, SigningSecret
from scripts.create_admin_key import create_admin_key
from tests.support.aws import moto_stack
from tests.support.crash import Crash, injector
from tests.support.platform import Platform

LIMITS = TenantLimits(max_endpoints_per_tenant=3, max_filters_per_endpoint=5)
URL = "http://127.0.0.1:9/hook"


@pytest.fixture
def limited() -> Iterator[Platform]:
    with moto_stack(limits=LIMITS) as env:
        admin = create_admin_key(env["API_KEYS_TABLE"])
        yield Platform(env=env, admin_token=admin.token)


def create(platform: Platform, token: str, event_types: list[str] | None = None) -> Any:
    return platform.call("POST", "/v1/endpoints", token, {"url": URL, "event_types": event_types or ["*"]})


def counter(platform: Platform) -> CountedEndpoints:
    return CountedEndpoints(
        aws.table(platform.env[schema.TENANTS.env_var]), aws.table(platform.env[schema.ENDPOINTS.env_var])
    )


def live(platform: Platform, tenant_id: str) -> int:
    table = EndpointTable(aws.table(platform.env[schema.ENDPOINTS.env_var]))
    return sum(e.state is not EndpointState.DELETED for e in table.list_for_tenant(tenant_id))


def test_a_tenant_at_its_endpoint_limit_is_refused_409_naming_the_limit(limited: Platform) -> None:
    tenant_id, token = limited.new_tenant("full")
    made = [create(limited, token) for _ in range(LIMITS.max_endpoints_per_tenant)]
    assert [m.status for m in made] == [201] * 3

    refused = create(limited, token)

    assert refused.status == 409, refused.body
    assert refused.headers["content-type"].startswith("application/problem+json")
    problem = refused.json()
    assert problem["type"].endswith("/limit-exceeded") and problem["title"] == "Limit exceeded"
    assert "max_endpoints_per_tenant is 3" in problem["detail"]
    assert live(limited, tenant_id) == 3 and counter(limited).counted(tenant_id) == 3
    # Deleting one frees its place (the count goes down with it); another tenant has its own count.
    assert limited.call("DELETE", f"/v1/endpoints/{made[0].json()['id']}", token).status == 204
    assert limited.call("DELETE", f"/v1/endpoints/{made[0].json()['id']}", token).status == 204  # twice: once counted
    assert counter(limited).counted(tenant_id) == 2
    assert create(limited, token).status == 201
    assert create(limited, token).status == 409
    _, other = limited.new_tenant("other")
    assert create(limited, other).status == 201


def test_filters_over_the_per_endpoint_limit_are_refused_422_naming_it(limited: Platform) -> None:
    _, token = limited.new_tenant("filters")
    too_many = [f"order.t{i}" for i in range(LIMITS.max_filters_per_endpoint + 1)]

    refused = create(limited, token, too_many)

    assert refused.status == 422, refused.body
    assert "max_filters_per_endpoint is 5" in refused.json()["detail"]
    endpoint = create(limited, token, too_many[:5]).json()
    patched = limited.call("PATCH", f"/v1/endpoints/{endpoint['id']}", token, {"event_types": too_many})
    assert patched.status == 422 and "max_filters_per_endpoint is 5" in patched.json()["detail"]


def test_the_count_condition_holds_whatever_a_stale_reader_saw(limited: Platform) -> None:
    """Concurrent creations each read a count below the limit; the transaction's condition (not the read) decides:
    at the limit, a creation writes neither the count nor the endpoint."""
    tenant_id, _ = limited.new_tenant("racing")
    counts = counter(limited)
    assert counts.start_count(tenant_id, 0)
    assert not counts.start_count(tenant_id, 7)  # the first count wins
    now = utcnow()
    endpoints = [
        Endpoint(
            id=ids.endpoint_id(),
            tenant_id=tenant_id,
            url=URL,
            event_types=["*"],
            secrets=[SigningSecret(secret="whsec_" + "A" * 32, created_at=now)],
            created_at=now,
            updated_at=now,
        )
        for _ in range(5)
    ]
    # Every one of them read 0 before writing (as five concurrent requests would): only three get in.
    outcomes = [counts.create(endpoint, LIMITS.max_endpoints_per_tenant) for endpoint in endpoints]

    assert outcomes == [True, True, True, False, False]
    assert counts.counted(tenant_id) == 3 == live(limited, tenant_id)
    # A deletion that lost its race (the endpoint changed since it was read) takes nothing off the count.
    deleted = replace(endpoints[0], state=EndpointState.DELETED, secrets=[], updated_at=utcnow())
    assert not counts.delete(deleted, expected_updated_at=utcnow(), read=endpoints[0])
    assert counts.counted(tenant_id) == 3 == live(limited, tenant_id)
    assert counts.delete(deleted, expected_updated_at=endpoints[0].updated_at, read=endpoints[0])
    assert counts.counted(tenant_id) == 2 == live(limited, tenant_id)


def test_a_crash_at_any_call_of_a_create_or_delete_leaves_the_count_right(limited: Platform) -> None:
    """The API dies at each of its AWS calls in turn (a first-ever count included: a tenant from before counts);
    after each, the tenant's count is its live endpoints, and the limit still holds once the caller retries."""
    with injector() as hook:
        for action in ("create", "delete"):
            tenant_id, token, victim = _uncounted_tenant(limited)
            hook.arm(frozenset({"api"}), None)
            _act(limited, token, action, victim)
            hook.disarm()
            calls = list(hook.calls)
            assert any("TransactWriteItems" in call for call in calls), calls
            for number, label in enumerate(calls):
                tenant_id, token, victim = _uncounted_tenant(limited)
                hook.arm(frozenset({"api"}), number)
                try:
                    _act(limited, token, action, victim)
                except (Crash, AssertionError):
                    pass  # the API answered 5xx
                hook.disarm()
                assert hook.crashed is not None, f"{action}: call {number} ({label}) not reached"
                counted = counter(limited).counted(tenant_id)
                assert counted in (None, live(limited, tenant_id)), (action, label, counted)
                # The caller retries until the limit: never past it.
                while create(limited, token).status == 201:
                    pass
                assert counter(limited).counted(tenant_id) == live(limited, tenant_id) == 3, (action, label)


def _uncounted_tenant(platform: Platform) -> tuple[str, str, str]:
    """A tenant with two endpoints and no count on its record (as one created before counts existed)."""
    tenant_id, token = platform.new_tenant("crashing")
    victim = create(platform, token).json()["id"]
    create(platform, token)
    aws.table(platform.env[schema.TENANTS.env_var]).update_item(
        Key={"id": tenant_id}, UpdateExpression="REMOVE #c", ExpressionAttributeNames={"#c": ENDPOINT_COUNT}
    )
    return tenant_id, token, victim


def _act(platform: Platform, token: str, action: str, victim: str) -> None:
    if action == "create":
        answer = create(platform, token)
        assert answer.status == 201, answer.body
    else:
        answer = platform.call("DELETE", f"/v1/endpoints/{victim}", token)
        assert answer.status == 204, answer.body


def test_endpoints_are_listed_a_page_at_a_time_newest_first(platform: Platform) -> None:
    _, token = platform.new_tenant("paged")
    made = [create(platform, token).json()["id"] for _ in range(7)]
    assert platform.call("DELETE", f"/v1/endpoints/{made[3]}", token).status == 204
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        query = f"?limit=2&cursor={cursor}" if cursor else "?limit=2"
        page = platform.call("GET", f"/v1/endpoints{query}", token)
        assert page.status == 200, page.body
        document = page.json()
        assert len(document["data"]) <= 2
        seen += [e["id"] for e in document["data"]]
        pages += 1
        cursor = document["next_cursor"]
        if cursor is None:
            break
    assert seen == [i for i in reversed(made) if i != made[3]]  # newest first, the deleted one left out
    assert pages == 3
    # Without a limit: one page of up to 50, and a null cursor.
    whole = platform.call("GET", "/v1/endpoints", token).json()
    assert [e["id"] for e in whole["data"]] == seen and whole["next_cursor"] is None


def test_another_tenants_endpoint_cursor_is_refused(platform: Platform) -> None:
    _, token = platform.new_tenant("owner")
    for _ in range(3):
        create(platform, token)
    cursor = platform.call("GET", "/v1/endpoints?limit=1", token).json()["next_cursor"]
    assert cursor
    _, intruder = platform.new_tenant("intruder")
    create(platform, intruder)

    refused = platform.call("GET", f"/v1/endpoints?limit=1&cursor={cursor}", intruder)

    assert refused.status == 400, refused.body
    assert refused.json()["title"] == "Invalid cursor"
    forged = platform.call("GET", "/v1/endpoints?cursor=not-a-cursor", intruder)
    assert forged.status == 400
