"""Pull delivery (issue 29): an endpoint of kind `poll` is sent nothing; its consumer reads its messages with a cursor
that acknowledges (domain/mailbox.py), through the real API, ingest and delivery handlers on moto."""

from __future__ import annotations

from typing import Any

import pytest
from standardwebhooks import Webhook

from hookrelay import wiring
from local.sqs_source import invoke_batch, queue_arn_of
from tests.support.aws import as_function, ingest_reads_endpoints_again
from tests.support.platform import Platform


def _poll_endpoint(platform: Platform, token: str, **fields: Any) -> dict[str, Any]:
    created = platform.call("POST", "/v1/endpoints", token, {"kind": "poll", **fields})
    assert created.status == 201, created.body
    return dict(created.json())


def _publish(platform: Platform, producer: str, tenant_id: str, number: int) -> str:
    body = {"tenant_id": tenant_id, "type": "order.created", "data": {"n": number}}
    accepted = platform.call("POST", "/v1/events", producer, body)
    assert accepted.status == 202, accepted.body
    return str(accepted.json()["delivery_ids"][0])


def _read(platform: Platform, token: str, endpoint_id: str, after: int = 0, **query: Any) -> dict[str, Any]:
    params = "&".join(f"{k}={v}" for k, v in {"after": after, **query}.items())
    read = platform.call("GET", f"/v1/endpoints/{endpoint_id}/messages?{params}", token)
    assert read.status == 200, read.body
    return dict(read.json())


def _numbers(page: dict[str, Any]) -> list[int]:
    return [int(message["body"].split('"n":')[1].split("}")[0].strip()) for message in page["data"]]


def _status(platform: Platform, token: str, delivery_id: str) -> str:
    return str(platform.call("GET", f"/v1/deliveries/{delivery_id}", token).json()["status"])


@pytest.fixture
def tenant(platform: Platform) -> tuple[str, str, str]:
    tenant_id, token = platform.new_tenant()
    return tenant_id, token, platform.new_key("producer")


def test_messages_are_read_in_order_signed_at_least_once_and_the_cursor_acknowledges(
    platform: Platform, tenant: tuple[str, str, str]
) -> None:
    tenant_id, token, producer = tenant
    endpoint = _poll_endpoint(platform, token)
    assert (endpoint["kind"], endpoint["url"]) == ("poll", None)
    assert endpoint["messages_url"] == f"/v1/endpoints/{endpoint['id']}/messages"
    deliveries = [_publish(platform, producer, tenant_id, n) for n in range(3)]
    assert platform.pump() == 3

    first = _read(platform, token, endpoint["id"])
    assert _numbers(first) == [0, 1, 2]
    assert [m["delivery_id"] for m in first["data"]] == deliveries
    for message in first["data"]:  # each signed as its webhook would be, verified the same way
        assert Webhook(endpoint["secret"]).verify(message["body"], message["headers"])["id"] == message["event_id"]
    assert _numbers(_read(platform, token, endpoint["id"])) == [0, 1, 2]  # read again: nothing acknowledged yet
    assert {_status(platform, token, d) for d in deliveries} == {"queued"}

    second = first["data"][1]["seq"]
    rest = _read(platform, token, endpoint["id"], after=second)
    assert _numbers(rest) == [2] and rest["next_after"] == first["data"][2]["seq"]
    assert [_status(platform, token, d) for d in deliveries] == ["delivered", "delivered", "queued"]
    [attempt] = platform.call("GET", f"/v1/deliveries/{deliveries[0]}", token).json()["attempts"]
    assert attempt["status_code"] == 200 and attempt["response_excerpt"] == "acknowledged by the consumer's cursor"

    done = _read(platform, token, endpoint["id"], after=rest["next_after"])
    assert done["data"] == [] and done["next_after"] == rest["next_after"]
    assert _status(platform, token, deliveries[2]) == "delivered"


def test_replays_come_after_what_was_posted_before_them_in_order(
    platform: Platform, tenant: tuple[str, str, str]
) -> None:
    tenant_id, token, producer = tenant
    endpoint = _poll_endpoint(platform, token)
    deliveries = [_publish(platform, producer, tenant_id, n) for n in range(2)]
    platform.pump()
    page = _read(platform, token, endpoint["id"])
    acknowledged = _read(platform, token, endpoint["id"], after=page["next_after"])
    assert acknowledged["data"] == []

    replays = [platform.call("POST", f"/v1/deliveries/{d}/replay", token).json()["delivery_id"] for d in deliveries]
    _publish(platform, producer, tenant_id, 2)
    platform.pump()
    after_replays = _read(platform, token, endpoint["id"], after=acknowledged["next_after"])
    assert _numbers(after_replays) == [0, 1, 2]
    assert [m["delivery_id"] for m in after_replays["data"]][:2] == replays
    assert [m["seq"] for m in after_replays["data"]] == sorted(m["seq"] for m in after_replays["data"])


