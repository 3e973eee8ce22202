"""Tenants, API keys and endpoints."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from hookrelay.domain import api_keys, ids
from hookrelay.domain.api_keys import Principal
from hookrelay.domain.clock import utcnow
from hookrelay.domain.errors import InvalidRequest, NotFound
from hookrelay.domain.models import ApiKey, Endpoint, SigningSecret, Tenant
from hookrelay.domain.signing import generate_secret
from hookrelay.services.ports import ApiKeyRepository, EndpointRepository, TenantRepository


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


@dataclass
class TenantService:
    tenants: TenantRepository
    keys: KeyService

    def create(self, name: str) -> tuple[Tenant, IssuedKey]:
        tenant = Tenant(id=ids.tenant_id(), name=name, created_at=utcnow())
        self.tenants.put(tenant)
        return tenant, self.keys.issue(api_keys.tenant_role(tenant.id), description=f"first key of {name}")


def validate_endpoint_url(url: str, *, allow_private: bool) -> str:
    """HTTPS to a public host; plain HTTP and loopback only where private destinations are allowed (local mode).

    This is the early, friendly check; the sender checks every resolved address again at delivery time.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise InvalidRequest("url must be an absolute https:// URL")
    if parts.username or parts.password:
        raise InvalidRequest("url must not carry credentials")
    if allow_private:
        return url
    if parts.scheme != "https":
        raise InvalidRequest("url must use https")
    try:
        address = ipaddress.ip_address(parts.hostname)
    except ValueError:
        if parts.hostname.lower() in ("localhost",) or parts.hostname.lower().endswith(".localhost"):
            raise InvalidRequest("url must point to a public host") from None
        return url
    if not address.is_global:
        raise InvalidRequest("url must point to a public address")
    return url


@dataclass
class EndpointService:
    endpoints: EndpointRepository
    allow_private_destinations: bool = False
    default_max_in_flight: int = 4

    def create(
        self,
        tenant_id: str,
        *,
        url: str,
        event_types: list[str],
        description: str | None = None,
        max_in_flight: int | None = None,
    ) -> Endpoint:
        now = utcnow()
        endpoint = Endpoint(
            id=ids.endpoint_id(),
            tenant_id=tenant_id,
            url=validate_endpoint_url(url, allow_private=self.allow_private_destinations),
            event_types=event_types,
            description=description,
            secrets=[SigningSecret(secret=generate_secret(), created_at=now)],
            max_in_flight=max_in_flight or self.default_max_in_flight,
            created_at=now,
            updated_at=now,
        )
        self.endpoints.put(endpoint)
        return endpoint

    def get(self, tenant_id: str, endpoint_id: str) -> Endpoint:
        endpoint = self.endpoints.get(tenant_id, endpoint_id)
        if endpoint is None:
            raise NotFound(f"no endpoint {endpoint_id!r}")
        return endpoint

    def list(self, tenant_id: str) -> list[Endpoint]:
        return sorted(self.endpoints.list_for_tenant(tenant_id), key=lambda e: e.created_at, reverse=True)
