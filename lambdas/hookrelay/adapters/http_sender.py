"""POSTing a signed webhook with `requests`: bounded in time and in what is read, redirects never followed.

Outside local mode the delivery path refuses private, loopback, link-local (metadata) and other
non-public addresses. The check is made on the addresses DNS returns, and the connection is then made
to exactly the address that was checked (the Host header and TLS name stay the hostname), so a DNS
answer that changes between the check and the connect (rebinding) cannot reach an internal address.
The host and port are held to registration's rule again on every attempt, local mode included (where only
loopback may use any port): a URL stored before the rule changed is refused, not sent.

The timeout is a deadline for the whole request (connect, TLS, send, headers and the capped body read),
not requests' per-read timeout, which a server dripping a byte at a time never trips. At the deadline a
watchdog shuts down the attempt's socket, which wakes whatever read or write is blocked on it.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, urlsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from hookrelay.domain.addresses import (
    DEFAULT_ENDPOINT_PORTS,
    NOT_PUBLIC,
    SCHEME_PORTS,
    EndpointPorts,
    check_port,
    checked_host,
    is_loopback_address,
    is_public_address,
)
from hookrelay.domain.classification import ATTEMPT_TIMEOUT_SECONDS, FailureKind, describe_failure
from hookrelay.domain.errors import InvalidRequest
from hookrelay.domain.models import RESPONSE_EXCERPT_BYTES
from hookrelay.services.ports import SendResult

if TYPE_CHECKING:  # types-requests' names for what build_connection_pool_key_attributes returns
    from requests.adapters import _HostParams, _PoolKwargs

    class _PinnedPoolKwargs(_PoolKwargs, total=False):
        """urllib3 takes these pool keys too; the stub's TypedDict lists only those requests itself sets."""

        server_hostname: str
        assert_hostname: str


USER_AGENT = "hookrelay/0.1 (+webhooks)"
# What more of a response body is read (and discarded) after the excerpt so that its connection is kept alive for
# the endpoint's next webhook (urllib3 returns a connection to the session's pool once its body is read out; one
# closed with body unread is dropped). A larger body is not worth the wait: that connection is dropped.
KEEP_ALIVE_READ_OUT_BYTES = 16 * 1024

Resolver = Callable[[str, int], list[str]]


class BlockedDestination(requests.RequestException):
    """The endpoint's host resolves to an address the delivery path must not reach, or its URL breaks the rule."""


def system_resolver(host: str, port: int) -> list[str]:
    return [str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]


class Deadline:
    """One attempt's hard deadline: when it passes, every socket the attempt uses is shut down.

    The watchdog holds its own duplicate of each socket's descriptor, so it can shut the connection down
    whatever the HTTP stack has done with its socket object meanwhile (a TLS wrap detaches the original).
    """

    _current = threading.local()  # the deadline of the attempt running on this thread, if any

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._lock = threading.Lock()
        self._guards: dict[int, socket.socket] = {}
        self._watchdog = threading.Timer(seconds, self._expire)
        self._watchdog.daemon = True

    def __enter__(self) -> Deadline:
        Deadline._current.deadline = self
        self._watchdog.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._watchdog.cancel()
        Deadline._current.deadline = None
        with self._lock:
            for guard in self._guards.values():
                guard.close()
            self._guards.clear()

    @classmethod
    def watch_current(cls, sock: socket.socket) -> None:
        deadline: Deadline | None = getattr(cls._current, "deadline", None)
        if deadline is not None:
            deadline.watch(sock)

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            descriptor = sock.fileno()
            if descriptor < 0 or descriptor in self._guards:
                return
            guard = socket.fromfd(descriptor, sock.family, sock.type)  # a duplicate descriptor, ours to close
            self._guards[descriptor] = guard
            if self.expired:
                _shut_down(guard)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for guard in self._guards.values():
                _shut_down(guard)


def _shut_down(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)  # unlike close(), wakes a recv blocked on the connection
    except OSError:
        pass  # already gone


