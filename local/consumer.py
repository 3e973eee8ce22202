"""A demo webhook consumer on 127.0.0.1: verifies, deduplicates, and can be told to fail.

    python -m local.consumer --port 9000 --secret whsec_…

It does what the README asks of a real consumer: verify the Standard Webhooks signature with the
`standardwebhooks` library, drop a `webhook-id` it has already processed, answer 2xx. To watch the
retry behaviour it can instead answer 500, hang, answer 429 with `Retry-After`, or 410, switched at
runtime:

    curl -X POST http://127.0.0.1:9000/_control -d '{"mode": "fail"}'    # ok | fail | hang | 429 | 410
    curl http://127.0.0.1:9000/_received                                  # what it accepted, and every request

Webhooks may be posted to any other path. One line per request is printed on stdout.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TextIO

from standardwebhooks import Webhook, WebhookVerificationError

from local.processes import wait_for_signal

CONTROL_PATH = "/_control"
RECEIVED_PATH = "/_received"
MODES = ("ok", "fail", "hang", "429", "410")


@dataclass
class Request:
    """One request as it arrived, and what the consumer answered."""

    webhook_id: str | None
    at: float
    mode: str
    verified: bool
    duplicate: bool
    answered: int | None  # None: hung up without answering
    body: str  # as received, with the signature headers, so anyone can check the verification
    signature_headers: dict[str, str]


@dataclass
class Accepted:
    """One event processed: verified, first time its webhook-id was seen."""

    webhook_id: str
    at: float
    payload: Any


def checked_secret(secret: str) -> str:
    try:
        Webhook(secret)
    except Exception as error:  # the library raises whatever base64 decoding raises
        raise ValueError(f"not a signing secret (whsec_…): {error}") from None
    return secret


@dataclass
class ConsumerState:
    secrets: list[str]
    mode: str = "ok"
    retry_after: int = 2
    hang_seconds: float = 30.0
    requests: list[Request] = field(default_factory=list)
    accepted: dict[str, Accepted] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    mode_changed: threading.Event = field(default_factory=threading.Event)

    def control(self, change: dict[str, Any]) -> None:
        mode = change.get("mode", self.mode)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")
        with self.lock:
            self.mode = mode
            self.retry_after = int(change.get("retry_after", self.retry_after))
            if change.get("secret"):
                self.secrets = [checked_secret(str(change["secret"]))]
            self.mode_changed.set()
            self.mode_changed = threading.Event()

    def verify(self, body: bytes, headers: dict[str, str]) -> Any | None:
        for secret in self.secrets:
            try:
                return Webhook(secret).verify(body, headers)
            except WebhookVerificationError:
                continue
        return None

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "mode": self.mode,
                "retry_after": self.retry_after,
                "has_secret": bool(self.secrets),
                "events": [asdict(accepted) for accepted in self.accepted.values()],
                "requests": [asdict(request) for request in self.requests],
            }


def make_handler(state: ConsumerState, out: TextIO) -> type[BaseHTTPRequestHandler]:
    class ConsumerHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # see local.http_api: no 40 ms stall per answer on a kept-alive connection

        def do_GET(self) -> None:
            if self.path.split("?")[0] == RECEIVED_PATH:
                self._reply(200, state.snapshot())
            else:
                self._reply(404, {"error": "webhooks are POSTed; GET /_received lists them"})

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            if self.path.split("?")[0] == CONTROL_PATH:
                self._control(body)
            else:
                self._webhook(body)

        def _control(self, body: bytes) -> None:
            try:
                state.control(json.loads(body or b"{}"))
            except (ValueError, TypeError) as error:
                self._reply(400, {"error": str(error)})
                return
            snapshot = state.snapshot()
            self._reply(200, {"mode": snapshot["mode"], "retry_after": snapshot["retry_after"]})
            print(f"{_clock()}  mode is now {snapshot['mode']}", file=out, flush=True)

        def _webhook(self, body: bytes) -> None:
            headers = {name.lower(): value for name, value in self.headers.items()}
            webhook_id = headers.get("webhook-id")
            payload = state.verify(body, headers)
            with state.lock:
                mode, retry_after, mode_changed = state.mode, state.retry_after, state.mode_changed
                duplicate = payload is not None and webhook_id in state.accepted
                status, note = self._decide(mode, payload, duplicate, retry_after)
                if status == 200 and not duplicate and webhook_id:
                    state.accepted[webhook_id] = Accepted(webhook_id, time.time(), payload)
                signature_headers = {name: value for name, value in headers.items() if name.startswith("webhook-")}
                request = Request(
                    webhook_id,
                    time.time(),
                    mode,
                    payload is not None,
                    duplicate,
                    status,
                    body.decode(errors="replace"),
                    signature_headers,
                )
                state.requests.append(request)
            kind = payload.get("type", "?") if isinstance(payload, dict) else "?"
            print(f"{_clock()}  {webhook_id}  {kind}  -> {status or 'no answer'}  ({note})", file=out, flush=True)
            if status is None:
                mode_changed.wait(state.hang_seconds)  # hold the connection; the sender's timeout ends it
                self.close_connection = True
                return
            headers_out = {"retry-after": str(retry_after)} if status == 429 else {}
            self._reply(status, {"ok": status == 200}, headers_out)

        @staticmethod
        def _decide(mode: str, payload: Any, duplicate: bool, retry_after: int) -> tuple[int | None, str]:
            if mode == "fail":
                return 500, "told to fail"
            if mode == "hang":
                return None, "told to hang"
            if mode == "429":
                return 429, f"told to throttle, Retry-After {retry_after}"
            if mode == "410":
                return 410, "told it is gone"
            if not state.secrets:
                return 503, 'no secret yet: start with --secret or POST /_control {"secret": …}'
            if payload is None:
                return 401, "signature did not verify"
            if duplicate:
                return 200, "duplicate webhook-id, already processed"
            return 200, "verified"

        def _reply(self, status: int, document: Any, headers: dict[str, str] | None = None) -> None:
            raw = json.dumps(document).encode()
            try:
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the sender gave up (its timeout): nothing to do

        def log_message(self, format: str, *args: object) -> None:
            pass  # one line per webhook is printed by _webhook

    return ConsumerHandler


def _clock() -> str:
    return time.strftime("%H:%M:%S")


class DemoConsumer:
    def __init__(self, port: int, secrets: list[str], *, mode: str = "ok", out: TextIO = sys.stdout) -> None:
        self.state = ConsumerState(secrets=[checked_secret(secret) for secret in secrets])
        self.state.control({"mode": mode})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), make_handler(self.state, out))
        self.httpd.daemon_threads = True  # a hanging answer never holds up stopping

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def serve_until_signal(self) -> None:
        thread = threading.Thread(target=self.httpd.serve_forever, name="consumer", daemon=True)
        thread.start()
        wait_for_signal(signal.SIGINT, signal.SIGTERM)
        self.httpd.shutdown()
        self.httpd.server_close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local.consumer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=9000, help="listen on 127.0.0.1:PORT (0: any free port)")
    parser.add_argument(
        "--secret", action="append", default=[], help="the endpoint's signing secret, whsec_… (repeat for rotation)"
    )
    parser.add_argument("--mode", choices=MODES, default="ok", help="how to answer at first (default ok)")
    parser.add_argument("--json", action="store_true", help='print one line {"url": …, "control_url": …} first')
    args = parser.parse_args(argv)
    try:
        consumer = DemoConsumer(args.port, args.secret, mode=args.mode)
    except ValueError as error:
        parser.error(str(error))
    except OSError as error:
        print(f"could not listen on 127.0.0.1:{args.port}: {error}", file=sys.stderr)
        return 1
    base = consumer.base_url
    if args.json:
        print(json.dumps({"url": f"{base}/webhook", "control_url": f"{base}{CONTROL_PATH}"}), flush=True)
    else:
        print(f"demo consumer: webhooks to {base}/webhook, control at {base}{CONTROL_PATH}, mode {args.mode}")
        print(f"  verified and deduplicated events: curl {base}{RECEIVED_PATH}", flush=True)
    consumer.serve_until_signal()
    return 0


if __name__ == "__main__":
    sys.exit(main())
