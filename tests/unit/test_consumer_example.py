"""The consumer guide's example, driven with real signed requests over 127.0.0.1, and kept in sync with the guide."""

from __future__ import annotations

import json
import re
import shlex
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from examples import consumer_app
from examples.consumer_app import ConsumerApp, ConsumerServer
from hookrelay.domain.clock import RETENTION_DAYS
from hookrelay.domain.schedule import DEFAULT_SCHEDULE
from hookrelay.domain.signing import generate_secret, signed_headers

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "consumer_app.py"
GUIDE = ROOT / "docs" / "consumer-guide.md"
SECRET = generate_secret()


def envelope(event_id: str, *, ordering_key: str | None = None, sequence: int | None = None, **data: Any) -> bytes:
    body: dict[str, Any] = {"id": event_id, "type": "order.updated", "timestamp": "2030-01-01T00:00:00.000Z"}
    body["data"] = data
    if ordering_key is not None:
        body |= {"ordering_key": ordering_key, "sequence": sequence}
    return json.dumps(body, separators=(",", ":")).encode()


class Consumer:
    def __init__(self, db_path: Path, secrets: list[str]) -> None:
        self.db_path = db_path
        self.applied: list[dict[str, Any]] = []
        self.app = ConsumerApp(str(db_path), secrets, on_event=self.applied.append)
        self.server = ConsumerServer(self.app)

    def deliver(self, body: bytes, *, secrets: list[str] | None = None, at: datetime | None = None) -> int:
        event_id = json.loads(body)["id"]
        headers = signed_headers(secrets or [SECRET], event_id, at or datetime.now(UTC), body.decode())
        response = requests.post(
            self.server.url, data=body, headers=headers | {"content-type": "application/json"}, timeout=5
        )
        return response.status_code

    def inbox(self) -> list[tuple[str, str]]:
        with sqlite3.connect(self.db_path) as db:
            return db.execute("SELECT webhook_id, state FROM inbox ORDER BY id").fetchall()

    def current_state(self) -> dict[str, int]:
        with sqlite3.connect(self.db_path) as db:
            return dict(db.execute("SELECT ordering_key, sequence FROM current_state").fetchall())


@pytest.fixture
def consumer(tmp_path: Path) -> Iterator[Consumer]:
    running = Consumer(tmp_path / "consumer.sqlite3", [SECRET])
    yield running
    running.server.close()


def test_valid_delivery_is_acknowledged_persisted_and_processed_once(consumer: Consumer) -> None:
    assert consumer.deliver(envelope("evt_1", order=1)) == 200
    consumer.app.wait_until_idle()
    assert consumer.inbox() == [("evt_1", "applied")]
    assert [event["id"] for event in consumer.applied] == ["evt_1"]


def test_duplicate_webhook_id_is_acknowledged_but_not_processed_twice(consumer: Consumer) -> None:
    body = envelope("evt_dup", order=1)
    assert consumer.deliver(body) == 200
    consumer.app.wait_until_idle()
    # A retry, replay or redrive: same webhook-id, a new attempt timestamp and signature.
    assert consumer.deliver(body, at=datetime.now(UTC) + timedelta(seconds=30)) == 200
    consumer.app.wait_until_idle()
    assert consumer.inbox() == [("evt_dup", "applied")]
    assert len(consumer.applied) == 1


def test_bad_signature_is_refused_and_nothing_is_stored(consumer: Consumer) -> None:
    assert consumer.deliver(envelope("evt_forged"), secrets=[generate_secret()]) == 401
    assert consumer.inbox() == []
    assert consumer.applied == []


def test_replayed_capture_outside_the_timestamp_tolerance_is_refused(consumer: Consumer) -> None:
    assert consumer.deliver(envelope("evt_old"), at=datetime.now(UTC) - timedelta(minutes=10)) == 401
    assert consumer.inbox() == []


def test_tampered_body_is_refused(consumer: Consumer) -> None:
    body = envelope("evt_t", amount=1)
    headers = signed_headers([SECRET], "evt_t", datetime.now(UTC), body.decode())
    response = requests.post(consumer.server.url, data=envelope("evt_t", amount=1000), headers=headers, timeout=5)
    assert response.status_code == 401
    assert consumer.inbox() == []


def test_stale_sequence_is_dropped(consumer: Consumer) -> None:
    # Sequence 2 arrives first (sequence 1's first attempt failed and is being retried).
    assert consumer.deliver(envelope("evt_new", ordering_key="order-7", sequence=2, status="shipped")) == 200
    consumer.app.wait_until_idle()
    assert consumer.deliver(envelope("evt_old", ordering_key="order-7", sequence=1, status="paid")) == 200
    consumer.app.wait_until_idle()
    assert consumer.inbox() == [("evt_new", "applied"), ("evt_old", "stale")]
    assert [event["id"] for event in consumer.applied] == ["evt_new"]
    assert consumer.current_state() == {"order-7": 2}


def test_newer_sequence_replaces_the_applied_one(consumer: Consumer) -> None:
    for event_id, sequence in (("evt_a", 1), ("evt_b", 2)):
        assert consumer.deliver(envelope(event_id, ordering_key="order-8", sequence=sequence)) == 200
        consumer.app.wait_until_idle()
    assert consumer.current_state() == {"order-8": 2}
    assert [event["id"] for event in consumer.applied] == ["evt_a", "evt_b"]


