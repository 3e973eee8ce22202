"""Tenants: created by admins with their first key; further keys for a tenant only once it exists."""

from __future__ import annotations

from dataclasses import dataclass

from hookrelay.domain import api_keys, ids
from hookrelay.domain.api_keys import Principal
from hookrelay.domain.clock import utcnow
from hookrelay.domain.errors import InvalidRequest
from hookrelay.domain.models import Tenant
from hookrelay.services.api_keys import IssuedKey, KeyService
from hookrelay.services.ports import TenantRepository


@dataclass
class TenantService:
    tenants: TenantRepository
    keys: KeyService

    def create(self, name: str) -> tuple[Tenant, IssuedKey]:
        tenant = Tenant(id=ids.tenant_id(), name=name, created_at=utcnow())
        self.tenants.put(tenant)
        return tenant, self.keys.issue(api_keys.tenant_role(tenant.id), description=f"first key of {name}")

    def issue_key(self, role: str, description: str | None = None) -> IssuedKey:
        """A key for any role; a tenant key only for a tenant that exists (a typo must not mint a dead key)."""
        tenant_id = Principal(key_id="", role=role).tenant_id
        if tenant_id is not None and api_keys.is_valid_role(role) and self.tenants.get(tenant_id) is None:
            raise InvalidRequest(f"no tenant {tenant_id!r}")
        return self.keys.issue(role, description)
