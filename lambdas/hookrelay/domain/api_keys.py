"""Bearer API keys: `hrk_<key id>_<secret>`, stored as a SHA-256 of the whole token.

Tokens carry 256 bits of randomness, so a fast hash is enough (nothing to brute-force); the key id in
the token lets the authorizer fetch the one record it needs and compare in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hookrelay.domain import ids

TOKEN_PREFIX = "hrk"
_TOKEN = re.compile(r"^hrk_(key_[0-9A-Z]{26})_([A-Za-z0-9_-]{43})$")
_ROLE = re.compile(r"^(admin|producer|tenant:ten_[0-9A-Z]{26})$")

ADMIN = "admin"
PRODUCER = "producer"

if TYPE_CHECKING:  # domain/portal.py imports this module
    from hookrelay.domain.portal import Grant


def tenant_role(tenant_id: str) -> str:
    return f"tenant:{tenant_id}"


def is_valid_role(role: str) -> bool:
    return bool(_ROLE.match(role))


@dataclass(frozen=True)
class NewKey:
    key_id: str
    token: str  # shown once, never stored
    secret_hash: str


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def mint_key() -> NewKey:
    key_id = ids.api_key_id()
    token = f"{TOKEN_PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"
    return NewKey(key_id=key_id, token=token, secret_hash=hash_token(token))


def key_id_of(token: str) -> str | None:
    match = _TOKEN.match(token)
    return match.group(1) if match else None


def token_matches(token: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_token(token), stored_hash)


@dataclass(frozen=True)
class Principal:
    key_id: str  # the API key's id, or the portal session's id
    role: str
    # A consumer portal session's capabilities and expiry (domain/portal.py); None for an API key.
    grant: Grant | None = None
    counted_as: str | None = None  # whose per-key rate limit its requests count against, when not its own

    @property
    def portal(self) -> bool:
        return self.grant is not None

    @property
    def rate_limit_id(self) -> str:
        """A portal session counts against the key that opened it: opening many sessions buys no extra rate."""
        return self.counted_as or self.key_id

    @property
    def tenant_id(self) -> str | None:
        return self.role.removeprefix("tenant:") if self.role.startswith("tenant:") else None

    @property
    def is_admin(self) -> bool:
        return self.role == ADMIN

    @property
    def is_producer(self) -> bool:
        return self.role == PRODUCER


@dataclass(frozen=True)
class Credential:
    """What checking a token needs of a stored key, and nothing else (the authorizer reads only this)."""

    key_id: str
    role: str
    secret_hash: str
    revoked: bool


def authenticated(token: str, lookup: Callable[[str], Credential | None]) -> Principal | None:
    """The principal a bearer token proves, or None: malformed, unknown, revoked or a wrong secret."""
    key_id = key_id_of(token)
    if key_id is None:
        return None
    found = lookup(key_id)
    if found is None or found.revoked or not token_matches(token, found.secret_hash):
        return None
    return Principal(key_id=found.key_id, role=found.role)
