"""moto's services on 127.0.0.1 over kept-alive HTTP/1.1 connections: the AWS endpoint the local stack's calls reach.

moto ships its server as werkzeug's development server, which ends every connection after one answer (its
`Connection: close` is unconditional), so each of the stack's AWS calls paid for a new connection on both sides
(the client's connect and its connection pool's bookkeeping, the server's accept and a new handler), and each
worker's botocore connection pool held nothing. This serves the same WSGI application (moto's
`DomainDispatcherApplication`, which finds the service and then its Flask app) with the standard library's
`http.server`, whose handler keeps a connection open for as long as an HTTP/1.1 client does: botocore's pool
reuses it for the worker's next call. One thread per connection; a long poll waits in its connection's thread.

For the JSON protocols the stack calls (DynamoDB, SQS, Step Functions, found by their target header), the
request goes straight to the service's response class (`BaseResponse.dispatch`, what moto's Flask view
calls), skipping moto's service lookup and Flask's request and response machinery; anything else (moto's own
API, query-protocol calls such as SNS's `Publish`) goes through the WSGI application as before.
`one_at_a_time`: requests are answered in turn, never two at once (DynamoDB's server: moto checks a
condition and then writes, so two conditional writes at once could both pass).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from botocore.exceptions import ClientError
from moto.dynamodb.responses import DynamoHandler
from moto.moto_server.werkzeug_app import BackendRequest, DomainDispatcherApplication, create_backend_app
from moto.sqs.responses import SQSResponse
from moto.stepfunctions.responses import StepFunctionResponse

log = logging.getLogger("hookrelay.local.moto")

# Connections that may wait to be accepted at once: more than every worker the local stack can run (see
# tests/unit/test_local_aws_servers.py). With socketserver's default, 5, a tenth of a loaded run's ingest requests
# took over a second (p50 119 ms, p90 1,115 ms), the mark of the kernel's one-second SYN retry when a listen queue
# is full; with 128 that tail was gone.
LISTEN_BACKLOG = 128

Dispatch = Callable[..., Any]  # a response class's `dispatch(request, full_url, headers)`


def json_dispatchers() -> dict[str, Dispatch]:
    """The response class of each JSON-protocol service the stack calls, by the prefix of its target header."""
    return {
        "DynamoDB_20120810": DynamoHandler.dispatch,
        "AmazonSQS": SQSResponse.dispatch,
        "AWSStepFunctions": StepFunctionResponse.dispatch,
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG
    app: Callable[..., Iterable[bytes]]
    dispatchers: dict[str, Dispatch]
    turn: contextlib.AbstractContextManager[Any]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # the connection stays open for the client's next request
    # An answer leaves in two writes (headers, then body); on a kept-alive connection Nagle's algorithm would
    # hold the second until the client ACKs the first, which it delays by 40 ms.
    disable_nagle_algorithm = True
    server: _Server

    def _serve(self) -> None:
        if self.headers.get("transfer-encoding"):  # botocore sends the JSON and query protocols with a length
            self._answer(411, [("content-type", "text/plain")], [b"a content-length is required"])
            self.close_connection = True
            return
        length = int(self.headers.get("content-length") or 0)
        environ = self._environ(self.rfile.read(length) if length else b"")
        try:
            with self.server.turn:
                status, headers, body = self._respond(environ)
        except Exception as error:  # a fault of moto's: answered, as werkzeug's server answers it, not a dropped line
            log.exception("moto failed on %s %s", self.command, self.path)
            message = json.dumps({"__type": "InternalFailure", "message": f"{type(error).__name__}: {error}"})
            status, headers, body = 500, [("content-type", "application/x-amz-json-1.0")], [message.encode()]
        self._answer(status, headers, body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve

    def _respond(self, environ: dict[str, Any]) -> tuple[int, list[tuple[str, str]], Iterable[bytes]]:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        dispatch = self.server.dispatchers.get(target.partition(".")[0]) if target else None
        if dispatch is not None:
            return _dispatched(dispatch, environ)
        answer: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
            answer["status"], answer["headers"] = int(status.split(" ", 1)[0]), headers

        chunks = self.server.app(environ, start_response)
        try:
            body = b"".join(chunks)
        finally:
            if hasattr(chunks, "close"):
                chunks.close()
        return answer["status"], answer["headers"], [body]

    def _environ(self, body: bytes) -> dict[str, Any]:
        """The WSGI environment of this request (PEP 3333), as werkzeug's server builds it."""
        path, _, query = self.path.partition("?")
        host, port = self.server.server_address[:2]
        environ: dict[str, Any] = {
            "REQUEST_METHOD": self.command,
            "SCRIPT_NAME": "",
            "PATH_INFO": unquote(path, "latin-1"),
            "QUERY_STRING": query,
            "RAW_URI": self.path,
            "REQUEST_URI": self.path,
            "SERVER_NAME": str(host),
            "SERVER_PORT": str(port),
            "SERVER_PROTOCOL": self.request_version,
            "REMOTE_ADDR": self.client_address[0],
            "CONTENT_LENGTH": str(len(body)),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        for name, value in self.headers.items():
            key = name.upper().replace("-", "_")
            if "_" in name:  # as werkzeug's server: X_Foo could otherwise pass itself off as X-Foo
                continue
            if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
                key = f"HTTP_{key}"
            environ[key] = f"{environ[key]},{value}" if key in environ and key.startswith("HTTP_") else value
        return environ

    def _answer(self, status: int, headers: list[tuple[str, str]], body: Iterable[bytes]) -> None:
        data = b"".join(body)
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in ("content-length", "connection", "transfer-encoding", "date", "server"):
                self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per AWS call is noise, not information


def _dispatched(dispatch: Dispatch, environ: dict[str, Any]) -> tuple[int, list[tuple[str, str]], Iterable[bytes]]:
    """What moto's Flask view (`convert_to_flask_response`) does with a request, without Flask around it."""
    request = BackendRequest(environ)
    try:
        result = dispatch(request, request.raw_url, dict(request.headers))
    except ClientError as error:
        result = 400, {}, error.response["Error"]["Message"]
    status, headers, content = result if len(result) == 3 else (200, {}, result)
    body = content.encode() if isinstance(content, str) else bytes(content or b"")
    return int(status), [(str(k), str(v)) for k, v in dict(headers).items()], [body]


class MotoServer:
    """moto's WSGI app on 127.0.0.1:`port` (0: any free port), served on background threads; the interface of moto's
    own `ThreadedMotoServer`."""

    def __init__(self, port: int, *, one_at_a_time: bool = False) -> None:
        self.server = _Server(("127.0.0.1", port), _Handler)
        self.server.app = DomainDispatcherApplication(create_backend_app)
        self.server.dispatchers = json_dispatchers()
        self.server.turn = threading.Lock() if one_at_a_time else contextlib.nullcontext()
        self.thread = threading.Thread(target=self.server.serve_forever, name="moto", daemon=True)

    def get_host_and_port(self) -> tuple[str, int]:
        host, port = self.server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
