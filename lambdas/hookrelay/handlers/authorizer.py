"""API Gateway (HTTP API) Lambda authorizer: a bearer API key (or a portal session's token) in, its id and role out.

API Gateway caches the answer per Authorization header for `Api.AUTHORIZER_CACHE_TTL` (stacks/constructs/api.py),
so this runs once per key and TTL, not on every request: a revoked key keeps working until its cached answer
expires (docs/deploying.md states the delay). For the same reason the per-key rate limit is not counted here but in the
API functions (handlers/http.py), which see every request.

Lean on purpose, since it is on the path of every uncached request: plain dicts (payload format 2.0, simple
responses), the standard library's logging (Lambda's JSON log format makes its records JSON), and its own small
service (services/authorize.py); no Powertools, no pydantic, nothing of the other functions.
"""

from __future__ import annotations

import logging
from typing import Any

from hookrelay import wiring
from hookrelay.domain import portal
from hookrelay.domain.api_keys import Principal
from hookrelay.functions import AUTHORIZER

logger = logging.getLogger(AUTHORIZER.name)


def bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    token = bearer_token((event.get("headers") or {}).get("authorization"))
    who = _authenticate(token) if token else None
    if who is None:
        logger.info("refused", extra={"route": event.get("routeKey")})
        return {"isAuthorized": False}
    granted: dict[str, Any] = {"key_id": who.key_id, "role": who.role}
    if who.grant is not None:  # its capabilities' routes only, until it expires (handlers/http.py checks both on
        # every request: this answer is cached); its requests count against the key that opened it
        granted[portal.SCOPE] = portal.PORTAL_SCOPE
        granted[portal.COUNTED_AS] = who.rate_limit_id
        granted |= who.grant.to_context()
    return {"isAuthorized": True, "context": granted}


def _authenticate(token: str) -> Principal | None:
    """A portal token (its own prefix) is looked up among portal sessions (only then is that service loaded), any
    other among API keys."""
    if token.startswith(portal.TOKEN_PREFIX + "_"):
        return wiring.portal_session_check().authenticate(token)
    return wiring.authenticator().authenticate(token)
