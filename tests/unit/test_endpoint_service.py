"""EndpointService on in-memory repositories: rotation deadlines, pruning, and writes that meet concurrent ones."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hookrelay.domain.clock import utcnow
from hookrelay.domain.errors import Conflict, InvalidDocument, InvalidRequest
from hookrelay.domain.models import Endpoint, EndpointState, SigningSecret
from hookrelay.domain.signing import KeyType
from hookrelay.services.endpoints import MAX_ACTIVE_SECRETS, WRITE_ATTEMPTS, EndpointService, _next_version
from tests.support.fakes import ConditionalEndpoints, NoDeliveries, nothing_parked


def an_endpoint(**fields: Any) -> Endpoint:
    now = utcnow().replace(microsecond=0)
    values: dict[str, Any] = {
        "id": "ep_1",
        "tenant_id": "ten_1",
        "url": "https://example.com/hook",
        "event_types": ["*"],
        "secrets": [SigningSecret(secret="whsec_first", created_at=now)],
        "created_at": now,
        "updated_at": now,
    }
    return Endpoint(**(values | fields))


def service_with(endpoint: Endpoint) -> tuple[EndpointService, ConditionalEndpoints]:
    endpoints = ConditionalEndpoints(endpoint)
    return EndpointService(endpoints, deliveries=NoDeliveries(), parking=nothing_parked(endpoints)), endpoints


def test_rotation_sets_the_deadline_on_the_active_secrets_and_appends_a_new_one() -> None:
    service, endpoints = service_with(an_endpoint())
    rotated = service.rotate_secret("ten_1", "ep_1", expire_previous_after=timedelta(hours=2))

    first, second = endpoints.get("ten_1", "ep_1").secrets
    assert first.secret == "whsec_first" and first.expires_at == rotated.previous_expire_at
    assert timedelta(hours=2) - timedelta(seconds=5) < rotated.previous_expire_at - utcnow() <= timedelta(hours=2)
    assert second.secret == rotated.secret != "whsec_first" and second.expires_at is None
    assert endpoints.get("ten_1", "ep_1").active_secrets(utcnow()) == ["whsec_first", rotated.secret]


def test_rotation_keeps_the_newest_keys_type_unless_told_and_may_switch_types() -> None:
    service, endpoints = service_with(an_endpoint())
    to_ed25519 = service.rotate_secret("ten_1", "ep_1", key_type=KeyType.ED25519)
    assert to_ed25519.secret.startswith("whsk_")
    again = service.rotate_secret("ten_1", "ep_1")  # no type given: the newest key's, Ed25519
    assert again.secret.startswith("whsk_") and again.secret != to_ed25519.secret
    back = service.rotate_secret("ten_1", "ep_1", key_type=KeyType.HMAC)
    assert back.secret.startswith("whsec_")
    stored = endpoints.get("ten_1", "ep_1").secrets
    assert [s.key_type for s in stored] == [KeyType.HMAC, KeyType.ED25519, KeyType.ED25519, KeyType.HMAC]


def test_an_endpoint_created_with_ed25519_signs_with_a_private_key_and_shows_its_public_key() -> None:
    service, _ = service_with(an_endpoint())
    created = service.create("ten_1", url="https://example.com/x", event_types=["*"], key_type=KeyType.ED25519)
    [key] = created.secrets
    assert key.key_type is KeyType.ED25519 and key.secret.startswith("whsk_")
    assert key.public_key is not None and key.public_key.startswith("whpk_")
    assert service.create("ten_1", url="https://example.com/y", event_types=["*"]).secrets[0].key_type is KeyType.HMAC


def test_expired_secrets_are_pruned_on_the_next_write_only() -> None:
    past = utcnow() - timedelta(minutes=1)
    secrets = [
        SigningSecret(secret="whsec_old", created_at=past - timedelta(days=1), expires_at=past),
        SigningSecret(secret="whsec_new", created_at=past - timedelta(days=1)),
    ]
    service, endpoints = service_with(an_endpoint(secrets=secrets))
    assert len(service.get("ten_1", "ep_1").secrets) == 2  # reads leave the record alone
    service.update("ten_1", "ep_1", description="pruned")
    assert [s.secret for s in endpoints.get("ten_1", "ep_1").secrets] == ["whsec_new"]


@pytest.mark.parametrize("overlap", [timedelta(seconds=-1), timedelta(days=7, seconds=1)])
def test_the_overlap_is_bounded(overlap: timedelta) -> None:
    service, _ = service_with(an_endpoint())
    with pytest.raises(InvalidRequest):
        service.rotate_secret("ten_1", "ep_1", expire_previous_after=overlap)


def test_rotations_stop_at_the_active_secret_cap() -> None:
    service, endpoints = service_with(an_endpoint())
    for _ in range(MAX_ACTIVE_SECRETS - 1):
        service.rotate_secret("ten_1", "ep_1", expire_previous_after=timedelta(hours=1))
    with pytest.raises(Conflict):
        service.rotate_secret("ten_1", "ep_1", expire_previous_after=timedelta(hours=1))
    assert len(endpoints.get("ten_1", "ep_1").secrets) == MAX_ACTIVE_SECRETS


def test_a_change_that_meets_a_concurrent_write_is_made_again_on_the_fresh_record() -> None:
    service, endpoints = service_with(an_endpoint())

    def someone_else_disables() -> None:
        endpoints.before_write = None
        current = endpoints.get("ten_1", "ep_1")
        endpoints.put(
            replace(current, state=EndpointState.DISABLED, updated_at=current.updated_at + timedelta(seconds=1))
        )

    endpoints.before_write = someone_else_disables
    rotated = service.rotate_secret("ten_1", "ep_1", expire_previous_after=timedelta(hours=1))

    stored = endpoints.get("ten_1", "ep_1")
    assert endpoints.writes == 2
    assert stored.state is EndpointState.DISABLED  # the concurrent change survives
    assert [s.secret for s in stored.secrets] == ["whsec_first", rotated.secret]  # and so does ours


def test_a_change_that_keeps_meeting_concurrent_writes_gives_up_with_409() -> None:
    service, endpoints = service_with(an_endpoint())

    def someone_else_writes() -> None:
        current = endpoints.get("ten_1", "ep_1")
        endpoints.put(replace(current, updated_at=current.updated_at + timedelta(seconds=1)))

    endpoints.before_write = someone_else_writes
    with pytest.raises(Conflict):
        service.update("ten_1", "ep_1", description="never written")
    assert endpoints.writes == WRITE_ATTEMPTS and endpoints.get("ten_1", "ep_1").description is None


def test_nothing_to_do_writes_nothing() -> None:
    service, endpoints = service_with(an_endpoint())
    assert service.set_enabled("ten_1", "ep_1", True).state is EndpointState.ENABLED
    with pytest.raises(InvalidRequest):
        service.update("ten_1", "ep_1")
    assert endpoints.writes == 0


def test_versions_strictly_increase_at_millisecond_precision() -> None:
    read = datetime(2030, 1, 1, 0, 0, 0, 5000, tzinfo=UTC)  # 5 ms
    assert _next_version(read, read + timedelta(microseconds=300)) == read + timedelta(milliseconds=1)
    assert _next_version(read, read - timedelta(seconds=1)) == read + timedelta(milliseconds=1)  # clock behind
    later = read + timedelta(seconds=2, microseconds=1700)
    assert _next_version(read, later) == read + timedelta(seconds=2, milliseconds=1)


def test_a_content_filter_is_checked_and_stored_compact_then_kept_changed_and_cleared() -> None:
    service, _ = service_with(an_endpoint())
    created = service.create("ten_1", url="https://example.com/in", event_types=["*"], content_filter={"type": "a"})
    assert created.content_filter == '{"type":"a"}'
    changed = service.update("ten_1", "ep_1", content_filter={"data.n": {"$gt": 1}})
    assert changed.content_filter == '{"data.n":{"$gt":1}}'
    assert service.update("ten_1", "ep_1", description="kept").content_filter == '{"data.n":{"$gt":1}}'
    assert service.update("ten_1", "ep_1", content_filter=None).content_filter is None


def test_a_bad_content_filter_changes_nothing_and_names_its_pointer() -> None:
    service, endpoints = service_with(an_endpoint(content_filter='{"type":"a"}'))
    with pytest.raises(InvalidDocument) as refused:
        service.update("ten_1", "ep_1", content_filter={"$or": [{"type": {"$like": "a%"}}]})
    assert refused.value.errors[0]["pointer"] == "/filter/$or/0/type/$like"
    stored = endpoints.get("ten_1", "ep_1")
    assert stored is not None and stored.content_filter == '{"type":"a"}'
    with pytest.raises(InvalidDocument):
        service.create("ten_1", url="https://example.com/in", event_types=["*"], content_filter={})


def test_a_rate_limit_is_set_on_create_and_patch_checked_against_max_in_flight_and_cleared_with_none() -> None:
    service, _ = service_with(an_endpoint(max_in_flight=4))
    created = service.create("ten_1", url="https://example.com/x", event_types=["*"], rate_limit_per_second=2)
    assert created.rate_limit_per_second == 2 and created.max_in_flight == 4  # 4 groups <= 2 s of 2/s
    with pytest.raises(InvalidDocument) as too_few:
        service.create("ten_1", url="https://example.com/y", event_types=["*"], rate_limit_per_second=1)
    assert too_few.value.errors[0]["pointer"] == "/rate_limit_per_second"
    assert service.update("ten_1", "ep_1", rate_limit_per_second=50).rate_limit_per_second == 50
    with pytest.raises(InvalidDocument):  # the two together: a change to either is checked against the other
        service.update("ten_1", "ep_1", max_in_flight=50, rate_limit_per_second=10)
    assert service.update("ten_1", "ep_1", rate_limit_per_second=None).rate_limit_per_second is None
    assert service.update("ten_1", "ep_1", max_in_flight=50).max_in_flight == 50  # no limit: nothing to serve
