"""How the platform authenticates to an endpoint: HTTP Basic, a static bearer token, or OAuth2 client credentials.

The credentials are the tenant's, given once and never shown again (`masked` shows the kind and the non-secret
parts) nor logged. Each set of credentials gets a new `version`: an OAuth2 token is cached under the endpoint and
that version (adapters/oauth2.py), so after a change no attempt uses a token the old credentials obtained, and the
change takes effect, whole, on the next attempt (one conditional write replaces the endpoint's `auth`).

OAuth2 (RFC 6749 section 4.4): the token is asked of the tenant's token URL with `grant_type=client_credentials`,
the client authenticated with HTTP Basic (section 2.3.1, the method every server must support), and cached until
shortly before its `expires_in`; an endpoint's 401 makes the attempt fetch a new token once and send again
(services/endpoint_requests.py). The token URL is held to the endpoint URLs' rule (domain/addresses.py) when it is
set and on every fetch.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any
from urllib.parse import quote

MAX_SECRET_LENGTH = 1024  # a password, token or client secret
MAX_FIELD_LENGTH = 256  # a username, client id, scope or audience
MAX_URL_LENGTH = 2048  # the token URL, as long as an endpoint URL may be
# A token's lifetime as cached: refreshed this long before the issuer says it expires (at most a tenth of it),
# assumed when the issuer says nothing (`expires_in` is only RECOMMENDED), and never cached longer.
REFRESH_MARGIN_SECONDS = 60.0
UNSTATED_LIFETIME_SECONDS = 300.0
MAX_CACHE_SECONDS = 24 * 3600.0
MAX_TOKEN_RESPONSE_BYTES = 16 * 1024

# RFC 6750 section 2.1's b64token: what may follow "Bearer ".
_B64TOKEN = re.compile(r"^[A-Za-z0-9\-._~+/]+=*$")
_PRINTABLE = re.compile(r"^[^\x00-\x1f\x7f]+$")  # no control characters (no CR/LF in a header or a form)
_ERROR_CODE = re.compile(r"^[\x20-\x21\x23-\x5b\x5d-\x7e]{1,64}$")  # RFC 6749 section 5.2's `error`


class AuthKind(StrEnum):
    BASIC = "basic"
    BEARER = "bearer"
    OAUTH2 = "oauth2_client_credentials"


# What each kind needs, and which of those are secret (never shown, never logged).
REQUIRED: dict[AuthKind, tuple[str, ...]] = {
    AuthKind.BASIC: ("username", "password"),
    AuthKind.BEARER: ("token",),
    AuthKind.OAUTH2: ("token_url", "client_id", "client_secret"),
}
OPTIONAL: dict[AuthKind, tuple[str, ...]] = {
    AuthKind.BASIC: (),
    AuthKind.BEARER: (),
    AuthKind.OAUTH2: ("scope", "audience"),
}
SECRET_FIELDS = frozenset({"password", "token", "client_secret"})


@dataclass(kw_only=True)
class EndpointAuth:
    kind: AuthKind
    version: str  # new with every set of credentials: what a cached token is keyed on
    set_at: datetime
    username: str | None = None
    password: str | None = None
    token: str | None = None
    token_url: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    scope: str | None = None
    audience: str | None = None


class TokenUnavailable(Exception):
    """The token URL gave no usable token: the attempt fails with `token_error`, retried on the schedule. The
    message is safe to record and show: it never carries a credential or a token."""


@dataclass(frozen=True)
class IssuedToken:
    access_token: str
    cache_seconds: float


def new_version() -> str:
    return "cred_" + secrets.token_hex(8)


def problems(fields: dict[str, Any]) -> list[dict[str, str]]:
    """What is wrong with an `auth` object as given (the kind's fields, their syntax), as JSON pointers. The token
    URL's destination is the endpoint rule's to judge (services/endpoints.py)."""
    kind = AuthKind(fields["kind"])
    found: list[dict[str, str]] = []
    for name in REQUIRED[kind]:
        if not fields.get(name):
            found.append({"pointer": f"/auth/{name}", "detail": f"{kind.value} auth needs {name}"})
    allowed = {"kind", *REQUIRED[kind], *OPTIONAL[kind]}
    for name in sorted(set(fields) - allowed):
        if fields[name] is not None:
            found.append({"pointer": f"/auth/{name}", "detail": f"{kind.value} auth takes no {name}"})
    for name in sorted(allowed - {"kind"}):
        value = fields.get(name)
        problem = _field_problem(name, value) if isinstance(value, str) and value else None
        if problem:
            found.append({"pointer": f"/auth/{name}", "detail": problem})
    return found


def _field_problem(name: str, value: str) -> str | None:
    limit = MAX_SECRET_LENGTH if name in SECRET_FIELDS else MAX_URL_LENGTH if name == "token_url" else MAX_FIELD_LENGTH
    if len(value) > limit:
        return f"{name} is at most {limit} characters"
    if not _PRINTABLE.match(value):
        return f"{name} must not contain control characters"
    if name == "username" and ":" in value:
        return "a Basic username cannot contain a colon (RFC 7617)"
    if name == "token" and not _B64TOKEN.match(value):
        return "a bearer token is letters, digits and -._~+/ with trailing = only (RFC 6750)"
    return None


def authorization(auth: EndpointAuth, access_token: str | None = None) -> str:
    """The Authorization header an attempt sends; `access_token`: the OAuth2 token fetched for it."""
    if auth.kind is AuthKind.BASIC:
        pair = f"{auth.username}:{auth.password}".encode()
        return "Basic " + base64.b64encode(pair).decode()
    if auth.kind is AuthKind.BEARER:
        return f"Bearer {auth.token}"
    if not access_token:
        raise ValueError("an OAuth2 endpoint's Authorization needs the token fetched for it")
    return f"Bearer {access_token}"


def token_request(auth: EndpointAuth) -> tuple[dict[str, str], dict[str, str]]:
    """The client-credentials request's headers and form (RFC 6749 sections 2.3.1 and 4.4.2)."""
    client = f"{quote(auth.client_id or '', safe='')}:{quote(auth.client_secret or '', safe='')}"
    headers = {
        "authorization": "Basic " + base64.b64encode(client.encode()).decode(),
        "accept": "application/json",
        "content-type": "application/x-www-form-urlencoded",
    }
    form = {"grant_type": "client_credentials"}
    if auth.scope:
        form["scope"] = auth.scope
    if auth.audience:
        form["audience"] = auth.audience
    return headers, form


def read_token_response(status: int, body: bytes) -> IssuedToken:
    """The token from the token URL's answer (RFC 6749 section 5.1), or TokenUnavailable saying why, in words
    that carry nothing of the answer but its status and its `error` code."""
    if not 200 <= status <= 299:
        raise TokenUnavailable(f"the token URL answered {status}{_error_code(body)}")
    try:
        document = json.loads(body)
    except ValueError:
        raise TokenUnavailable("the token URL's answer is not JSON") from None
    token = document.get("access_token") if isinstance(document, dict) else None
    if not isinstance(token, str) or not _B64TOKEN.match(token) or len(token) > MAX_TOKEN_RESPONSE_BYTES:
        raise TokenUnavailable("the token URL's answer has no usable access_token")
    token_type = document.get("token_type", "bearer")
    if not isinstance(token_type, str) or token_type.lower() != "bearer":
        raise TokenUnavailable("the token URL issued a token that is not a bearer token")
    return IssuedToken(token, cache_seconds(document.get("expires_in")))


def _error_code(body: bytes) -> str:
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return ""
    return f" ({error})" if isinstance(error, str) and _ERROR_CODE.match(error) else ""


def cache_seconds(expires_in: Any) -> float:
    """How long a token is used: until a margin before it expires (a tenth of its life at most). Some issuers write
    `expires_in` as a string of digits: read as the number."""
    if isinstance(expires_in, str) and expires_in.isdigit():
        expires_in = int(expires_in)
    if isinstance(expires_in, bool) or not isinstance(expires_in, int | float) or expires_in <= 0:
        return UNSTATED_LIFETIME_SECONDS
    lifetime = min(float(expires_in), MAX_CACHE_SECONDS)
    return lifetime - min(REFRESH_MARGIN_SECONDS, lifetime / 10)


def masked(auth: EndpointAuth) -> dict[str, Any]:
    """How the auth is shown: its kind and what is not secret; never a password, token or client secret."""
    shown: dict[str, Any] = {"kind": auth.kind.value}
    for name in (*REQUIRED[auth.kind], *OPTIONAL[auth.kind]):
        if name not in SECRET_FIELDS:
            shown[name] = getattr(auth, name)
    return shown


def with_kept_secrets(fields: dict[str, Any], stored: EndpointAuth | None) -> dict[str, Any]:
    """The fields given, a secret left out taken from the stored auth of the same kind: a change of scope or client
    id need not send the secret again (it is never shown, so the client may not have it)."""
    if stored is None or stored.kind.value != fields.get("kind"):
        return fields
    kept = {name: getattr(stored, name) for name in SECRET_FIELDS if not fields.get(name) and getattr(stored, name)}
    return fields | kept


def build(fields: dict[str, Any], now: datetime) -> EndpointAuth:
    """The auth to store from fields `problems` found nothing wrong with: a new version, so no token cached for
    earlier credentials is used again."""
    kind = AuthKind(fields["kind"])
    values = {name: fields.get(name) or None for name in (*REQUIRED[kind], *OPTIONAL[kind])}
    return EndpointAuth(kind=kind, version=new_version(), set_at=now, **values)
