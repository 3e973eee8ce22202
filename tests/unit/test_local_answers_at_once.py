"""The local stack's HTTP servers answer kept-alive connections at once (TCP_NODELAY on every accepted socket).

Python's `http.server` writes an answer's headers and its body in two writes. On a kept-alive connection Nagle's
algorithm then holds the body until the client acknowledges the headers, which the client delays by up to
40 ms: each answer of the local API (and of the demo consumer, which the delivery worker keeps a connection to)
took 40 ms more than its work. Timing it here would be a timed assertion; the tests read the socket option of
the connection each server answered on instead, which is what decides it.
"""

from __future__ import annotations

import io
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest
import requests

from local import gateway
from local.consumer import RECEIVED_PATH, DemoConsumer
from local.http_api import ApiServer, GatewayRequestHandler


def _nodelay_seen(handler: type[BaseHTTPRequestHandler], monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records TCP_NODELAY of every connection `handler` sets up, as the server left it."""
    seen: list[int] = []
    setup = handler.setup

    def recording_setup(self: BaseHTTPRequestHandler) -> None:
        setup(self)
        seen.append(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    monkeypatch.setattr(handler, "setup", recording_setup)
    return seen


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[ApiServer]:
    answer = gateway.GatewayResponse(200, {"content-type": "application/json"}, b"{}")
    monkeypatch.setattr(gateway, "handle", lambda *args: answer)
    server = ApiServer(0, gateway.AuthorizerCache(0))
    server.start()
    yield server
    server.stop()


def test_the_local_api_answers_without_nagles_delay(api: ApiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _nodelay_seen(GatewayRequestHandler, monkeypatch)
    with requests.Session() as http:
        for _ in range(3):  # one kept-alive connection
            assert http.get(api.url + "/v1/endpoints", timeout=5).status_code == 200
    assert len(seen) == 1
    assert seen[0] != 0


def test_the_demo_consumer_answers_without_nagles_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    consumer = DemoConsumer(0, [], out=io.StringIO())
    seen = _nodelay_seen(consumer.httpd.RequestHandlerClass, monkeypatch)
    thread = threading.Thread(target=consumer.httpd.serve_forever, daemon=True)
    thread.start()
    try:
        with requests.Session() as http:
            for _ in range(3):  # one kept-alive connection
                assert http.get(consumer.base_url + RECEIVED_PATH, timeout=5).status_code == 200
    finally:
        consumer.httpd.shutdown()
        consumer.httpd.server_close()
    assert len(seen) == 1
    assert seen[0] != 0
