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
        return api_keys.authenticated(token, self._credential)

    def _credential(self, key_id: str) -> api_keys.Credential | None:
        key = self.keys.get(key_id)
        if key is None:
            return None
        return api_keys.Credential(key.key_id, key.role, key.secret_hash, revoked=not key.active)
