"""Per-producer fairness: each API key gets its own requests per second, so one key's flood is refused to that key
(429 with Retry-After, as a problem document) while every other key goes on being served."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from hookrelay import wiring
from hookrelay.domain.rate_limit import COUNTER_LIFETIME_SECONDS, counter_shards, shard_limit
from hookrelay.services.rate_limit import RateLimiter
from scripts.create_admin_key import create_admin_key
from tests.support.aws import as_function, moto_stack, serving_routes
from tests.support.platform import Platform

LIMIT = 3
SECOND = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture
def limited() -> Iterator[Platform]:
    with moto_stack(api_key_rate_per_second=LIMIT) as env:
        platform = Platform(env=env, admin_token=create_admin_key(env["API_KEYS_TABLE"]).token)
        set_clock(lambda: SECOND)  # every request below falls in this one second
        yield platform


def set_clock(clock: Callable[[], datetime]) -> None:
    """The clock of each API function's own limiter (they count one shared table's counters)."""
    for function in serving_routes():
        with as_function(function):
            wiring.rate_limiter().clock = clock


def test_a_flooding_key_gets_429s_and_the_others_are_still_served(limited: Platform) -> None:
    tenant_id, tenant = limited.new_tenant()  # creating it is the admin key's first request
    flooder, neighbour = limited.new_key("producer"), limited.new_key("producer")
    event = {"tenant_id": tenant_id, "type": "order.created", "data": {}}
    answers = [limited.call("POST", "/v1/events", flooder, event).status for _ in range(LIMIT + 2)]
    assert answers == [202] * LIMIT + [429, 429]
    refused = limited.call("POST", "/v1/events", flooder, event)
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.headers["retry-after"] == "1" and refused.json()["status"] == 429
    assert limited.call("POST", "/v1/events", neighbour, event).status == 202
    assert limited.call("GET", "/v1/endpoints", tenant).status == 200


def test_the_next_second_the_key_is_served_again(limited: Platform) -> None:
    tenant_id, _ = limited.new_tenant()
    producer = limited.new_key("producer")
    event = {"tenant_id": tenant_id, "type": "order.created", "data": {}}
    for _ in range(LIMIT + 1):
        limited.call("POST", "/v1/events", producer, event)
    assert limited.call("POST", "/v1/events", producer, event).status == 429
    set_clock(lambda: SECOND + timedelta(seconds=1))
    assert limited.call("POST", "/v1/events", producer, event).status == 202


def test_without_a_configured_limit_nothing_is_counted(platform: Platform) -> None:
    assert wiring.rate_limiter().per_key_per_second is None
    tenant_id, _ = platform.new_tenant()
    producer = platform.new_key("producer")
    event = {"tenant_id": tenant_id, "type": "order.created", "data": {}}
    assert {platform.call("POST", "/v1/events", producer, event).status for _ in range(10)} == {202}


def test_portal_sessions_count_against_the_key_that_opened_them(limited: Platform) -> None:
    """Opening more portal sessions buys no more requests a second than the tenant's key has."""
    _, tenant = limited.new_tenant()
    sessions = [limited.call("POST", "/v1/portal-sessions", tenant, {}).json()["token"] for _ in range(2)]
    # The key has used 2 of its 3 this second (the two opens): one more request, through either session.
    assert limited.call("GET", "/v1/endpoints", sessions[0]).status == 200
    assert limited.call("GET", "/v1/endpoints", sessions[1]).status == 429
    assert limited.call("GET", "/v1/endpoints", tenant).status == 429


def test_the_shared_counter_adds_a_lease_whole_or_not_at_all(platform: Platform) -> None:
    """The adapter's conditional add on the RateLimits table: up to the limit exactly, and a refused add adds
    nothing (services/rate_limit.py relies on both to hold one container to the limit)."""
    counters = wiring.rate_limiter().counters
    table = counters.table  # type: ignore[attr-defined]
    assert counters.take("key_x#1", 3, 5, 1_000)
    assert not counters.take("key_x#1", 3, 5, 1_000)
    assert counters.take("key_x#1", 2, 5, 1_000)
    assert not counters.take("key_x#1", 1, 5, 1_000)
    item = table.get_item(Key={"id": "key_x#1"})["Item"]
    assert item["requests"] == 5 and item["expires_at"] == 1_000


def test_a_high_limit_is_counted_on_a_counter_per_thousand_requests_none_past_its_part(platform: Platform) -> None:
    """At 2,500 a second a key's busy second is three counter items (834, 833 and 833 requests), written by the
    adapter's conditional adds: most of the second in large adds (as other containers' leases), its last requests by
    four containers, each starting on a counter and moving on as they fill, until each is refused."""
    limit, second = 2_500, int(SECOND.timestamp())
    counters = wiring.rate_limiter().counters
    table = counters.table  # type: ignore[attr-defined]
    expires_at = second + COUNTER_LIFETIME_SECONDS
    parts = [shard_limit(limit, shard) for shard in range(counter_shards(limit))]
    for shard, part in enumerate(parts):  # the second so far: other containers' counts, all but ten of each part
        assert counters.take(f"key_busy#{second}#{shard}", part - 10, part, expires_at)
    containers = [
        RateLimiter(counters, per_key_per_second=limit, clock=lambda: SECOND, pick_shard=starting_on(start))
        for start in (0, 1, 2, 0)
    ]
    admitted, open_ = 0, containers
    while open_:  # a request from each container still admitted, until each is refused
        open_ = [limiter for limiter in open_ if limiter.admit("key_busy")]
        admitted += len(open_)
    assert admitted == 30
    items = table.scan()["Items"]
    written = {
        item["id"]: (item["requests"], item["expires_at"]) for item in items if item["id"].startswith("key_busy")
    }
    assert written == {f"key_busy#{second}#{shard}": (part, expires_at) for shard, part in enumerate(parts)}
    assert parts == [834, 833, 833] and sum(parts) == limit


def starting_on(start: int) -> Callable[[int], int]:
    """A container's pick of the counter it starts its second on: `start`, whatever the randomness would say."""
    return lambda shards: start % shards
