"""OAuth2 client-credentials tokens for endpoints, fetched from the tenant's token URL and cached in the container.

The token URL is a destination chosen by a tenant, so it gets the delivery path's guard whole: its URL held to the
endpoint rule again on every fetch (https, a public host, an allowed port; domain/addresses.py), every address its
host resolves to vetted and the connection pinned to the vetted one (`PinnedAddressAdapter`), a deadline over the
whole request, no redirects, no ambient proxy, and a capped read of the answer.

The cache is keyed on the endpoint and its credentials' version (domain/endpoint_auth.py): new credentials never
get a token the old ones obtained. One lock per endpoint: concurrent attempts to one endpoint fetch one token between
them, and a 401 makes one new token however many attempts saw it (`stale`). Nothing here logs; a failure's message
names the step that failed and, at most, the token URL's status and `error` code.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import requests
import urllib3

from hookrelay.adapters.http_sender import (
    USER_AGENT,
    BlockedDestination,
    Deadline,
    PinnedAddressAdapter,
    Resolver,
    system_resolver,
)
from hookrelay.domain.addresses import DEFAULT_ENDPOINT_PORTS, EndpointPorts, validate_endpoint_url
from hookrelay.domain.endpoint_auth import (
    MAX_TOKEN_RESPONSE_BYTES,
    EndpointAuth,
    IssuedToken,
    TokenUnavailable,
    read_token_response,
    token_request,
)
from hookrelay.domain.errors import InvalidRequest

MAX_CACHED = 10_000  # tokens one container holds: past it the cache starts afresh (a token is only ever a fetch away)

_Key = tuple[str, str]  # (endpoint id, credentials version)


class CachedTokens:
    def __init__(
        self,
        *,
        allow_private_destinations: bool = False,
        endpoint_ports: EndpointPorts = DEFAULT_ENDPOINT_PORTS,
        resolver: Resolver = system_resolver,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.allow_private = allow_private_destinations
        self.ports = endpoint_ports
        self.clock = clock
        self.session = requests.Session()
        self.session.trust_env = False
        self.session.headers["user-agent"] = USER_AGENT
        adapter = PinnedAddressAdapter(resolver, allow_private=allow_private_destinations, ports=endpoint_ports)
        self.session.mount("https://", adapter)
        self.session.mount("http://", adapter)
        self._cache: dict[_Key, tuple[str, float]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self.fetches = 0  # tokens fetched by this container (read by tests and the bench)

    def token(self, endpoint_id: str, auth: EndpointAuth, *, timeout: float, stale: str | None = None) -> str:
        key = (endpoint_id, auth.version)
        with self._lock(endpoint_id):
            cached = self._cache.get(key)
            if cached is not None and cached[0] != stale and cached[1] > self.clock():
                return cached[0]
            issued = self._fetch(auth, timeout)
            self._keep(key, issued.access_token, self.clock() + issued.cache_seconds)
            return issued.access_token

    def _lock(self, endpoint_id: str) -> threading.Lock:
        """The endpoint's lock (one per endpoint the container has delivered to, whatever its credentials)."""
        with self._guard:
            return self._locks.setdefault(endpoint_id, threading.Lock())

    def _keep(self, key: _Key, token: str, until: float) -> None:
        with self._guard:
            if len(self._cache) >= MAX_CACHED:
                self._cache.clear()
            # The endpoint's tokens of earlier credentials go: they are never used again.
            for old in [k for k in self._cache if k[0] == key[0] and k != key]:
                del self._cache[old]
            self._cache[key] = (token, until)

    def _fetch(self, auth: EndpointAuth, timeout: float) -> IssuedToken:
        """One client-credentials request within `timeout` seconds (the attempt's budget that is left)."""
        try:  # the rule of today, which the stored URL may predate
            url = validate_endpoint_url(auth.token_url or "", allow_private=self.allow_private, ports=self.ports)
        except InvalidRequest as refused:
            raise TokenUnavailable(f"the token URL is refused: {refused.detail}") from None
        headers, form = token_request(auth)
        self.fetches += 1
        with Deadline(timeout) as deadline:
            try:
                response = self.session.post(
                    url,
                    data=form,
                    headers=headers,
                    timeout=(min(3.0, timeout), timeout),
                    allow_redirects=False,
                    stream=True,
                )
                try:
                    body = response.raw.read(MAX_TOKEN_RESPONSE_BYTES + 1, decode_content=True)
                finally:
                    response.close()
            except BlockedDestination as blocked:
                raise TokenUnavailable(f"the token URL is refused: {blocked}") from None
            except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as error:
                timed_out = deadline.expired or isinstance(error, (requests.Timeout, urllib3.exceptions.TimeoutError))
                why = "within the attempt's deadline" if timed_out else f"({type(error).__name__})"
                raise TokenUnavailable(f"the token URL gave no answer {why}") from None
        if len(body) > MAX_TOKEN_RESPONSE_BYTES:
            raise TokenUnavailable(f"the token URL's answer is over {MAX_TOKEN_RESPONSE_BYTES} bytes")
        return read_token_response(response.status_code, body)
