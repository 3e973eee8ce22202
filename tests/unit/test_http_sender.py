"""The sender against a real server on 127.0.0.1: what it refuses, what it reads, how it fails."""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from hookrelay.adapters.http_sender import RequestsSender
from hookrelay.domain.addresses import EndpointPorts
from hookrelay.domain.classification import FailureKind
from tests.support.consumer import Reply, ScriptedConsumer


@pytest.fixture
def consumer() -> Iterator[ScriptedConsumer]:
    server = ScriptedConsumer()
    yield server
    server.close()


def port_of(consumer: ScriptedConsumer) -> int:
    return consumer.server.server_address[1]


DRIP_INTERVAL = 0.2


@dataclass
class DripServer:
    """Answers one request with `head` at once, then `dripped` one byte per DRIP_INTERVAL.

    With `warm_up`, it first answers a request with that response, then drips on the same connection.
    Between bytes it watches the connection, and stops as soon as the client has closed or shut it down.
    """

    head: bytes
    dripped: bytes
    warm_up: bytes = b""
    bytes_dripped: int = 0
    client_went_away: bool = False
    done: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.thread = threading.Thread(target=self._serve_one, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}/hook"

    def _serve_one(self) -> None:
        connection, _ = self.listener.accept()
        with connection:
            try:
                if self.warm_up:
                    self._read_request(connection)
                    connection.sendall(self.warm_up)
                self._read_request(connection)
                connection.sendall(self.head)
                for byte in self.dripped:
                    connection.sendall(bytes([byte]))
                    self.bytes_dripped += 1
                    readable, _, _ = select.select([connection], [], [], DRIP_INTERVAL)
                    if readable and not connection.recv(1):  # end of stream: the client shut the connection
                        self.client_went_away = True
                        break
            except (BrokenPipeError, ConnectionResetError):
                self.client_went_away = True
            except EOFError:
                pass  # the client never sent the request on this connection
        self.done.set()

    @staticmethod
    def _read_request(connection: socket.socket) -> None:
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = connection.recv(4096)
            if not chunk:
                raise EOFError
            received += chunk
        head, _, body = received.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1]) for line in head.lower().split(b"\r\n") if line.startswith(b"content-length")
        )
        while len(body) < length:
            body += connection.recv(4096)

    def close(self) -> None:
        self.done.wait(timeout=30)
        self.listener.close()


def test_posts_the_exact_bytes_with_the_given_headers(consumer: ScriptedConsumer) -> None:
    result = RequestsSender(allow_private_destinations=True).send(consumer.url, {"webhook-id": "evt_1"}, b'{"a":1}')
    assert (result.status_code, result.error) == (200, None)
    [request] = consumer.received
    assert request.body == b'{"a":1}' and request.headers["webhook-id"] == "evt_1"


@pytest.mark.parametrize("host", ["127.0.0.1", "169.254.169.254", "10.1.2.3", "[::1]", "192.168.0.1"])
def test_non_public_addresses_are_refused_outside_local_mode(consumer: ScriptedConsumer, host: str) -> None:
    result = RequestsSender(timeout_seconds=1).send(f"http://{host}:{port_of(consumer)}/hook", {}, b"{}")
    assert result.error is FailureKind.BLOCKED and result.status_code is None
    assert consumer.received == []


def test_a_name_that_resolves_to_any_private_address_is_refused(consumer: ScriptedConsumer) -> None:
    sender = RequestsSender(resolver=lambda host, port: ["93.184.216.34", "127.0.0.1"])
    result = sender.send(f"http://hooks.example.test:{port_of(consumer)}/hook", {}, b"{}")
    assert result.error is FailureKind.BLOCKED
    assert consumer.received == []


def test_a_blocked_attempt_does_not_name_the_address_the_host_resolved_to(consumer: ScriptedConsumer) -> None:
    """The attempt's error is shown to the tenant: naming the internal address would make the sender a DNS oracle."""
    sender = RequestsSender(resolver=lambda host, port: ["10.20.30.40"])
    result = sender.send(f"http://hooks.example.test:{port_of(consumer)}/hook", {}, b"{}")
    assert result.error is FailureKind.BLOCKED
    assert "not a public address" in (result.error_detail or "")
    assert "10.20.30.40" not in (result.error_detail or "") and "10.20" not in repr(result)