class _DeadlineWatchedConnection(HTTPConnection):
    """Puts its socket under the running attempt's deadline: when opened (before any TLS handshake), and
    when a kept-alive connection is reused for a new request."""

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        Deadline.watch_current(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        if self.sock is not None:
            Deadline.watch_current(self.sock)
        super().request(*args, **kwargs)


class _DeadlineWatchedHTTPSConnection(_DeadlineWatchedConnection, HTTPSConnection):
    pass


class _DeadlineWatchedPool(HTTPConnectionPool):
    ConnectionCls = _DeadlineWatchedConnection


class _DeadlineWatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _DeadlineWatchedHTTPSConnection


class PinnedAddressAdapter(HTTPAdapter):
    """Resolves once, vets the answer, and connects to that very address."""

    def __init__(
        self, resolver: Resolver, *, allow_private: bool, ports: EndpointPorts = DEFAULT_ENDPOINT_PORTS
    ) -> None:
        super().__init__(max_retries=0)
        self.resolver = resolver
        self.allow_private = allow_private
        self.ports = ports
        self._pinned: weakref.WeakKeyDictionary[requests.PreparedRequest, str] = weakref.WeakKeyDictionary()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _DeadlineWatchedPool, "https": _DeadlineWatchedHTTPSPool}

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        if request.url is None:  # set by prepare(); a Session always prepares before it sends
            raise requests.exceptions.InvalidURL("the request has no URL")
        parts = urlsplit(request.url)
        try:
            self._pinned[request] = self._vetted_address(parts)
        except InvalidRequest as refused:  # registration's rule, which the stored URL may predate
            raise BlockedDestination(refused.detail) from None
        request.headers["Host"] = parts.netloc.rpartition("@")[2]
        return super().send(request, *args, **kwargs)

    def _vetted_address(self, parts: SplitResult) -> str:
        """The address to connect to, once the host, the port and every address the host resolves to pass."""
        host = checked_host(parts.hostname or "")
        if not self.allow_private:  # before the lookup: a refused port is not even resolved
            check_port(parts.scheme, parts.port, self.ports)
        addresses = self.resolver(host, parts.port or SCHEME_PORTS.get(parts.scheme, 443))  # gaierror: DNS failure
        if self.allow_private:  # local mode: loopback on any port (the demo consumer listens on an ephemeral one)
            check_port(parts.scheme, parts.port, self.ports, any_port=all(map(is_loopback_address, addresses)))
        elif not all(map(is_public_address, addresses)):
            raise BlockedDestination(f"{host} resolves to an address that is {NOT_PUBLIC}")
        return addresses[0]

    def build_connection_pool_key_attributes(
        self, request: requests.PreparedRequest, verify: bool | str, cert: str | tuple[str, str] | None = None
    ) -> tuple[_HostParams, _PoolKwargs]:
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(request, verify, cert)
        hostname = host_params["host"]
        host_params["host"] = self._pinned[request]
        if host_params["scheme"] == "https":
            # SNI and certificate checks stay on the name
            pinned: _PinnedPoolKwargs = {**pool_kwargs, "server_hostname": hostname, "assert_hostname": hostname}
            return host_params, pinned
        return host_params, pool_kwargs


def _read_out(response: requests.Response) -> None:
    """Read the rest of a small body, within the attempt's deadline, so that its connection goes back to the pool."""
    length = response.headers.get("content-length", "")
    if length.isdigit() and int(length) <= RESPONSE_EXCERPT_BYTES + KEEP_ALIVE_READ_OUT_BYTES:
        response.raw.read(KEEP_ALIVE_READ_OUT_BYTES, decode_content=False)


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


