"""The API on localhost: each HTTP request becomes an API Gateway (HTTP API, payload 2.0) event.

All the API Gateway behaviour lives in `local.gateway`; this is only the socket side.
"""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from local import gateway

log = logging.getLogger("hookrelay.local.api")

# API Gateway refuses bigger payloads (10 MB) before any function runs; the API's own limit is smaller.
MAX_REQUEST_BYTES = 10 * 1024 * 1024


class GatewayRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "hookrelay-local"
    # The answer leaves in two writes (the headers, then the body). On a kept-alive connection, once Linux has
    # left its quick-ACK start, Nagle's algorithm holds the body until the client ACKs the headers, which the
    # client delays by 40 ms: every answer took 40 ms more than its work (an idle POST /v1/events, 60 ms
    # against 10). API Gateway sends at once; so does this, with TCP_NODELAY.
    disable_nagle_algorithm = True

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_REQUEST_BYTES:
            self._answer(
                gateway.GatewayResponse(
                    413, {"content-type": "application/json"}, b'{"message":"Request Entity Too Large"}'
                )
            )
            self.close_connection = True
            return
        body = self.rfile.read(length) if length else b""
        url = urlsplit(self.path)
        headers: dict[str, str] = {}
        for name, value in self.headers.items():  # repeated headers are joined with commas, as API Gateway does
            key = name.lower()
            headers[key] = f"{headers[key]},{value}" if key in headers else value
        try:
            cache = self.server.authorizer_cache if isinstance(self.server, GatewayServer) else None
            response = gateway.handle(self.command, url.path, url.query, headers, body, cache)
        except Exception:  # what API Gateway answers when the integration fails
            log.exception("%s %s failed", self.command, url.path)
            response = gateway.GatewayResponse(
                500, {"content-type": "application/json"}, b'{"message":"Internal Server Error"}'
            )
        self._answer(response)

    def _answer(self, response: gateway.GatewayResponse) -> None:
        self.send_response(response.status)
        for name, value in response.headers.items():
            if name not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        self.send_header("content-length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve

    def log_message(self, format: str, *args: object) -> None:
        log.info("%s %s", self.address_string(), format % args)


class GatewayServer(ThreadingHTTPServer):
    daemon_threads = True
    authorizer_cache: gateway.AuthorizerCache


class ApiServer:
    """Serves the API on 127.0.0.1:`port` (0: any free port) on a background thread; the authorizer's answers
    cached as API Gateway caches them (`authorizer_cache`; one of 0 s keeps nothing)."""

    def __init__(self, port: int, authorizer_cache: gateway.AuthorizerCache) -> None:
        self.httpd = GatewayServer(("127.0.0.1", port), GatewayRequestHandler)
        self.httpd.authorizer_cache = authorizer_cache
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="api", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
