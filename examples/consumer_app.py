"""A webhook consumer that does what the consumer guide says: verify, deduplicate, persist, enqueue, 200.

    .tools/bin/uv run --frozen --no-sync python examples/consumer_app.py --secret whsec_... [--secret whsec_old...]
        [--port 9100] [--db consumer.sqlite3]
    .tools/bin/uv run --frozen --no-sync python examples/consumer_app.py --secret whpk_...   # an Ed25519 public key

(`.tools/bin/uv run`: this repository's Python environment, which has `standardwebhooks` and `cryptography`.)

Standard library only, plus the official `standardwebhooks` verifier (v1, HMAC) and `cryptography` (v1a,
Ed25519). The handler acknowledges in milliseconds; a worker thread does the real work from a durable queue
(the `inbox` table), and drops updates older than what it already applied (`ordering_key` + `sequence`). The
code between the `guide:` markers is quoted verbatim by docs/consumer-guide.md (a test keeps the two
identical).
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

log = logging.getLogger("consumer")
PURGE_EVERY_SECONDS = 3600

# Not the local stack's API (8080) nor the walkthrough's demo consumer (9000): all three may run side by side.
DEFAULT_PORT = 9100

# guide:schema
# The platform retries for up to 72 hours, and a dead delivery can be redriven for 30 days after that:
# the same webhook-id can arrive that long after the first copy. Keep dedup rows longer (plus margin).
DEDUP_RETENTION_SECONDS = 72 * 3600 + 30 * 24 * 3600 + 24 * 3600

SCHEMA = """
CREATE TABLE IF NOT EXISTS inbox (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,  -- queue order
    webhook_id  TEXT NOT NULL UNIQUE,               -- the dedup key: same on every retry, replay, redrive
    received_at REAL NOT NULL,
    body        TEXT NOT NULL,                      -- the verified raw body, as received
    state       TEXT NOT NULL DEFAULT 'queued'      -- queued -> applied | stale
);
CREATE INDEX IF NOT EXISTS inbox_state ON inbox (state, id);
CREATE TABLE IF NOT EXISTS current_state (
    ordering_key TEXT PRIMARY KEY,                  -- e.g. the order id the producer keyed events by
    sequence     INTEGER NOT NULL,                  -- the newest sequence applied for this key
    data         TEXT NOT NULL
);
"""
# guide:end


@contextmanager
def connect(db_path: str) -> Iterator[sqlite3.Connection]:
    """One short transaction on its own connection: safe from any server or worker thread."""
    db = sqlite3.connect(db_path, timeout=5)
    try:
        with db:  # commit on success, roll back on error
            yield db
    finally:
        db.close()


# guide:verify
def verify(secrets: Sequence[str], body: bytes, headers: Mapping[str, str]) -> dict[str, Any]:
    """Check the signature on the raw bytes, before parsing anything.

    During a secret rotation the platform sends one signature per active key, and you may be
    configured with both the old and the new one: accept the request if any of them verifies it.
    A `whsec_` secret checks the `v1,` (HMAC) signatures; a `whpk_` public key the `v1a,` (Ed25519) ones.
    """
    for secret in secrets:
        try:
            if secret.startswith("whpk_"):
                return verify_v1a(secret, body, headers)
            return Webhook(secret).verify(body, dict(headers))
        except (WebhookVerificationError, ValueError):
            continue  # wrong secret, stale timestamp (replay protection) or malformed header
    raise WebhookVerificationError("no configured secret verifies this request")


# guide:end


# guide:verify_v1a
TOLERANCE_SECONDS = 5 * 60  # as Webhook.verify: a captured request cannot be replayed later


def verify_v1a(public_key: str, body: bytes, headers: Mapping[str, str]) -> dict[str, Any]:
    """Verify `v1a,` (Ed25519) signatures with the endpoint's `whpk_` public key: the checks that
    `Webhook.verify` makes for `v1,` (all three headers, a timestamp within 5 minutes), with a public key."""
    h = {name.lower(): value for name, value in headers.items()}
    msg_id, timestamp, signatures = h.get("webhook-id"), h.get("webhook-timestamp"), h.get("webhook-signature")
    if not (msg_id and timestamp and signatures):
        raise WebhookVerificationError("missing required headers")
    if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > TOLERANCE_SECONDS:
        raise WebhookVerificationError("timestamp outside the tolerance")
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key.removeprefix("whpk_")))
    signed = f"{msg_id}.{timestamp}.".encode() + body
    for entry in signatures.split(" "):
        version, _, signature = entry.partition(",")
        if version != "v1a":
            continue  # a v1 (HMAC) signature for a whsec_ secret, during a rotation between types
        try:
            key.verify(base64.b64decode(signature), signed)
            return dict(json.loads(body))
        except (InvalidSignature, ValueError):
            continue
    raise WebhookVerificationError("no v1a signature matches")


# guide:end


class ConsumerApp:
    def __init__(
        self,
        db_path: str,
        secrets: Sequence[str],
        on_event: Callable[[dict[str, Any]], None] | None = None,
        retry_delay: float = 1.0,
    ) -> None:
        if not secrets:
            raise ValueError("configure at least one signing secret")
        self.db_path, self.secrets = db_path, list(secrets)
        self.on_event = on_event or (lambda event: log.info("applied %s %s", event["type"], event["id"]))
        self.retry_delay = retry_delay
        self.wake_worker = threading.Event()
        self.stopping = threading.Event()
        self.next_purge_at = 0.0
        with connect(db_path) as db:
            db.execute("PRAGMA journal_mode=WAL")  # readers never block the handler's insert
            db.executescript(SCHEMA)

    # guide:handler
    def receive(self, body: bytes, headers: Mapping[str, str]) -> int:
        """The whole webhook handler: verify, deduplicate, persist, enqueue, return 200 in milliseconds."""
        try:
            verify(self.secrets, body, headers)
        except WebhookVerificationError:
            return 401  # a forgery or a replayed capture: never stored
        webhook_id = {k.lower(): v for k, v in headers.items()}["webhook-id"]
        try:
            with connect(self.db_path) as db:
                # Persisting and enqueueing are one insert; the UNIQUE webhook_id makes it idempotent.
                inserted = db.execute(
                    "INSERT INTO inbox (webhook_id, received_at, body) VALUES (?, ?, ?)"
                    " ON CONFLICT (webhook_id) DO NOTHING",
                    (webhook_id, time.time(), body.decode()),
                ).rowcount
        except sqlite3.Error:
            log.exception("could not store %s", webhook_id)
            return 503  # transient on our side: a 5xx makes the platform retry; a 4xx would give up
        if inserted:
            self.wake_worker.set()
        return 200  # a duplicate is acknowledged too: we already have it

    # guide:end

    # guide:worker
    def process_next(self) -> bool:
        """Apply the oldest queued event; False when the queue is empty. Runs on the worker thread."""
        with connect(self.db_path) as db:
            row = db.execute("SELECT id, body FROM inbox WHERE state = 'queued' ORDER BY id LIMIT 1").fetchone()
        if row is None:
            return False
        inbox_id, event = row[0], json.loads(row[1])
        fresh = self.is_newer_than_applied(event)
        if fresh:
            self.on_event(event)  # the real work: may take seconds; raise to retry it later
        with connect(self.db_path) as db:
            if fresh and event.get("ordering_key") is not None:
                db.execute(
                    "INSERT INTO current_state (ordering_key, sequence, data) VALUES (?, ?, ?)"
                    " ON CONFLICT (ordering_key) DO UPDATE SET sequence = excluded.sequence, data = excluded.data"
                    " WHERE excluded.sequence > current_state.sequence",
                    (event["ordering_key"], event["sequence"], json.dumps(event["data"])),
                )
            db.execute("UPDATE inbox SET state = ? WHERE id = ?", ("applied" if fresh else "stale", inbox_id))
        return True

    # guide:end

    # guide:currency
    def is_newer_than_applied(self, event: dict[str, Any]) -> bool:
        """Currency, not ordering: a retried old update may arrive after a newer one; drop it."""
        if event.get("ordering_key") is None:
            return True
        with connect(self.db_path) as db:
            row = db.execute(
                "SELECT sequence FROM current_state WHERE ordering_key = ?", (event["ordering_key"],)
            ).fetchone()
        return row is None or event["sequence"] > row[0]

    # guide:end

    def run_worker(self) -> None:
        """Drain the queue, then sleep until the handler enqueues something (or a second passes)."""
        while not self.stopping.is_set():
            self.wake_worker.clear()
            try:
                while not self.stopping.is_set() and self.process_next():
                    continue
                self.purge_expired()
            except Exception:
                # The worker's own retry policy, not the platform's. A production worker would also cap
                # attempts per event and park a poison event, so it cannot block the queue forever.
                log.exception("processing failed; retrying in %.1fs", self.retry_delay)
                self.stopping.wait(self.retry_delay)
                continue
            self.wake_worker.wait(timeout=1.0)

    def purge_expired(self) -> None:
        """Forget handled webhook ids only once no retry, replay or redrive can bring them back."""
        if time.monotonic() < self.next_purge_at:
            return
        with connect(self.db_path) as db:
            db.execute(
                "DELETE FROM inbox WHERE state != 'queued' AND received_at < ?",
                (time.time() - DEDUP_RETENTION_SECONDS,),
            )
        self.next_purge_at = time.monotonic() + PURGE_EVERY_SECONDS

    def queued_count(self) -> int:
        with connect(self.db_path) as db:
            return db.execute("SELECT count(*) FROM inbox WHERE state = 'queued'").fetchone()[0]

    def wait_until_idle(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while self.queued_count():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.queued_count()} events still queued after {timeout}s")
            time.sleep(0.01)


class ConsumerServer:
    """The app behind a threading HTTP server on 127.0.0.1, with its worker thread."""

    def __init__(self, app: ConsumerApp, port: int = 0, host: str = "127.0.0.1") -> None:
        self.app = app

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                status = app.receive(body, dict(self.headers.items()))
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                log.debug(format, *args)

        self.http = ThreadingHTTPServer((host, port), Handler)
        self.http.daemon_threads = True
        self.threads = [
            threading.Thread(target=self.http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True),
            threading.Thread(target=app.run_worker, daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    @property
    def url(self) -> str:
        host, port = self.http.server_address[:2]
        return f"http://{host}:{port}/webhooks"

    def close(self) -> None:
        self.app.stopping.set()
        self.app.wake_worker.set()
        self.http.shutdown()
        self.http.server_close()
        for thread in self.threads:
            thread.join(timeout=5)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A webhook consumer: verify, deduplicate, persist, enqueue, 200.")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="0 picks a free port")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--secret",
        action="append",
        required=True,
        help="the endpoint's whsec_ secret or whpk_ public key; repeat during a rotation",
    )
    parser.add_argument("--db", default="consumer.sqlite3", help="the SQLite file holding inbox and state")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    server = ConsumerServer(ConsumerApp(args.db, args.secret), port=args.port, host=args.host)
    print(f"listening on {server.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


if __name__ == "__main__":
    main()