def test_a_poll_endpoint_stays_one_and_other_endpoints_have_no_messages(
    platform: Platform, tenant: tuple[str, str, str]
) -> None:
    _, token, _ = tenant
    poll = _poll_endpoint(platform, token)
    webhook = platform.new_endpoint(token, "https://8.8.8.8/hook")
    refused = platform.call("PATCH", f"/v1/endpoints/{poll['id']}", token, {"url": "https://8.8.8.8/hook"})
    assert refused.status == 422 and "poll endpoint stays one" in refused.json()["detail"]
    assert platform.call("GET", f"/v1/endpoints/{webhook['id']}/messages", token).status == 409
    assert platform.call("POST", "/v1/endpoints", token, {"kind": "poll", "url": "https://8.8.8.8/"}).status == 422
    assert platform.call("POST", "/v1/endpoints", token, {"event_types": ["*"]}).status == 422
    assert platform.call("GET", f"/v1/endpoints/{poll['id']}/messages?limit=0", token).status == 422
    _, other_token = platform.new_tenant("other")
    assert platform.call("GET", f"/v1/endpoints/{poll['id']}/messages", other_token).status == 404


def test_a_crash_between_posting_and_marking_posts_again_and_the_message_is_read_twice_never_lost(
    platform: Platform, tenant: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant_id, token, producer = tenant
    endpoint = _poll_endpoint(platform, token)
    delivery_id = _publish(platform, producer, tenant_id, 0)
    with as_function("delivery"):
        log = wiring.delivery_service().deliveries
    mark = log.mark_posted

    def died(*args: object, **kwargs: object) -> bool:
        raise RuntimeError("the invocation died here")

    monkeypatch.setattr(log, "mark_posted", died)
    url, [message] = platform.receive_delivery() or ("", [])
    assert invoke_batch(platform.sqs, url, queue_arn_of(platform.sqs, url), [message], "delivery") == 1  # failed
    monkeypatch.setattr(log, "mark_posted", mark)
    platform.sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
    assert platform.pump() == 1

    page = _read(platform, token, endpoint["id"])
    assert [m["delivery_id"] for m in page["data"]] == [delivery_id, delivery_id]  # at least once
    _read(platform, token, endpoint["id"], after=page["next_after"])
    record = platform.call("GET", f"/v1/deliveries/{delivery_id}", token).json()
    assert record["status"] == "delivered" and len(record["attempts"]) == 1  # acknowledged once


def test_a_crash_between_acknowledging_and_removing_is_finished_by_the_next_read(
    platform: Platform, tenant: tuple[str, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tenant_id, token, producer = tenant
    endpoint = _poll_endpoint(platform, token)
    delivery_id = _publish(platform, producer, tenant_id, 0)
    platform.pump()
    page = _read(platform, token, endpoint["id"])
    with as_function("api"):
        mailbox = wiring.mailbox_service().mailbox
    remove = mailbox.remove

    def died(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the invocation died here")

    monkeypatch.setattr(mailbox, "remove", died)
    failed = platform.call("GET", f"/v1/endpoints/{endpoint['id']}/messages?after={page['next_after']}", token)
    assert failed.status >= 500
    assert _status(platform, token, delivery_id) == "delivered"  # recorded; its entry still there
    monkeypatch.setattr(mailbox, "remove", remove)

    again = _read(platform, token, endpoint["id"], after=page["next_after"])
    assert again["data"] == []
    assert len(platform.call("GET", f"/v1/deliveries/{delivery_id}", token).json()["attempts"]) == 1
    assert _read(platform, token, endpoint["id"])["data"] == []  # removed: not read again from the start


def test_a_redrive_posts_what_it_recovers_after_what_was_posted_before_it_in_order(
    platform: Platform, tenant: tuple[str, str, str]
) -> None:
    """Deliveries cancelled while the poll endpoint was disabled are redriven once it is enabled again: the
    recovered ones come after the messages posted before the redrive, in their events' order (within a redrive's
    page of 100: the redrive walks the log newest page first)."""
    from datetime import timedelta

    from hookrelay.adapters import schema
    from hookrelay.domain.clock import to_rfc3339, utcnow
    from local.sqs_source import poll_once

    tenant_id, token, producer = tenant
    endpoint = _poll_endpoint(platform, token)
    path = f"/v1/endpoints/{endpoint['id']}"
    since = to_rfc3339(utcnow() - timedelta(minutes=1))
    assert platform.call("POST", f"{path}/disable", token).status == 200
    ingest_reads_endpoints_again()  # as each change applies to ingest (within ENDPOINT_LIST_SECONDS)
    cancelled = [_publish(platform, producer, tenant_id, n) for n in range(2)]
    platform.pump()
    assert {_status(platform, token, d) for d in cancelled} == {"cancelled"}
    assert platform.call("POST", f"{path}/enable", token).status == 200
    ingest_reads_endpoints_again()
    _publish(platform, producer, tenant_id, 2)
    platform.pump()

    started = platform.call("POST", f"{path}/redrive", token, {"since": since, "status": "cancelled"})
    assert started.status == 202, started.body
    while poll_once(platform.sqs, platform.env[schema.REDRIVE_JOBS_QUEUE.env_var], function="redrive"):
        pass
    platform.pump()
    page = _read(platform, token, endpoint["id"])
    assert _numbers(page) == [2, 0, 1]  # the live one first (posted first), then the redriven ones in order
    _read(platform, token, endpoint["id"], after=page["next_after"])
    replays = [m["delivery_id"] for m in page["data"][1:]]
    assert {_status(platform, token, d) for d in replays} == {"delivered"}
    recovered = platform.call("GET", f"/v1/deliveries/{cancelled[0]}", token).json()
    assert recovered["status"] == "cancelled" and recovered["recovered_by"] == replays[0]
