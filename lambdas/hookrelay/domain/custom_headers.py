"""Custom headers an endpoint sends with every webhook: which ones may be set, and how they are shown.

A tenant adds headers its receiver wants (an API key of its gateway, a routing tag). The platform's own headers
stay the platform's: the signature's (`webhook-*`: a header could otherwise replace the signature the consumer
verifies), the connection's (hop-by-hop headers, `Host`, `Content-Length`: the request's framing and destination),
`Content-Type` (the body is JSON, signed as sent) and `User-Agent`; and `Authorization` while the endpoint has
`auth` (domain/endpoint_auth.py), which sets it. A value may be marked secret: it is stored like a signing secret,
never shown again after it is set and never logged (`masked`).

The rules are checked once, here, for the API (services/endpoints.py turns the problems into a 422 naming each
field by its JSON pointer) and again on each attempt (`outbound_headers` skips anything the rule refuses, so a
header stored before a rule tightened is not sent).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MAX_HEADERS = 10  # per endpoint
MAX_NAME_LENGTH = 64
MAX_VALUE_LENGTH = 1024
MAX_TOTAL_BYTES = 4096  # names and values together: a receiver's header limit is often 8 KiB in all

# RFC 9110 section 5.1: a field name is a token.
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
# RFC 9110 section 5.5, visible ASCII only: no CR, LF or NUL (header injection), no obs-text (encodings differ).
_VALUE = re.compile(r"^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$")

SIGNATURE_PREFIX = "webhook-"  # webhook-id, webhook-timestamp, webhook-signature, and whatever Standard Webhooks adds
# Hop-by-hop headers (RFC 9110 section 7.6.1, RFC 9112) and the request's own framing and destination.
CONNECTION_HEADERS = frozenset(
    {
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "expect",
    }
)
PROXY_PREFIX = "proxy-"  # Proxy-Authorization, Proxy-Connection, ...
# The platform's own: the body's, the client's, and the W3C trace context each attempt sends (domain/trace_context.py).
PLATFORM_HEADERS = frozenset({"content-type", "content-encoding", "user-agent", "traceparent", "tracestate"})
AUTHORIZATION = "authorization"


@dataclass(kw_only=True)
class CustomHeader:
    name: str
    value: str
    secret: bool = False  # never shown after it is set, never logged


def refusal(name: str, *, has_auth: bool) -> str | None:
    """Why a header of this name may not be set, or None when it may."""
    if not _TOKEN.match(name):
        return "a header name is a token: letters, digits and !#$%&'*+-.^_`|~ only"
    if len(name) > MAX_NAME_LENGTH:
        return f"a header name is at most {MAX_NAME_LENGTH} characters"
    lower = name.lower()
    if lower.startswith(SIGNATURE_PREFIX):
        return f"{name} is the platform's: webhook-* headers carry the signature"
    if lower in CONNECTION_HEADERS or lower.startswith(PROXY_PREFIX):
        return f"{name} is a connection header, set by the HTTP client"
    if lower in PLATFORM_HEADERS:
        return f"{name} is set by the platform"
    if lower == AUTHORIZATION and has_auth:
        return "Authorization is set by the endpoint's auth: set one or the other"
    return None


def value_refusal(value: str) -> str | None:
    if len(value) > MAX_VALUE_LENGTH:
        return f"a header value is at most {MAX_VALUE_LENGTH} characters"
    if not _VALUE.match(value):
        return "a header value is visible ASCII and spaces, not empty, with no leading or trailing space"
    return None


def problems(headers: list[CustomHeader], *, has_auth: bool) -> list[dict[str, str]]:
    """Every problem of the list, each with the JSON pointer (RFC 6901) into the request body of where it is."""
    found: list[dict[str, str]] = []
    if len(headers) > MAX_HEADERS:
        found.append({"pointer": "/headers", "detail": f"an endpoint has at most {MAX_HEADERS} custom headers"})
    seen: set[str] = set()
    for index, header in enumerate(headers):
        name_problem = refusal(header.name, has_auth=has_auth)
        if name_problem is None and header.name.lower() in seen:
            name_problem = f"{header.name} is given twice (header names are case-insensitive)"
        seen.add(header.name.lower())
        if name_problem:
            found.append({"pointer": f"/headers/{index}/name", "detail": name_problem})
        value_problem = value_refusal(header.value)
        if value_problem:
            found.append({"pointer": f"/headers/{index}/value", "detail": value_problem})
    if sum(len(h.name) + len(h.value) for h in headers) > MAX_TOTAL_BYTES:
        found.append({"pointer": "/headers", "detail": f"custom headers are at most {MAX_TOTAL_BYTES} bytes in all"})
    return found


def outbound_headers(headers: Iterable[CustomHeader], *, has_auth: bool) -> dict[str, str]:
    """What an attempt sends of the endpoint's custom headers: those the rule allows today (a stored one it
    refuses now is left out, never sent over the platform's own)."""
    return {
        h.name: h.value
        for h in headers
        if refusal(h.name, has_auth=has_auth) is None and value_refusal(h.value) is None
    }


def masked(header: CustomHeader) -> dict[str, Any]:
    """How a header is shown: a secret one by its name alone."""
    if header.secret:
        return {"name": header.name, "secret": True}
    return {"name": header.name, "value": header.value, "secret": False}


@dataclass(frozen=True)
class GivenHeader:
    """A header as a request gives it: a secret one may leave its value out to keep the one stored under its name
    (a secret value is never shown, so a client changing the list cannot send it back)."""

    name: str
    value: str | None
    secret: bool = False


def resolve(given: list[GivenHeader], stored: list[CustomHeader]) -> tuple[list[CustomHeader], list[dict[str, str]]]:
    """The headers to store, and the problems of values neither given nor stored."""
    kept = {h.name.lower(): h.value for h in stored}
    headers: list[CustomHeader] = []
    found: list[dict[str, str]] = []
    for index, header in enumerate(given):
        value = header.value if header.value is not None else kept.get(header.name.lower())
        if value is None:
            detail = f"{header.name} has no stored value: give one"
            found.append({"pointer": f"/headers/{index}/value", "detail": detail})
            value = ""
        headers.append(CustomHeader(name=header.name, value=value, secret=header.secret))
    return headers, found
