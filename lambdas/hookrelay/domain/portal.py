"""Portal sessions: the short-lived bearer token of a tenant's consumer portal link.

Why an opaque token looked up in a table, not a signed (HMAC) token:
- a signed token needs a platform signing key: a Secrets Manager secret the stack creates, read by the
  authorizer and the API, rotated by someone; nothing in the stack holds such a secret today (endpoint
  secrets and API keys live hashed or encrypted in DynamoDB), and a leaked key would forge any tenant's link;
- a stored session can be ended early (the record deleted or past `expires_at`) and audited (who opened it);
- the cost is the one GetItem the authorizer already pays for an API key (and, like a key's, the answer is
  cached by API Gateway for `Api.AUTHORIZER_CACHE_TTL`: a session ended early stops within that delay).
So the token is `hrp_<session id>_<secret>`: 256 random bits, stored as a SHA-256 (as API keys are, see
domain/api_keys.py), its session id naming the one record to read. The record carries the tenant, the expiry and
the session's capabilities; the authorizer refuses it once expired, whether or not DynamoDB's TTL has removed it
yet, and since API Gateway caches the authorizer's answer, every function checks the expiry again
(`Grant.refusal`) on every request.

A link is forwarded: to whoever watches the tenant's webhooks, to on-call, into a ticket. So it carries only the
authority it was minted with (`Capability`), and each route names the one capability a session needs to call it
(`ROUTE_CAPABILITIES`, the one table of it; a route not in it is never a portal session's).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from hookrelay.domain import ids
from hookrelay.domain.api_keys import hash_token

TOKEN_PREFIX = "hrp"
_TOKEN = re.compile(r"^hrp_(ps_[0-9A-Z]{26})_([A-Za-z0-9_-]{43})$")

DEFAULT_LIFETIME = timedelta(minutes=15)
MIN_LIFETIME = timedelta(minutes=1)
MAX_LIFETIME = timedelta(hours=1)  # short-lived: a link forwarded or left in a chat stops working soon

# Where the portal page is served (functions.PORTAL's routes) and how its link carries the token: in the
# fragment, which a browser never sends to a server nor puts in a Referer, so it reaches no access log.
PAGE_PATH = "/portal"

# The authorizer's context entry that marks a portal session's requests (handlers/http.py reads it back).
SCOPE = "scope"
PORTAL_SCOPE = "portal"
# The authorizer's context key naming the API key a portal session's requests count against (its opener).
COUNTED_AS = "counted_as"
# The authorizer's context keys carrying the session's capabilities (comma-separated) and expiry (epoch seconds).
CAPABILITIES = "capabilities"
EXPIRES_AT = "expires_at"


class Capability(StrEnum):
    """What a portal link lets its holder do, chosen when it is minted."""

    VIEW = "view"  # read the tenant's endpoints, deliveries, events, health, redrives and the catalogue
    RECOVER = "recover"  # send a test event, replay a delivery, redrive a window
    MANAGE = "manage"  # create, edit, disable, delete endpoints and rotate their secrets


# What a link can do unless its minter asks for more or less: watch and recover, not take an endpoint over.
DEFAULT_CAPABILITIES = (Capability.VIEW, Capability.RECOVER)

# The capability a portal session needs for each route it may call ("METHOD /path", as the API's route keys);
# every other route (tenants, API keys, portal sessions, ingest, the catalogue's writes) is never a session's.
# tests/integration/test_authorization_matrix.py tries every route with every capability, cell by cell.
ROUTE_CAPABILITIES: Mapping[str, Capability] = {
    "GET /v1/endpoints": Capability.VIEW,
    "GET /v1/endpoints/{endpoint_id}": Capability.VIEW,
    "GET /v1/endpoints/{endpoint_id}/health": Capability.VIEW,
    "GET /v1/endpoints/{endpoint_id}/stats": Capability.VIEW,
    "GET /v1/deliveries": Capability.VIEW,
    "GET /v1/deliveries/{delivery_id}": Capability.VIEW,
    "GET /v1/events/{event_id}": Capability.VIEW,
    "GET /v1/redrives/{redrive_id}": Capability.VIEW,
    "GET /v1/event-types": Capability.VIEW,
    "GET /v1/event-types/{name}": Capability.VIEW,
    "POST /v1/endpoints/{endpoint_id}/test": Capability.RECOVER,
    "POST /v1/deliveries/{delivery_id}/replay": Capability.RECOVER,
    "POST /v1/endpoints/{endpoint_id}/redrive": Capability.RECOVER,
    "POST /v1/endpoints": Capability.MANAGE,
    "PATCH /v1/endpoints/{endpoint_id}": Capability.MANAGE,
    "DELETE /v1/endpoints/{endpoint_id}": Capability.MANAGE,
    "POST /v1/endpoints/{endpoint_id}/disable": Capability.MANAGE,
    "POST /v1/endpoints/{endpoint_id}/enable": Capability.MANAGE,
    "POST /v1/endpoints/{endpoint_id}/rotate-secret": Capability.MANAGE,
}

# A secret rotated from a portal link keeps the previous one valid at least this long: a link, even one that may
# manage, never cuts the real consumer's verification off at once (a tenant key can, for a leaked secret).
MIN_PORTAL_SECRET_OVERLAP = timedelta(hours=1)

EXPIRED = "this portal link has expired"


def capability_table() -> str:
    """`ROUTE_CAPABILITIES` as docs/api.md's Markdown table (tests/unit/test_portal_capability_docs.py)."""
    rows = ["| capability | routes a portal link with it may call |", "|---|---|"]
    for capability in Capability:
        routes = [f"`{route}`" for route, needed in ROUTE_CAPABILITIES.items() if needed is capability]
        rows.append(f"| `{capability.value}` | {', '.join(routes)} |")
    return "\n".join(rows)


