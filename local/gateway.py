"""API Gateway (HTTP API, payload 2.0) in miniature: match the route, run the authorizer, call the function.

Used by the local stack's HTTP server and by the integration tests, so both reach the real handlers
with the events API Gateway would send.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from hookrelay.functions import PUBLIC_ROUTES, SERVED_ROUTES, Function, Route, authorizer
from local.lambda_runtime import invoke

log = logging.getLogger("hookrelay.local.gateway")


@dataclass(frozen=True)
class GatewayResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class AuthorizerCache:
    """API Gateway's cache of the authorizer's answers: per Authorization header, for `seconds` (the deployed
    `Authorizer.cache_seconds`). The local stack's server uses it, so that it answers as the deployed API does
    (a revoked key works until its cached answer expires) and does not invoke the authorizer on every request;
    the in-process gateway of the integration tests has none, so a test sees a revocation at once."""

    seconds: float
    clock: Callable[[], float] = time.monotonic
    max_entries: int = 10_000  # a flood of distinct bad tokens evicts the oldest answers, it does not grow memory
    _answers: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, identity: str) -> dict[str, Any] | None:
        with self._lock:
            cached = self._answers.get(identity)
            if cached is None:
                return None
            if cached[0] <= self.clock():
                del self._answers[identity]
                return None
            return cached[1]

    def put(self, identity: str, answer: dict[str, Any]) -> None:
        if self.seconds <= 0:
            return
        with self._lock:
            self._answers.pop(identity, None)  # re-inserted last: the dict's order is the eviction order
            self._answers[identity] = (self.clock() + self.seconds, answer)
            while len(self._answers) > self.max_entries:
                del self._answers[next(iter(self._answers))]


def _pattern(route: Route) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(route.path)) + "$")


_COMPILED = [(route, function, _pattern(route)) for route, function in SERVED_ROUTES.items()]


def match(method: str, path: str) -> tuple[Route, Function, dict[str, str]] | None:
    for route, function, pattern in _COMPILED:
        found = pattern.match(path)
        if found and route.method == method.upper():
            return route, function, found.groupdict()
    return None


def _request_context(method: str, path: str, route_key: str) -> dict[str, Any]:
    now = time.time()
    return {
        "accountId": "123456789012",
        "apiId": "local",
        "domainName": "localhost",
        "domainPrefix": "localhost",
        "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": ""},
        "requestId": str(uuid.uuid4()),
        "routeKey": route_key,
        "stage": "$default",
        "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
        "timeEpoch": int(now * 1000),
    }


# What API Gateway answers when the integration's function runs and fails (it raised, or its execution environment
# died mid-invocation): 502, never retried by API Gateway; the producer retries under its Idempotency-Key. A failing
# authorizer is API Gateway's 500 (http_api.py's answer to anything else that fails).
FUNCTION_ERROR_STATUS = 502


def _refusal(status: int, message: str) -> GatewayResponse:
    # What API Gateway itself answers before any function runs (no token, a refused key, no such route):
    # its own `{"message": …}` JSON, not problem details. Shown as it is, so nothing here hides the difference.
    return GatewayResponse(status, {"content-type": "application/json"}, json.dumps({"message": message}).encode())


def handle(
    method: str,
    path: str,
    query: str = "",
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    authorizer_cache: AuthorizerCache | None = None,
) -> GatewayResponse:
    # API Gateway tells the function how the caller reached it (here: plain HTTP on 127.0.0.1).
    headers = {"x-forwarded-proto": "http"} | {k.lower(): v for k, v in (headers or {}).items()}
    found = match(method, path)
    if found is None:
        return _refusal(404, "Not Found")
    route, function, path_parameters = found
    context = _request_context(method.upper(), path, route.route_key)
    if route not in PUBLIC_ROUTES:  # the portal's static page is the one route without the authorizer
        event = _authorizer_event(route, method, path, query, headers, context, path_parameters)
        decision = _authorize(event, authorizer_cache)
        if isinstance(decision, GatewayResponse):
            return decision
        context = context | {"authorizer": {"lambda": decision}}
    is_text = True
    try:
        text = body.decode()
    except UnicodeDecodeError:
        is_text = False
        text = base64.b64encode(body).decode()
    event = {
        "version": "2.0",
        "routeKey": route.route_key,
        "rawPath": path,
        "rawQueryString": query,
        "headers": headers,
        "queryStringParameters": dict(parse_qsl(query)) or None,
        "pathParameters": path_parameters or None,
        "requestContext": context,
        "body": text if body else None,
        "isBase64Encoded": not is_text,
    }
    try:
        result = invoke(function.name, event)
    except Exception:  # the function raised, or its environment died mid-invocation: a function error
        log.exception("%s %s: the %s function failed", method.upper(), path, function.name)
        return _refusal(FUNCTION_ERROR_STATUS, "Internal Server Error")
    payload = result.get("body") or ""
    raw = base64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode()
    response_headers = {k.lower(): str(v) for k, v in (result.get("headers") or {}).items()}
    for name, values in (result.get("multiValueHeaders") or {}).items():
        response_headers[name.lower()] = ", ".join(values)
    return GatewayResponse(int(result.get("statusCode", 200)), response_headers, raw)


def _authorizer_event(
    route: Route,
    method: str,
    path: str,
    query: str,
    headers: dict[str, str],
    context: dict[str, Any],
    path_parameters: dict[str, str],
) -> dict[str, Any]:
    """What API Gateway sends the authorizer (payload 2.0, REQUEST): the identity source and the request."""
    return {
        "version": "2.0",
        "type": "REQUEST",
        "routeArn": f"arn:aws:execute-api:us-east-1:123456789012:local/$default/{method.upper()}{path}",
        "identitySource": [headers.get("authorization", "")],
        "routeKey": route.route_key,
        "rawPath": path,
        "rawQueryString": query,
        "headers": headers,
        "requestContext": context,
        "pathParameters": path_parameters,
    }


def _authorize(event: dict[str, Any], cache: AuthorizerCache | None) -> GatewayResponse | dict[str, Any]:
    """The authorizer's context for the function, or API Gateway's own refusal."""
    # API Gateway refuses a request without the identity source before calling the authorizer.
    identity = event["identitySource"][0]
    if not identity:
        return _refusal(401, "Unauthorized")
    decision = cache.get(identity) if cache is not None else None
    if decision is None:
        decision = invoke(authorizer().name, event)
        if cache is not None:
            cache.put(identity, decision)
    if not decision.get("isAuthorized"):
        return _refusal(403, "Forbidden")
    granted: dict[str, Any] = decision.get("context", {})
    return granted