def test_the_connection_goes_to_the_vetted_address_with_the_original_host(consumer: ScriptedConsumer) -> None:
    lookups: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    sender = RequestsSender(allow_private_destinations=True, resolver=resolver)
    result = sender.send(f"http://hooks.example.test:{port_of(consumer)}/hook", {}, b"{}")
    assert result.status_code == 200
    assert lookups == ["hooks.example.test"]  # resolved once, and that answer was used
    assert consumer.received[0].headers["host"] == f"hooks.example.test:{port_of(consumer)}"


def test_dns_failure_is_a_dns_error() -> None:
    def resolver(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    result = RequestsSender(resolver=resolver).send("https://nowhere.example.test/hook?token=s3cret", {}, b"{}")
    assert result.error is FailureKind.DNS
    assert result.error_detail == "could not resolve host nowhere.example.test"


def test_connection_refused_is_a_connection_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    result = RequestsSender(allow_private_destinations=True).send(f"http://127.0.0.1:{closed_port}/", {}, b"{}")
    assert result.error is FailureKind.CONNECTION
    assert result.error_detail == f"could not connect to 127.0.0.1:{closed_port}: connection refused"


def test_a_tls_failure_says_so_in_words(consumer: ScriptedConsumer) -> None:
    """https to a plain-HTTP server: the handshake fails, and the record says which host and why, not a class name."""
    url = f"https://127.0.0.1:{port_of(consumer)}/hook"
    result = RequestsSender(allow_private_destinations=True).send(url, {}, b"{}")
    assert result.error is FailureKind.TLS
    assert (result.error_detail or "").startswith(f"TLS handshake with 127.0.0.1:{port_of(consumer)} failed")
    assert "Error" not in (result.error_detail or "")


def test_redirects_are_not_followed(consumer: ScriptedConsumer) -> None:
    consumer.queue([Reply(301, headers=(("location", consumer.url + "/elsewhere"),))])
    result = RequestsSender(allow_private_destinations=True).send(consumer.url, {}, b"{}")
    assert result.status_code == 301
    assert [r.path for r in consumer.received] == ["/hook"]


def test_a_hang_past_the_timeout_is_a_timeout(consumer: ScriptedConsumer) -> None:
    consumer.queue([Reply(200, delay=2.0)])
    result = RequestsSender(timeout_seconds=0.5, allow_private_destinations=True).send(consumer.url, {}, b"{}")
    assert result.error is FailureKind.TIMEOUT and result.status_code is None


def test_the_response_excerpt_is_capped_at_1_kib(consumer: ScriptedConsumer) -> None:
    consumer.queue([Reply(500, body=b"x" + "é".encode() * 4000)])  # the cap falls inside a character
    result = RequestsSender(allow_private_destinations=True).send(consumer.url, {}, b"{}")
    assert result.status_code == 500
    assert 1000 < len(result.response_excerpt.encode()) <= 1024
    assert result.response_excerpt.startswith("xé")


@pytest.mark.parametrize(("body_bytes", "connections"), [(4_000, 1), (40_000, 3)])
def test_a_connection_is_kept_alive_for_the_next_webhook_unless_its_body_is_too_large_to_read_out(
    body_bytes: int, connections: int
) -> None:
    consumer = ScriptedConsumer(default=Reply(200, body=b"x" * body_bytes), keep_alive=True)
    try:
        sender = RequestsSender(allow_private_destinations=True)
        results = [sender.send(consumer.url, {}, b"{}") for _ in range(3)]
        assert [result.status_code for result in results] == [200, 200, 200]
        assert len({request.client for request in consumer.received}) == connections
    finally:
        consumer.close()


def test_retry_after_is_passed_on(consumer: ScriptedConsumer) -> None:
    consumer.queue([Reply(429, headers=(("retry-after", "120"),))])
    result = RequestsSender(allow_private_destinations=True).send(consumer.url, {}, b"{}")
    assert (result.status_code, result.retry_after) == (429, "120")


DRIPPED_BODY = b"x" * 50


@pytest.mark.parametrize(
    ("head", "dripped"),
    [
        pytest.param(
            b"", b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n" + b"x-pad: " + b"p" * 30 + b"\r\n\r\nok", id="headers"
        ),
        pytest.param(b"HTTP/1.1 200 OK\r\ncontent-length: 50\r\n\r\n", DRIPPED_BODY, id="body"),
    ],
)
def test_a_response_dripped_past_the_timeout_is_cut_off_at_the_deadline(head: bytes, dripped: bytes) -> None:
    # Each byte arrives well within the per-read timeout; only a deadline on the whole request stops this.
    server = DripServer(head, dripped)
    try:
        result = RequestsSender(timeout_seconds=1, allow_private_destinations=True).send(server.url, {}, b"{}")
        assert server.done.wait(timeout=30)
    finally:
        server.close()
    assert result.error is FailureKind.TIMEOUT
    assert server.client_went_away and server.bytes_dripped < len(dripped)


def test_a_kept_alive_connection_is_cut_off_at_the_deadline_too() -> None:
    server = DripServer(
        b"HTTP/1.1 200 OK\r\ncontent-length: 50\r\n\r\n",
        DRIPPED_BODY,
        warm_up=b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
    )
    sender = RequestsSender(timeout_seconds=1, allow_private_destinations=True)
    try:
        first = sender.send(server.url, {}, b"{}")
        second = sender.send(server.url, {}, b"{}")  # the same connection, reused from the pool
        assert server.done.wait(timeout=30)
    finally:
        server.close()
    assert (first.status_code, first.error) == (200, None)
    assert second.error is FailureKind.TIMEOUT
    assert server.client_went_away and server.bytes_dripped < len(DRIPPED_BODY)


# --- The port and host rule, again at every attempt (a URL may have been stored before the rule) ---


def test_a_stored_url_on_a_refused_port_is_blocked_before_any_lookup() -> None:
    lookups: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["93.184.216.34"]

    result = RequestsSender(timeout_seconds=1, resolver=resolver).send("https://hooks.example.test:22/", {}, b"{}")
    assert result.error is FailureKind.BLOCKED and result.status_code is None
    assert "must not use port 22" in (result.error_detail or "")
    assert lookups == []  # nothing resolved, nothing connected


def test_a_stored_url_on_a_port_the_narrow_policy_refuses_is_blocked() -> None:
    sender = RequestsSender(
        timeout_seconds=1, endpoint_ports=EndpointPorts.NARROW, resolver=lambda host, port: ["93.184.216.34"]
    )
    result = sender.send("https://hooks.example.test:9311/", {}, b"{}")
    assert result.error is FailureKind.BLOCKED and "443 or 8443" in (result.error_detail or "")


def test_a_trailing_dot_literal_is_resolved_and_judged_as_the_address(consumer: ScriptedConsumer) -> None:
    lookups: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return [host]

    result = RequestsSender(timeout_seconds=1, resolver=resolver).send(
        f"http://127.0.0.1.:{port_of(consumer)}/hook", {}, b"{}"
    )
    assert result.error is FailureKind.BLOCKED and "not a public address" in (result.error_detail or "")
    assert lookups == ["127.0.0.1"] and consumer.received == []


def test_a_host_of_two_trailing_dots_is_blocked() -> None:
    result = RequestsSender(timeout_seconds=1, resolver=lambda host, port: ["93.184.216.34"]).send(
        "https://hooks.example.test../", {}, b"{}"
    )
    assert result.error is FailureKind.BLOCKED and "must name a host" in (result.error_detail or "")


def test_local_mode_holds_a_non_loopback_destination_to_the_port_policy() -> None:
    sender = RequestsSender(timeout_seconds=1, allow_private_destinations=True, resolver=lambda h, p: ["10.1.2.3"])
    result = sender.send("http://consumer.example.test:22/", {}, b"{}")
    assert result.error is FailureKind.BLOCKED and "must not use port 22" in (result.error_detail or "")


def test_local_mode_lets_loopback_use_any_port_whatever_the_policy(consumer: ScriptedConsumer) -> None:
    """The demo consumer (local/consumer.py) and the tests' listen on ephemeral ports, above any narrow policy's."""
    sender = RequestsSender(allow_private_destinations=True, endpoint_ports=EndpointPorts.NARROW)
    result = sender.send(consumer.url, {}, b"{}")
    assert (result.status_code, result.error) == (200, None)
    refused = RequestsSender(timeout_seconds=1, allow_private_destinations=True).send("http://127.0.0.1:1/", {}, b"{}")
    assert refused.error is FailureKind.CONNECTION  # a privileged loopback port is tried (nothing listens there)
