"""Consumer portal sessions: opened by a tenant (or an admin for a tenant), a bearer token for the tenant's own
routes only, until it expires; and the portal's static page, the one route served without the authorizer."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import boto3
import pytest

from hookrelay import wiring
from hookrelay.adapters import schema
from hookrelay.domain import portal
from hookrelay.domain.api_keys import hash_token
from hookrelay.domain.clock import epoch_seconds, utcnow
from hookrelay.domain.models import PortalSession
from hookrelay.handlers.portal import CONTENT_SECURITY_POLICY
from tests.support.platform import Platform

GATEWAY_FORBIDDEN = {"message": "Forbidden"}


def _open(platform: Platform, token: str, body: Any = None) -> dict[str, Any]:
    opened = platform.call("POST", "/v1/portal-sessions", token, body)
    assert opened.status == 201, opened.body
    return opened.json()


def test_a_tenant_opens_a_session_whose_token_reads_its_own_endpoints(platform: Platform) -> None:
    tenant_id, tenant_token = platform.new_tenant()
    created = platform.new_endpoint(tenant_token, "https://example.com/hook")
    session = _open(platform, tenant_token)
    assert session["tenant_id"] == tenant_id
    assert session["token"].startswith("hrp_ps_")
    # The link carries the token in its fragment, which browsers never send to a server.
    assert session["portal_url"].endswith(f"/portal#token={session['token']}")
    assert "?" not in session["portal_url"]
    listed = platform.call("GET", "/v1/endpoints", session["token"])
    assert listed.status == 200 and [e["id"] for e in listed.json()["data"]] == [created["id"]]


def test_the_token_is_stored_only_as_its_hash(platform: Platform) -> None:
    _, tenant_token = platform.new_tenant()
    session = _open(platform, tenant_token)
    table = boto3.resource("dynamodb").Table(platform.env[schema.PORTAL_SESSIONS.env_var])
    item = table.get_item(Key={"id": session["session_id"]})["Item"]
    assert session["token"] not in str(item)
    assert item["secret_hash"] == hash_token(session["token"])


def test_a_session_lasts_what_was_asked_within_bounds(platform: Platform) -> None:
    _, tenant_token = platform.new_tenant()
    table = boto3.resource("dynamodb").Table(platform.env[schema.PORTAL_SESSIONS.env_var])
    session = _open(platform, tenant_token, {"ttl_seconds": 120})
    expires_at = int(table.get_item(Key={"id": session["session_id"]})["Item"]["expires_at"])
    assert 0 < expires_at - epoch_seconds(utcnow()) <= 120
    for ttl in (59, 3601):
        assert platform.call("POST", "/v1/portal-sessions", tenant_token, {"ttl_seconds": ttl}).status == 422


def test_a_portal_token_reaches_only_the_tenant_s_own_routes(platform: Platform) -> None:
    tenant_id, tenant_token = platform.new_tenant("a")
    _, other_token = platform.new_tenant("b")
    other_endpoint = platform.new_endpoint(other_token, "https://example.com/b")
    token = _open(platform, tenant_token)["token"]
    # Another tenant's objects are not found; admin routes and ingestion are refused.
    assert platform.call("GET", f"/v1/endpoints/{other_endpoint['id']}", token).status == 404
    assert platform.call("GET", f"/v1/deliveries?endpoint_id={other_endpoint['id']}", token).status == 404
    for method, path, body in (
        ("POST", "/v1/tenants", {"name": "x"}),
        ("POST", "/v1/api-keys", {"role": "admin"}),
        ("DELETE", "/v1/api-keys/key_x", None),
        ("POST", "/v1/events", {"tenant_id": tenant_id, "type": "a.b", "data": {}}),
    ):
        refused = platform.call(method, path, token, body)
        assert refused.status == 403, (method, path)
        assert refused.headers["content-type"] == "application/problem+json"


def test_a_session_cannot_open_another(platform: Platform) -> None:
    _, tenant_token = platform.new_tenant()
    token = _open(platform, tenant_token)["token"]
    refused = platform.call("POST", "/v1/portal-sessions", token, {})
    assert refused.status == 403 and refused.json()["detail"] == "a portal link cannot call this route"


def test_an_admin_opens_a_session_for_a_named_tenant(platform: Platform) -> None:
    tenant_id, _ = platform.new_tenant()
    assert _open(platform, platform.admin_token, {"tenant_id": tenant_id})["tenant_id"] == tenant_id
    assert platform.call("POST", "/v1/portal-sessions", platform.admin_token, {}).status == 422
    unknown = platform.call("POST", "/v1/portal-sessions", platform.admin_token, {"tenant_id": "ten_nope"})
    assert unknown.status == 404


def test_a_tenant_key_opens_sessions_for_its_own_tenant_only_and_a_producer_none(platform: Platform) -> None:
    tenant_id, tenant_token = platform.new_tenant("a")
    other_id, _ = platform.new_tenant("b")
    assert _open(platform, tenant_token, {"tenant_id": tenant_id})["tenant_id"] == tenant_id
    assert platform.call("POST", "/v1/portal-sessions", tenant_token, {"tenant_id": other_id}).status == 403
    producer = platform.new_key("producer")
    assert platform.call("POST", "/v1/portal-sessions", producer, {"tenant_id": tenant_id}).status == 403


def test_an_expired_session_is_refused(platform: Platform) -> None:
    tenant_id, _ = platform.new_tenant()
    minted = portal.mint_session()
    now = utcnow()
    # Expired a second ago, and still in the table (DynamoDB's TTL removes items days later, not at once).
    wiring.portal_session_service().sessions.put(
        PortalSession(
            id=minted.session_id,
            tenant_id=tenant_id,
            secret_hash=minted.secret_hash,
            created_at=now - timedelta(minutes=16),
            expires_at=epoch_seconds(now) - 1,
            opened_by="key_test",
        )
    )
    refused = platform.call("GET", "/v1/endpoints", minted.token)
    assert (refused.status, refused.json()) == (403, GATEWAY_FORBIDDEN)


@pytest.mark.parametrize(
    "forge",
    [
        lambda real: real[:-4] + ("AAAA" if not real.endswith("AAAA") else "BBBB"),  # a real session, another secret
        lambda real: "hrp_ps_00000000000000000000000000_" + "x" * 43,  # no such session
        lambda real: real.replace("hrp_", "hrk_", 1),  # read as an API key
        lambda real: real + "x",  # not a token at all
    ],
    ids=["wrong-secret", "unknown-session", "as-api-key", "malformed"],
)
def test_a_forged_token_is_refused(platform: Platform, forge: Any) -> None:
    _, tenant_token = platform.new_tenant()
    real = _open(platform, tenant_token)["token"]
    refused = platform.call("GET", "/v1/endpoints", forge(real))
    assert (refused.status, refused.json()) == (403, GATEWAY_FORBIDDEN)


def test_the_portal_page_is_served_without_a_token_with_a_strict_policy(platform: Platform) -> None:
    page = platform.call("GET", "/portal", None)
    assert page.status == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY and "unsafe-inline" not in CONTENT_SECURITY_POLICY
    assert page.headers["referrer-policy"] == "no-referrer"
    assert b'<script src="/portal/app.js"' in page.body
    for asset, kind in (("app.js", "text/javascript"), ("app.css", "text/css"), ("favicon.svg", "image/svg+xml")):
        served = platform.call("GET", f"/portal/{asset}", None)
        assert served.status == 200 and served.headers["content-type"].startswith(kind), asset
    # Only the page's own files: nothing else next to them, nor anything of the code.
    for other in ("index.htm", "portal.py", "..", "%2e%2e%2fwiring.py"):
        assert platform.call("GET", f"/portal/{other}", None).status == 404, other


def test_the_page_script_never_writes_markup(platform: Platform) -> None:
    """What the page shows from events and responses is attacker-controlled: it is set as text, never parsed."""
    lines = platform.call("GET", "/portal/app.js", None).body.decode().splitlines()
    script = "\n".join(line for line in lines if not line.lstrip().startswith("//"))  # the code, not its comments
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script, sink