def _causes(error: BaseException) -> Iterator[BaseException]:
    """The error and what it wraps (requests wraps urllib3's, which wraps the socket's), outermost first."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        reason = getattr(current, "reason", None)  # urllib3's MaxRetryError and NewConnectionError keep it here
        nested = reason if isinstance(reason, BaseException) else None
        arg = next((a for a in getattr(current, "args", ()) if isinstance(a, BaseException)), None)
        current = nested or arg or current.__cause__ or current.__context__


def _cause(kind: FailureKind, error: BaseException) -> str | None:
    """The few causes worth naming, in words (the exception's class names mean nothing to a consumer)."""
    for cause in _causes(error):
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, ConnectionResetError):
            return "connection reset"
        if kind is FailureKind.TLS and isinstance(cause, ssl.SSLError):
            reason = getattr(cause, "verify_message", None) or cause.reason or ""  # e.g. WRONG_VERSION_NUMBER
            return str(reason).lower().replace("_", " ") or None
        if kind is FailureKind.TIMEOUT and isinstance(cause, requests.ConnectTimeout):
            return "connecting timed out"
    return None


def _failure_detail(kind: FailureKind, url: str, error: BaseException) -> str:
    host = urlsplit(url).netloc.rpartition("@")[2]  # never the credentials, path or query
    return describe_failure(kind, host, _cause(kind, error))


class RequestsSender:
    def __init__(
        self,
        *,
        timeout_seconds: float = ATTEMPT_TIMEOUT_SECONDS,
        allow_private_destinations: bool = False,
        endpoint_ports: EndpointPorts = DEFAULT_ENDPOINT_PORTS,
        resolver: Resolver = system_resolver,
    ) -> None:
        self.timeout = timeout_seconds
        self.session = requests.Session()
        self.session.trust_env = False  # never route deliveries through an ambient proxy
        self.session.headers["user-agent"] = USER_AGENT
        adapter = PinnedAddressAdapter(resolver, allow_private=allow_private_destinations, ports=endpoint_ports)
        self.session.mount("https://", adapter)
        self.session.mount("http://", adapter)

    def send(self, url: str, headers: dict[str, str], body: bytes, timeout: float | None = None) -> SendResult:
        started = time.monotonic()
        limit = self.timeout if timeout is None else min(timeout, self.timeout)

        def elapsed_ms() -> int:
            return int((time.monotonic() - started) * 1000)

        with Deadline(limit) as deadline:
            status_code: int | None = None
            try:
                response = self.session.post(
                    url,
                    data=body,
                    headers=headers,
                    timeout=(min(3.0, limit), limit),
                    allow_redirects=False,
                    stream=True,
                )
                status_code = response.status_code
                retry_after = response.headers.get("retry-after")
                try:
                    excerpt = self._excerpt(response)
                    _read_out(response)
                finally:
                    response.close()
            except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as error:
                # requests' own read timeout is the same limit as the watchdog's: whichever fired first, an error at
                # the limit is the deadline's (as for a response finished past it, below).
                if deadline.expired or elapsed_ms() >= limit * 1000:
                    return self._past_deadline(status_code, elapsed_ms(), limit)
                kind = _failure_kind(error)
                detail = str(error) if kind is FailureKind.BLOCKED else _failure_detail(kind, url, error)
                return SendResult(status_code, elapsed_ms(), kind, detail)
        latency = elapsed_ms()
        if deadline.expired or latency > limit * 1000:  # the last bytes raced the watchdog: late all the same
            return self._past_deadline(status_code, latency, limit, excerpt)
        return SendResult(status_code, latency, None, None, excerpt, retry_after)

    def _past_deadline(
        self, status_code: int | None, latency_ms: int, limit: float, excerpt: str | None = None
    ) -> SendResult:
        # A failure even when a status line arrived: delivered means a whole 2xx response within the timeout.
        detail = f"no complete response within the {limit:.3g} s deadline"
        return SendResult(status_code, latency_ms, FailureKind.TIMEOUT, detail, excerpt)

    @staticmethod
    def _excerpt(response: requests.Response) -> str | None:
        chunk = response.raw.read(RESPONSE_EXCERPT_BYTES, decode_content=True)
        if not chunk:
            return None
        text = chunk.decode(response.encoding or "utf-8", errors="replace")
        # Stored as UTF-8: re-cut on a character boundary so the excerpt never exceeds the cap in bytes.
        return text.encode()[:RESPONSE_EXCERPT_BYTES].decode(errors="ignore")