def capabilities_of(asked: Iterable[Capability] | None) -> tuple[Capability, ...]:
    """The capabilities a new link carries: the default when none are asked for; `view` always (every other
    capability is used from the page that reads); in the enum's order, once each."""
    wanted = set(DEFAULT_CAPABILITIES if asked is None else asked) | {Capability.VIEW}
    return tuple(c for c in Capability if c in wanted)


@dataclass(frozen=True)
class Grant:
    """What the authorizer said of a portal session: its capabilities and when it ends."""

    capabilities: frozenset[Capability]
    expires_at: int  # epoch seconds

    def refusal(self, route_key: str, now: int) -> str | None:
        """Why this session may not call `route_key` now, or None when it may."""
        if now >= self.expires_at:
            return EXPIRED
        needed = ROUTE_CAPABILITIES.get(route_key)
        if needed is None:
            return "a portal link cannot call this route"
        if needed not in self.capabilities:
            return f"this portal link was not given the {needed.value!r} capability this route needs"
        return None

    def to_context(self) -> dict[str, str | int]:
        return {
            CAPABILITIES: ",".join(c.value for c in Capability if c in self.capabilities),
            EXPIRES_AT: self.expires_at,
        }

    @classmethod
    def from_context(cls, context: Mapping[str, object]) -> Grant:
        """Read back from the authorizer's context; anything unreadable grants nothing and has expired."""
        raw = context.get(CAPABILITIES)
        names = raw.split(",") if isinstance(raw, str) else []
        known = {c.value: c for c in Capability}
        expires = context.get(EXPIRES_AT)
        if isinstance(expires, str) and expires.isdigit():
            expires = int(expires)
        return cls(
            capabilities=frozenset(known[n] for n in names if n in known),
            expires_at=expires if isinstance(expires, int) and not isinstance(expires, bool) else 0,
        )


def portal_link(api_url: str, token: str) -> str:
    return f"{api_url.rstrip('/')}{PAGE_PATH}#token={token}"


@dataclass(frozen=True)
class NewSession:
    session_id: str
    token: str  # shown once, never stored
    secret_hash: str


def mint_session() -> NewSession:
    session_id = ids.new_id("ps")
    token = f"{TOKEN_PREFIX}_{session_id}_{secrets.token_urlsafe(32)}"
    return NewSession(session_id=session_id, token=token, secret_hash=hash_token(token))


def session_id_of(token: str) -> str | None:
    match = _TOKEN.match(token)
    return match.group(1) if match else None
