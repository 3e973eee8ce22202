"""The client's `publish_events` and the CLI's `send-batch`, end to end against the real handlers on moto."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hookrelay_client import HookrelayClient, HookrelayError
from hookrelay_client.cli import main

from tests.support.consumer import ScriptedConsumer
from tests.support.gateway_adapter import GATEWAY_URL, gateway_session
from tests.support.platform import Platform


@pytest.fixture
def producer(platform: Platform, consumer: ScriptedConsumer) -> tuple[HookrelayClient, str, str]:
    tenant_id, tenant_token = platform.new_tenant()
    platform.new_endpoint(tenant_token, consumer.url)
    token = platform.new_key("producer")
    return HookrelayClient(GATEWAY_URL, token, session=gateway_session()), tenant_id, token


def test_publish_events_answers_each_event_in_order(
    platform: Platform, producer: tuple[HookrelayClient, str, str], consumer: ScriptedConsumer
) -> None:
    client, tenant_id, _ = producer
    events = [
        {"type": "order.paid", "data": {"n": 0}, "ordering_key": "o-1", "idempotency_key": "pay-0"},
        {"type": "not a type", "data": {}},
        {"type": "order.paid", "data": {"n": 2}, "ordering_key": "o-1", "idempotency_key": None},
    ]
    published = client.publish_events(tenant_id, events)
    assert (published.accepted, published.refused) == (2, 1)
    first, refused, third = published.results
    assert first.accepted and third.accepted and not refused.accepted
    assert (first.sequence, third.sequence) == (1, 2)
    assert refused.status == 422 and [e["field"] for e in refused.errors] == ["events.1.type"]
    again = client.publish_events(tenant_id, events[:1]).results[0]
    assert again.duplicate and (again.event_id, again.delivery_ids) == (first.event_id, first.delivery_ids)
    assert platform.pump() == 2


def test_publish_events_raises_only_when_the_request_is_no_batch(producer: tuple[HookrelayClient, str, str]) -> None:
    client, _, _ = producer
    with pytest.raises(HookrelayError) as raised:
        client.publish_events("ten_unknown", [{"type": "a", "data": {}}])
    assert raised.value.status == 422


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Callable[..., tuple[int, str, str]]:
    monkeypatch.setenv("HOOKRELAY_URL", GATEWAY_URL)

    def run(token: str, *argv: str, stdin: str = "") -> tuple[int, str, str]:
        monkeypatch.setenv("HOOKRELAY_TOKEN", token)
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        out, err = io.StringIO(), io.StringIO()
        code = main(list(argv), session=gateway_session(), stdout=out, stderr=err)
        return code, out.getvalue(), err.getvalue()

    return run


def test_cli_send_batch_splits_into_requests_of_100_and_prints_each_event(
    platform: Platform, producer: tuple[HookrelayClient, str, str], cli: Any, tmp_path: Path
) -> None:
    _, tenant_id, token = producer
    lines = "\n".join(json.dumps({"type": "order.paid", "data": {"n": n}}) for n in range(150))
    (tmp_path / "events.jsonl").write_text(lines)
    code, out, _ = cli(token, "send-batch", "--tenant-id", tenant_id, "--events", f"@{tmp_path / 'events.jsonl'}")
    assert code == 0
    *rows, summary = out.splitlines()
    assert len(rows) == 150 and rows[0].startswith("0  accepted evt_") and rows[149].startswith("149  accepted")
    assert summary == "150 accepted, 0 refused, in 2 request(s)"


def test_cli_send_batch_exits_1_when_an_event_is_refused_and_prints_json(
    producer: tuple[HookrelayClient, str, str], cli: Any
) -> None:
    _, tenant_id, token = producer
    events = json.dumps([{"type": "a", "data": {}}, {"type": "a", "data": 1}])
    code, out, _ = cli(token, "send-batch", "--tenant-id", tenant_id, "--events", "-", stdin=events)
    assert code == 1
    assert "1  refused 422 Invalid request" in out and "events.1.data" in out

    code, out, _ = cli(token, "--json", "send-batch", "--tenant-id", tenant_id, "--events", events)
    assert code == 1
    assert [r["status"] for r in json.loads(out)] == [202, 422]
