"""POSTing a signed webhook with `requests`: bounded in time and in what is read, redirects never followed."""

from __future__ import annotations

import ipaddress
import socket
import time
from urllib.parse import urlsplit

import requests

from hookrelay.domain.classification import FailureKind
from hookrelay.domain.models import RESPONSE_EXCERPT_BYTES
from hookrelay.services.ports import SendResult

USER_AGENT = "hookrelay/0.1 (+webhooks)"


def blocked_reason(url: str) -> str | None:
    """Why this URL must not be fetched from the delivery path: a non-public address, or no address at all."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return None  # the request itself will fail with a DNS error, which is retried
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global:
            return f"{host} resolves to non-public address {address}"
    return None


def _failure_kind(error: requests.RequestException) -> FailureKind:
    if isinstance(error, requests.Timeout):
        return FailureKind.TIMEOUT
    if isinstance(error, requests.exceptions.SSLError):
        return FailureKind.TLS
    text = repr(error)
    if "NameResolutionError" in text or "getaddrinfo" in text or "Name or service not known" in text:
        return FailureKind.DNS
    return FailureKind.CONNECTION


class RequestsSender:
    def __init__(self, *, timeout_seconds: float = 8.0, allow_private_destinations: bool = False) -> None:
        self.timeout = timeout_seconds
        self.allow_private = allow_private_destinations
        self.session = requests.Session()
        self.session.trust_env = False  # never route deliveries through an ambient proxy
        self.session.headers["user-agent"] = USER_AGENT

    def send(self, url: str, headers: dict[str, str], body: bytes) -> SendResult:
        started = time.monotonic()

        def elapsed_ms() -> int:
            return int((time.monotonic() - started) * 1000)

        if not self.allow_private:
            reason = blocked_reason(url)
            if reason:
                return SendResult(None, elapsed_ms(), FailureKind.BLOCKED, reason)
        try:
            response = self.session.post(
                url,
                data=body,
                headers=headers,
                timeout=(min(3.0, self.timeout), self.timeout),
                allow_redirects=False,
                stream=True,
            )
        except requests.RequestException as error:
            return SendResult(None, elapsed_ms(), _failure_kind(error), type(error).__name__)
        try:
            excerpt = self._excerpt(response)
        except requests.RequestException as error:
            return SendResult(response.status_code, elapsed_ms(), _failure_kind(error), type(error).__name__)
        finally:
            response.close()
        latency = elapsed_ms()
        if latency > self.timeout * 1000:
            # Delivered means 2xx within the timeout for the whole request, not per socket read.
            return SendResult(
                response.status_code,
                latency,
                FailureKind.TOO_SLOW,
                "whole request exceeded the timeout",
                excerpt,
                response.headers.get("retry-after"),
            )
        return SendResult(response.status_code, latency, None, None, excerpt, response.headers.get("retry-after"))

    @staticmethod
    def _excerpt(response: requests.Response) -> str | None:
        chunk = response.raw.read(RESPONSE_EXCERPT_BYTES, decode_content=True)
        if not chunk:
            return None
        return chunk.decode(response.encoding or "utf-8", errors="replace")[:RESPONSE_EXCERPT_BYTES]
