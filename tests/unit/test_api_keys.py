from __future__ import annotations

import pytest

from hookrelay.domain import api_keys
from hookrelay.domain.api_keys import Principal
from hookrelay.services.api_keys import KeyService
from tests.support.memory import MemoryApiKeys


def test_minted_tokens_parse_back_to_their_key_id_and_are_stored_only_hashed() -> None:
    minted = api_keys.mint_key()
    assert api_keys.key_id_of(minted.token) == minted.key_id
    assert minted.token not in minted.secret_hash
    assert api_keys.token_matches(minted.token, minted.secret_hash)
    assert not api_keys.token_matches(minted.token + "x", minted.secret_hash)


@pytest.mark.parametrize("token", ["", "hrk_", "Bearer x", "hrk_key_123_abc", "x" * 80])
def test_malformed_tokens_have_no_key_id(token: str) -> None:
    assert api_keys.key_id_of(token) is None


@pytest.mark.parametrize(
    ("role", "valid"),
    [
        ("admin", True),
        ("producer", True),
        ("tenant:ten_01JDZ3B8Q9XH7K2M4N6P8R0S1T", True),
        ("tenant:", False),
        ("tenant:someone-else", False),
        ("root", False),
    ],
)
def test_roles(role: str, valid: bool) -> None:
    assert api_keys.is_valid_role(role) is valid


def test_authentication_round_trip_and_revocation() -> None:
    service = KeyService(MemoryApiKeys())
    issued = service.issue("producer")
    assert service.authenticate(issued.token) == Principal(issued.key.key_id, "producer")
    forged = issued.token[:-4] + ("AAAA" if not issued.token.endswith("AAAA") else "BBBB")
    assert service.authenticate(forged) is None
    service.revoke(issued.key.key_id)
    assert service.authenticate(issued.token) is None


def test_principal_roles() -> None:
    assert Principal("k", "tenant:ten_X").tenant_id == "ten_X"
    assert Principal("k", "admin").tenant_id is None and Principal("k", "admin").is_admin
    assert Principal("k", "producer").is_producer
