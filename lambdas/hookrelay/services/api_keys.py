"""API keys: issued (shown once, stored hashed), revoked, and checked on every request by the authorizer."""

from __future__ import annotations

from dataclasses import dataclass

from hookrelay.domain import api_keys
from hookrelay.domain.api_keys import Principal
from hookrelay.domain.clock import utcnow
from hookrelay.domain.errors import InvalidRequest, NotFound
from hookrelay.domain.models import ApiKey
from hookrelay.services.ports import ApiKeyRepository


@dataclass(frozen=True)
class IssuedKey:
    key: ApiKey
    token: str  # returned once, at creation


@dataclass
class KeyService:
    keys: ApiKeyRepository

    def issue(self, role: str, description: str | None = None) -> IssuedKey:
        if not api_keys.is_valid_role(role):
            raise InvalidRequest(f"invalid role {role!r}: use 'admin', 'producer' or 'tenant:<tenant id>'")
        minted = api_keys.mint_key()
        key = ApiKey(
            key_id=minted.key_id,
            role=role,
            secret_hash=minted.secret_hash,
            created_at=utcnow(),
            description=description,
        )
        self.keys.put(key)
        return IssuedKey(key=key, token=minted.token)

    def revoke(self, key_id: str) -> None:
        if not self.keys.revoke(key_id, utcnow()):
            raise NotFound(f"no API key {key_id!r}")

    def authenticate(self, token: str) -> Principal | None:
        key_id = api_keys.key_id_of(token)
        if key_id is None:
            return None
        key = self.keys.get(key_id)
        if key is None or not key.active or not api_keys.token_matches(token, key.secret_hash):
            return None
        return Principal(key_id=key.key_id, role=key.role)
