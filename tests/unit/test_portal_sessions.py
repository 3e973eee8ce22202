"""Portal sessions without AWS: the token's shape, who may open a session, lifetimes, and what the authorizer
accepts (expired, forged and other tokens refused)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hookrelay.domain import portal
from hookrelay.domain.api_keys import ADMIN, PRODUCER, Principal, tenant_role
from hookrelay.domain.errors import Forbidden, InvalidRequest, NotFound
from hookrelay.domain.models import PortalSession
from hookrelay.services.portal import PortalSessionService
from tests.support.fakes import KnownTenants

TENANT = "ten_01JDZ3B8Q9XH7K2M4N6P8R0S1T"
OTHER = "ten_01JDZ3B8Q9XH7K2M4N6P8R0S1V"


class Sessions:
    def __init__(self) -> None:
        self.items: dict[str, PortalSession] = {}

    def put(self, session: PortalSession) -> None:
        assert session.id not in self.items
        self.items[session.id] = session

    def get(self, session_id: str) -> PortalSession | None:
        return self.items.get(session_id)


def service() -> PortalSessionService:
    return PortalSessionService(Sessions(), KnownTenants(TENANT, OTHER))


def tenant_key(tenant_id: str = TENANT) -> Principal:
    return Principal(key_id="key_t", role=tenant_role(tenant_id))


def test_a_token_names_its_session_and_nothing_else_parses() -> None:
    minted = portal.mint_session()
    assert portal.session_id_of(minted.token) == minted.session_id
    assert minted.token.startswith("hrp_ps_") and minted.secret_hash not in minted.token
    for other in ("", "hrp_", minted.token + "x", "hrk_key_01JDZ3B8Q9XH7K2M4N6P8R0S1T_" + "a" * 43):
        assert portal.session_id_of(other) is None


def test_the_link_carries_the_token_in_its_fragment() -> None:
    assert portal.portal_link("http://127.0.0.1:8080/", "hrp_x") == "http://127.0.0.1:8080/portal#token=hrp_x"


def test_a_tenant_s_session_is_its_tenant_s_principal_until_it_expires() -> None:
    sessions = service()
    opened = sessions.open(tenant_key(), None, portal.DEFAULT_LIFETIME)
    who = sessions.authenticate(opened.token)
    grant = portal.Grant(frozenset(portal.DEFAULT_CAPABILITIES), opened.session.expires_at)
    assert who == Principal(key_id=opened.session.id, role=tenant_role(TENANT), grant=grant, counted_as="key_t")
    assert who.rate_limit_id == "key_t"  # the opening key's rate limit, not a fresh one per session
    assert who.tenant_id == TENANT and not who.is_admin and not who.is_producer
    opened.session.expires_at -= int(portal.DEFAULT_LIFETIME.total_seconds())  # now expired
    assert sessions.authenticate(opened.token) is None


def test_a_forged_token_is_no_principal() -> None:
    sessions = service()
    real = sessions.open(tenant_key(), None, portal.DEFAULT_LIFETIME).token
    assert sessions.authenticate(real[:-1] + ("A" if real[-1] != "A" else "B")) is None
    assert sessions.authenticate(portal.mint_session().token) is None  # well formed, never opened


def test_who_may_open_a_session_for_whom() -> None:
    sessions = service()
    lifetime = portal.DEFAULT_LIFETIME
    assert sessions.open(tenant_key(), TENANT, lifetime).session.tenant_id == TENANT
    assert sessions.open(Principal("key_a", ADMIN), OTHER, lifetime).session.tenant_id == OTHER
    with pytest.raises(Forbidden):
        sessions.open(tenant_key(), OTHER, lifetime)
    with pytest.raises(Forbidden):
        sessions.open(Principal("key_p", PRODUCER), TENANT, lifetime)
    with pytest.raises(Forbidden):
        sessions.open(
            Principal("ps_x", tenant_role(TENANT), grant=portal.Grant(frozenset(portal.Capability), 0)), None, lifetime
        )
    with pytest.raises(InvalidRequest):
        sessions.open(Principal("key_a", ADMIN), None, lifetime)
    with pytest.raises(NotFound):
        sessions.open(Principal("key_a", ADMIN), "ten_nope", lifetime)


def test_lifetimes_are_bounded() -> None:
    sessions = service()
    for lifetime in (portal.MIN_LIFETIME - timedelta(seconds=1), portal.MAX_LIFETIME + timedelta(seconds=1)):
        with pytest.raises(InvalidRequest):
            sessions.open(tenant_key(), None, lifetime)


def test_a_link_has_view_always_and_the_default_when_nothing_is_asked() -> None:
    assert portal.capabilities_of(None) == (portal.Capability.VIEW, portal.Capability.RECOVER)
    assert portal.capabilities_of([portal.Capability.MANAGE]) == (portal.Capability.VIEW, portal.Capability.MANAGE)


def test_a_grant_survives_the_authorizer_s_context_and_anything_unreadable_grants_nothing() -> None:
    grant = portal.Grant(frozenset(portal.DEFAULT_CAPABILITIES), 2_000_000_000)
    assert portal.Grant.from_context(grant.to_context()) == grant
    for context in ({}, {portal.CAPABILITIES: 7, portal.EXPIRES_AT: "soon"}, {portal.CAPABILITIES: "root,manage"}):
        read = portal.Grant.from_context(context)
        assert read.expires_at == 0 and portal.Capability.VIEW not in read.capabilities
    assert portal.Grant.from_context({portal.CAPABILITIES: "root,manage"}).capabilities == {portal.Capability.MANAGE}
