"""POSTing a signed webhook with `requests`: bounded in time and in what is read, redirects never followed.

Outside local mode the delivery path refuses private, loopback, link-local (metadata) and other
non-public addresses. The check is made on the addresses DNS returns, and the connection is then made
to exactly the address that was checked (the Host header and TLS name stay the hostname), so a DNS
answer that changes between the check and the connect (rebinding) cannot reach an internal address.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter

from hookrelay.domain.classification import FailureKind
from hookrelay.domain.models import RESPONSE_EXCERPT_BYTES
from hookrelay.services.ports import SendResult

USER_AGENT = "hookrelay/0.1 (+webhooks)"

Resolver = Callable[[str, int], list[str]]


class BlockedDestination(requests.RequestException):
    """The endpoint's host resolves to an address the delivery path must not reach."""


def system_resolver(host: str, port: int) -> list[str]:
    return [info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]


def is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


class PinnedAddressAdapter(HTTPAdapter):
    """Resolves once, vets the answer, and connects to that very address."""

    def __init__(self, resolver: Resolver, *, allow_private: bool) -> None:
        super().__init__(max_retries=0)
        self.resolver = resolver
        self.allow_private = allow_private

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        parts = urlsplit(request.url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        addresses = self.resolver(host, port)  # socket.gaierror surfaces as a DNS failure
        if not self.allow_private:
            blocked = [a for a in addresses if not is_public(a)]
            if blocked:
                raise BlockedDestination(f"{host} resolves to non-public address {blocked[0]}")
        request.pinned_address = addresses[0]  # type: ignore[attr-defined]
        request.headers["Host"] = parts.netloc.rpartition("@")[2]
        return super().send(request, *args, **kwargs)

    def build_connection_pool_key_attributes(
        self, request: requests.PreparedRequest, verify: Any, cert: Any = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(request, verify, cert)
        hostname = host_params["host"]
        host_params["host"] = request.pinned_address  # type: ignore[attr-defined]
        if host_params["scheme"] == "https":
            pool_kwargs["server_hostname"] = hostname  # SNI and certificate checks stay on the name
            pool_kwargs["assert_hostname"] = hostname
        return host_params, pool_kwargs


def _failure_kind(error: BaseException) -> FailureKind:
    if isinstance(error, BlockedDestination):
        return FailureKind.BLOCKED
    if isinstance(error, socket.gaierror):
        return FailureKind.DNS
    if isinstance(error, (requests.Timeout, urllib3.exceptions.TimeoutError)):
        return FailureKind.TIMEOUT
    if isinstance(error, requests.exceptions.SSLError):
        return FailureKind.TLS
    return FailureKind.CONNECTION


class RequestsSender:
    def __init__(
        self,
        *,
        timeout_seconds: float = 8.0,
        allow_private_destinations: bool = False,
        resolver: Resolver = system_resolver,
    ) -> None:
        self.timeout = timeout_seconds
        self.session = requests.Session()
        self.session.trust_env = False  # never route deliveries through an ambient proxy
        self.session.headers["user-agent"] = USER_AGENT
        adapter = PinnedAddressAdapter(resolver, allow_private=allow_private_destinations)
        self.session.mount("https://", adapter)
        self.session.mount("http://", adapter)

    def send(self, url: str, headers: dict[str, str], body: bytes) -> SendResult:
        started = time.monotonic()

        def elapsed_ms() -> int:
            return int((time.monotonic() - started) * 1000)

        try:
            response = self.session.post(
                url,
                data=body,
                headers=headers,
                timeout=(min(3.0, self.timeout), self.timeout),
                allow_redirects=False,
                stream=True,
            )
        except (requests.RequestException, socket.gaierror) as error:
            detail = str(error) if isinstance(error, BlockedDestination) else type(error).__name__
            return SendResult(None, elapsed_ms(), _failure_kind(error), detail)
        retry_after = response.headers.get("retry-after")
        try:
            excerpt = self._excerpt(response)
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as error:
            return SendResult(response.status_code, elapsed_ms(), _failure_kind(error), type(error).__name__)
        finally:
            response.close()
        latency = elapsed_ms()
        if latency > self.timeout * 1000:
            # Delivered means 2xx within the timeout for the whole request, not per socket read.
            return SendResult(
                response.status_code, latency, FailureKind.TOO_SLOW, "whole request exceeded the timeout", excerpt
            )
        return SendResult(response.status_code, latency, None, None, excerpt, retry_after)

    @staticmethod
    def _excerpt(response: requests.Response) -> str | None:
        chunk = response.raw.read(RESPONSE_EXCERPT_BYTES, decode_content=True)
        if not chunk:
            return None
        text = chunk.decode(response.encoding or "utf-8", errors="replace")
        # Stored as UTF-8: re-cut on a character boundary so the excerpt never exceeds the cap in bytes.
        return text.encode()[:RESPONSE_EXCERPT_BYTES].decode(errors="ignore")
