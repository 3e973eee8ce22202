"""Consumer portal sessions: opened by a tenant (or an admin for a tenant), checked by the authorizer."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from hookrelay.domain import portal
from hookrelay.domain.api_keys import Principal, tenant_role, token_matches
from hookrelay.domain.clock import epoch_seconds, utcnow
from hookrelay.domain.errors import Forbidden, InvalidRequest, NotFound
from hookrelay.domain.models import PortalSession
from hookrelay.services.ports import PortalSessionRepository, TenantRepository


@dataclass(frozen=True)
class OpenedSession:
    session: PortalSession
    token: str  # returned once, at creation


@dataclass
class PortalSessionCheck:
    """The authorizer's part: a session's token in, its principal out. It reads the sessions and nothing else, which
    is all the authorizer's role and environment name."""

    sessions: PortalSessionRepository

    def authenticate(self, token: str) -> Principal | None:
        session_id = portal.session_id_of(token)
        if session_id is None:
            return None
        session = self.sessions.get(session_id)
        if session is None or not token_matches(token, session.secret_hash):
            return None
        if session.expires_at <= epoch_seconds(utcnow()):  # TTL removes it within days, not at once
            return None
        grant = portal.Grant(capabilities=frozenset(session.capabilities), expires_at=session.expires_at)
        return Principal(
            key_id=session.id, role=tenant_role(session.tenant_id), grant=grant, counted_as=session.opened_by
        )


@dataclass
class PortalSessionService(PortalSessionCheck):
    """Opening sessions (the API function): for the opener's own tenant, or an admin's for a tenant that exists."""

    tenants: TenantRepository

    def open(
        self,
        opener: Principal,
        tenant_id: str | None,
        lifetime: timedelta,
        capabilities: Iterable[portal.Capability] | None = None,
    ) -> OpenedSession:
        """A new session for the opener's own tenant, or (an admin) for the tenant named, with `capabilities`
        (`portal.capabilities_of`: the default when None).

        One write: a crash before it leaves nothing, after it a session whose token nobody received, which
        expires unused (the caller retries and gets another).
        """
        owner = self._owner(opener, tenant_id)
        if not portal.MIN_LIFETIME <= lifetime <= portal.MAX_LIFETIME:
            raise InvalidRequest(
                f"a portal session lasts {portal.MIN_LIFETIME.total_seconds():g} to"
                f" {portal.MAX_LIFETIME.total_seconds():g} seconds"
            )
        minted = portal.mint_session()
        now = utcnow()
        session = PortalSession(
            id=minted.session_id,
            tenant_id=owner,
            secret_hash=minted.secret_hash,
            created_at=now,
            expires_at=epoch_seconds(now + lifetime),
            opened_by=opener.key_id,
            capabilities=list(portal.capabilities_of(capabilities)),
        )
        self.sessions.put(session)
        return OpenedSession(session=session, token=minted.token)

    @staticmethod
    def check_opener(opener: Principal) -> None:
        """Refuses a caller that may open no session at all (checked before the request body is read)."""
        if opener.portal:
            # A link cannot extend itself: a leaked link ends at its own expiry.
            raise Forbidden("a portal session cannot open another portal session")
        if not opener.is_admin and opener.tenant_id is None:
            raise Forbidden("portal sessions are opened by a tenant's key or an admin key")

    def _owner(self, opener: Principal, tenant_id: str | None) -> str:
        self.check_opener(opener)
        if opener.is_admin:
            if tenant_id is None:
                raise InvalidRequest("an admin names the tenant the portal session is for (tenant_id)")
            if self.tenants.get(tenant_id) is None:
                raise NotFound(f"no tenant {tenant_id!r}")
            return tenant_id
        own = opener.tenant_id
        assert own is not None  # check_opener: an admin or a tenant
        if tenant_id is not None and tenant_id != own:
            raise Forbidden("a tenant key opens portal sessions for its own tenant only")
        return own
