"""A scripted webhook consumer on 127.0.0.1: records every request, answers from a script."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b"ok"
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0  # seconds to wait before answering (a hang, when longer than the timeout)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float
    client: tuple[str, int] = ("", 0)  # the connection's address: the same on a kept-alive connection


@dataclass
class ScriptedConsumer:
    """Answers with the scripted replies in order, then with `default` forever."""

    script: deque[Reply] = field(default_factory=deque)
    default: Reply = field(default_factory=Reply)
    received: list[Received] = field(default_factory=list)
    answers: list[int] = field(default_factory=list)  # the status answered to each request received, in order
    keep_alive: bool = False  # HTTP/1.1, connections kept open between requests (else HTTP/1.0: one per request)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        consumer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if self.keep_alive else "HTTP/1.0"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                with consumer._lock:
                    consumer.received.append(
                        Received(
                            self.path,
                            {k.lower(): v for k, v in self.headers.items()},
                            body,
                            time.time(),
                            self.client_address,
                        )
                    )
                    reply = consumer.script.popleft() if consumer.script else consumer.default
                    consumer.answers.append(reply.status)
                if reply.delay:
                    time.sleep(reply.delay)
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers:
                        self.send_header(name, value)
                    self.send_header("content-length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the sender gave up (timeout): exactly what a hang test wants

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def queue(self, replies: Iterable[Reply]) -> None:
        with self._lock:
            self.script.extend(replies)

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.received) >= count:
                    return list(self.received)
            time.sleep(0.02)
        raise AssertionError(f"expected {count} requests, got {len(self.received)} within {timeout}s")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
