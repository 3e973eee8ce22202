"""ApiKeyRepository: keys and their revocation, alike on the in-memory fake and on DynamoDB."""

from __future__ import annotations

from hookrelay.domain.models import ApiKey
from tests.support.builders import T0, at
from tests.support.stores import Stores


def a_key(key_id: str = "key_1") -> ApiKey:
    return ApiKey(key_id=key_id, role="tenant:tn_1", secret_hash="sha256:abc", created_at=T0, description="ci")


def test_put_then_get_returns_the_key_as_written(stores: Stores) -> None:
    stores.api_keys.put(a_key())
    assert stores.api_keys.get("key_1") == a_key()
    assert stores.api_keys.get("key_missing") is None


def test_revoking_keeps_the_first_revocation_time(stores: Stores) -> None:
    stores.api_keys.put(a_key())
    assert stores.api_keys.revoke("key_1", at(1))
    assert stores.api_keys.revoke("key_1", at(2))  # idempotent: still revoked, at the first time
    revoked = stores.api_keys.get("key_1")
    assert revoked is not None and revoked.revoked_at == at(1) and not revoked.active


def test_revoking_an_unknown_key_is_refused_and_creates_nothing(stores: Stores) -> None:
    assert not stores.api_keys.revoke("key_missing", at(1))
    assert stores.api_keys.get("key_missing") is None