def test_rotation_accepts_a_request_signed_with_old_and_new_secret(tmp_path: Path) -> None:
    new_secret = generate_secret()
    # The consumer has moved to the new secret; the platform still signs with both during the overlap.
    rotated = Consumer(tmp_path / "rotated.sqlite3", [new_secret])
    try:
        assert rotated.deliver(envelope("evt_r"), secrets=[SECRET, new_secret]) == 200
        assert rotated.deliver(envelope("evt_r2"), secrets=[SECRET]) == 401
    finally:
        rotated.server.close()


def test_storage_failure_answers_503_so_the_platform_retries(consumer: Consumer, monkeypatch) -> None:
    def locked(_: str) -> Any:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(consumer_app, "connect", locked)
    assert consumer.deliver(envelope("evt_busy")) == 503


def test_worker_failure_is_retried_by_the_worker_not_lost(tmp_path: Path) -> None:
    failures = [RuntimeError("downstream API is down")]
    applied: list[str] = []

    def flaky(event: dict[str, Any]) -> None:
        if failures:
            raise failures.pop()
        applied.append(event["id"])

    app = ConsumerApp(str(tmp_path / "flaky.sqlite3"), [SECRET], on_event=flaky, retry_delay=0.05)
    server = ConsumerServer(app)
    try:
        body = envelope("evt_flaky")
        headers = signed_headers([SECRET], "evt_flaky", datetime.now(UTC), body.decode())
        assert requests.post(server.url, data=body, headers=headers, timeout=5).status_code == 200
        app.wait_until_idle()
        assert applied == ["evt_flaky"]
    finally:
        server.close()


def test_dedup_retention_outlasts_retry_horizon_plus_redrive_window() -> None:
    retry_horizon_plus_redrive_window = DEFAULT_SCHEDULE.horizon + RETENTION_DAYS * 24 * 3600
    retention = consumer_app.DEDUP_RETENTION_SECONDS
    assert retention > retry_horizon_plus_redrive_window


def test_example_runs_from_the_command_line(tmp_path: Path) -> None:
    command = [sys.executable, str(EXAMPLE), "--port", "0", "--secret", SECRET, "--db", str(tmp_path / "cli.db")]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=tmp_path)  # noqa: S603
    try:
        assert process.stdout is not None
        url = process.stdout.readline().removeprefix("listening on ").strip()
        body = envelope("evt_cli")
        headers = signed_headers([SECRET], "evt_cli", datetime.now(UTC), body.decode())
        assert requests.post(url, data=body, headers=headers, timeout=5).status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=5)


def test_the_guides_command_runs_as_written(tmp_path: Path) -> None:
    """The guide's command: the project's Python (which has the verifiers) on a port the local stack's API and the
    walkthrough's demo consumer leave free. Run as written but for the secret, the database and the port (0: this
    machine is shared)."""
    from local.stack import DEFAULT_PORT as API_PORT

    running = GUIDE.read_text().split("## Running the example", 1)[1]
    [command] = re.findall(r"^```bash\n(.*?)\n```", running, re.M | re.S)
    assert command.startswith(".tools/bin/uv run --frozen --no-sync python examples/consumer_app.py ")
    words = shlex.split(command)
    port = int(words[words.index("--port") + 1])
    assert port == consumer_app.DEFAULT_PORT and port not in (API_PORT, 9000)
    written = {"--port": "0", "--secret": SECRET, "--db": str(tmp_path / "guide.db")}
    args = [written.get(before, word) for before, word in zip(["", *words[:-1]], words, strict=True)]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=ROOT)  # noqa: S603
    try:
        assert process.stdout is not None
        url = process.stdout.readline().removeprefix("listening on ").strip()
        body = envelope("evt_guide")
        headers = signed_headers([SECRET], "evt_guide", datetime.now(UTC), body.decode())
        assert requests.post(url, data=body, headers=headers, timeout=5).status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=5)


def guide_regions() -> dict[str, str]:
    """The example's `# guide:NAME` ... `# guide:end` regions, dedented: what the guide quotes."""
    found = re.findall(r"^[ ]*# guide:(\w+)\n(.*?)^[ ]*# guide:end\n", EXAMPLE.read_text(), re.M | re.S)
    return {name: textwrap.dedent(code).strip() for name, code in found if name != "end"}


def test_guide_quotes_the_example_verbatim() -> None:
    regions = guide_regions()
    assert set(regions) >= {"schema", "verify", "handler", "worker", "currency"}
    python_blocks = [block.strip() for block in re.findall(r"^```python\n(.*?)^```", GUIDE.read_text(), re.M | re.S)]
    assert sorted(python_blocks) == sorted(regions.values())


def test_guide_states_the_deployed_horizon_and_redrive_window() -> None:
    guide = GUIDE.read_text()
    assert f"{DEFAULT_SCHEDULE.horizon // 3600} hours" in guide
    assert f"{RETENTION_DAYS} days" in guide


def test_purge_forgets_only_handled_ids_older_than_the_retention(tmp_path: Path) -> None:
    app = ConsumerApp(str(tmp_path / "purge.sqlite3"), [SECRET])
    expired = time.time() - consumer_app.DEDUP_RETENTION_SECONDS - 60
    recent = time.time() - consumer_app.DEDUP_RETENTION_SECONDS + 3600
    rows = [("evt_expired", expired, "applied"), ("evt_recent", recent, "applied"), ("evt_waiting", expired, "queued")]
    with sqlite3.connect(app.db_path) as db:
        db.executemany("INSERT INTO inbox (webhook_id, received_at, body, state) VALUES (?, ?, '{}', ?)", rows)
    app.purge_expired()
    with sqlite3.connect(app.db_path) as db:
        kept = [row[0] for row in db.execute("SELECT webhook_id FROM inbox ORDER BY id")]
    assert kept == ["evt_recent", "evt_waiting"]
