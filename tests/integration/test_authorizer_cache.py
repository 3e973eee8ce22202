"""The local stack's gateway keeps the authorizer's answers as API Gateway does: per Authorization header, for the
deployed `Authorizer.cache_seconds`; a revoked key keeps working until its answer expires (docs/deploying.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hookrelay.functions import authorizer, authorizer_cache_seconds
from local import gateway
from tests.support.platform import Platform


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def authorizer_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    invoke = gateway.invoke

    def counting(function: str, event: dict[str, Any]) -> Any:
        if function == authorizer().name:
            calls.append(event["identitySource"][0])
        return invoke(function, event)

    monkeypatch.setattr(gateway, "invoke", counting)
    return calls


def call(cache: gateway.AuthorizerCache | None, token: str, path: str = "/v1/endpoints"):
    return gateway.handle("GET", path, "", {"authorization": f"Bearer {token}"}, b"", cache)


def test_a_keys_requests_invoke_the_authorizer_once_per_period(platform: Platform, authorizer_calls) -> None:
    clock = Clock()
    cache = gateway.AuthorizerCache(authorizer_cache_seconds(), clock)
    _, tenant_key = platform.new_tenant()
    authorizer_calls.clear()
    assert [call(cache, tenant_key).status for _ in range(5)] == [200] * 5
    assert len(authorizer_calls) == 1
    clock.now += authorizer_cache_seconds()
    assert call(cache, tenant_key).status == 200
    assert len(authorizer_calls) == 2


def test_a_revoked_key_works_until_its_cached_answer_expires(platform: Platform) -> None:
    clock = Clock()
    cache = gateway.AuthorizerCache(authorizer_cache_seconds(), clock)
    created = platform.call("POST", "/v1/api-keys", platform.admin_token, {"role": "producer"}).json()
    assert call(cache, created["token"], "/v1/event-types").status == 200
    assert platform.call("DELETE", f"/v1/api-keys/{created['key_id']}", platform.admin_token).status == 204

    clock.now += authorizer_cache_seconds() - 1
    assert call(cache, created["token"], "/v1/event-types").status == 200
    clock.now += 1
    assert call(cache, created["token"], "/v1/event-types").status == 403


def test_without_a_cache_a_revocation_is_seen_at_once(platform: Platform) -> None:
    created = platform.call("POST", "/v1/api-keys", platform.admin_token, {"role": "producer"}).json()
    assert call(None, created["token"], "/v1/event-types").status == 200
    assert platform.call("DELETE", f"/v1/api-keys/{created['key_id']}", platform.admin_token).status == 204
    assert call(None, created["token"], "/v1/event-types").status == 403


def test_a_flood_of_distinct_tokens_keeps_at_most_max_entries() -> None:
    cache = gateway.AuthorizerCache(60, max_entries=3)
    for n in range(5):
        cache.put(f"Bearer t{n}", {"isAuthorized": False})
    assert [cache.get(f"Bearer t{n}") is not None for n in range(5)] == [False, False, True, True, True]


def test_a_zero_second_cache_keeps_nothing() -> None:
    cache = gateway.AuthorizerCache(0)
    cache.put("Bearer t", {"isAuthorized": True})
    assert cache.get("Bearer t") is None


def test_the_deploying_doc_states_the_delay_the_code_sets() -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "deploying.md").read_text()
    assert f"**a revoked key keeps working for up to {authorizer_cache_seconds()} seconds**" in readme
