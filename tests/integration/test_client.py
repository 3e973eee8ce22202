"""The client and CLI end to end against the real handlers on moto, through an in-process requests transport."""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests
from hookrelay_client import HookrelayClient, HookrelayError, Redrive
from hookrelay_client.cli import main, moment, seconds
from standardwebhooks import Webhook

from hookrelay.adapters import schema
from local.sqs_source import poll_once
from tests.support.aws import ingest_reads_endpoints_again
from tests.support.consumer import Reply, ScriptedConsumer
from tests.support.gateway_adapter import GATEWAY_URL, gateway_session
from tests.support.platform import Platform
from tests.support.records import seed

ClientFor = Callable[[str], HookrelayClient]


@pytest.fixture
def client_for(platform: Platform) -> ClientFor:
    return lambda token: HookrelayClient(GATEWAY_URL, token, session=gateway_session())


@pytest.fixture
def tenant(platform: Platform, client_for: ClientFor, consumer: ScriptedConsumer) -> dict[str, Any]:
    """A tenant with one endpoint at the scripted consumer, and a producer key: all made through the client."""
    admin = client_for(platform.admin_token)
    created = admin.create_tenant("acme")
    tenant_client = client_for(created.api_key.token)
    endpoint = tenant_client.create_endpoint(consumer.url, ["order.*"], description="orders")
    producer = client_for(admin.create_api_key("producer").token)
    return {"id": created.tenant_id, "client": tenant_client, "endpoint": endpoint, "producer": producer}


def run_redrive_pages(platform: Platform) -> None:
    """What the redrive Lambda's event source does in AWS: feed queued redrive pages to the real handler."""
    while poll_once(platform.sqs, platform.env[schema.REDRIVE_JOBS_QUEUE.env_var], function="redrive", batch_size=1):
        pass


def test_send_show_and_event_as_sent(platform: Platform, tenant: dict[str, Any], consumer: ScriptedConsumer) -> None:
    published = tenant["producer"].publish_event(tenant["id"], "order.updated", {"id": 1}, ordering_key="order-1")
    assert len(published.delivery_ids) == 1 and published.sequence is not None

    platform.pump()
    [request] = consumer.wait_for(1)
    assert Webhook(tenant["endpoint"].secret).verify(request.body, request.headers)["id"] == published.event_id

    delivery = tenant["client"].get_delivery(published.delivery_ids[0])
    assert (delivery.status, delivery.event_id, delivery.endpoint_id) == (
        "delivered",
        published.event_id,
        tenant["endpoint"].id,
    )
    [attempt] = delivery.attempts
    assert attempt.number == 1 and attempt.status_code == 200 and attempt.started_at is not None

    event = tenant["client"].get_event(published.event_id)
    assert event.body is not None and event.body.encode() == request.body
    assert (event.ordering_key, event.sequence, event.data) == ("order-1", published.sequence, {"id": 1})


def test_idempotency_key_publishes_once(tenant: dict[str, Any]) -> None:
    first = tenant["producer"].publish_event(tenant["id"], "order.created", {"id": 2}, idempotency_key="order-2")
    again = tenant["producer"].publish_event(tenant["id"], "order.created", {"id": 2}, idempotency_key="order-2")
    assert again.event_id == first.event_id and again.delivery_ids == first.delivery_ids


def test_endpoints_list_and_show(tenant: dict[str, Any]) -> None:
    endpoint = tenant["endpoint"]
    assert [e.id for e in tenant["client"].list_endpoints()] == [endpoint.id]
    shown = tenant["client"].get_endpoint(endpoint.id)
    assert (shown.url, shown.event_types, shown.description) == (endpoint.url, ["order.*"], "orders")
    assert "secret" not in shown.model_dump()


def test_iterating_deliveries_follows_next_cursor(platform: Platform, tenant: dict[str, Any]) -> None:
    published = [tenant["producer"].publish_event(tenant["id"], "order.updated", {"n": n}) for n in range(7)]
    first_page = tenant["client"].list_deliveries(limit=3)
    assert len(first_page.data) == 3 and first_page.next_cursor

    every = list(tenant["client"].iter_deliveries(limit=3))
    assert sorted(d.id for d in every) == sorted(p.delivery_ids[0] for p in published)
    created = [d.created_at for d in every]
    assert created == sorted(created, reverse=True)


def test_replay_sends_the_same_webhook_id_again(
    platform: Platform, tenant: dict[str, Any], consumer: ScriptedConsumer
) -> None:
    published = tenant["producer"].publish_event(tenant["id"], "order.updated", {"id": 3})
    platform.pump()
    replay = tenant["client"].replay_delivery(published.delivery_ids[0])
    assert (replay.replay_of, replay.event_id) == (published.delivery_ids[0], published.event_id)
    assert replay.delivery_id != published.delivery_ids[0]

    platform.pump()
    requests_seen = consumer.wait_for(2)
    assert [r.headers["webhook-id"] for r in requests_seen] == [published.event_id] * 2
    assert tenant["client"].get_delivery(replay.delivery_id).replay_of == published.delivery_ids[0]


def test_test_event_reaches_the_endpoint(
    platform: Platform, tenant: dict[str, Any], consumer: ScriptedConsumer
) -> None:
    sent = tenant["client"].send_test_event(tenant["endpoint"].id)
    platform.pump()
    [request] = consumer.wait_for(1)
    assert request.headers["webhook-id"] == sent.event_id
    assert tenant["client"].get_delivery(sent.delivery_id).status == "delivered"


def test_failed_attempt_is_visible_with_its_response(
    platform: Platform, tenant: dict[str, Any], consumer: ScriptedConsumer
) -> None:
    consumer.queue([Reply(502, b"<html>bad gateway</html>")])
    published = tenant["producer"].publish_event(tenant["id"], "order.updated", {"id": 4})
    platform.pump()
    consumer.wait_for(1)
    retrying = tenant["client"].list_deliveries(status="retrying").data
    assert [d.id for d in retrying] == published.delivery_ids
    assert retrying[0].last_status_code == 502 and retrying[0].next_attempt_at is not None
    [attempt] = tenant["client"].get_delivery(published.delivery_ids[0]).attempts
    assert attempt.response_excerpt == "<html>bad gateway</html>"


def test_problem_details_raise_one_exception_type(tenant: dict[str, Any], client_for: ClientFor) -> None:
    with pytest.raises(HookrelayError) as missing:
        tenant["client"].get_delivery("del_does_not_exist")
    assert missing.value.status == 404 and missing.value.problem.title

    with pytest.raises(HookrelayError) as invalid:
        tenant["client"].create_endpoint("https://example.com/hook", ["not a filter!"])
    assert invalid.value.status == 422
    assert [error["field"] for error in invalid.value.problem.errors] == ["event_types"]

    with pytest.raises(HookrelayError) as forbidden:
        client_for("hr_not_a_real_key").list_endpoints()
    assert forbidden.value.status in (401, 403)


def test_redrive_replays_the_window_and_is_followed_to_completion(
    platform: Platform, tenant: dict[str, Any], consumer: ScriptedConsumer
) -> None:
    now = datetime.now(UTC)
    endpoint_id = tenant["endpoint"].id
    dead = [seed(tenant["id"], endpoint_id, now - timedelta(minutes=30 - i)) for i in range(3)]
    outside = seed(tenant["id"], endpoint_id, now - timedelta(hours=5))

    accepted = tenant["client"].redrive(endpoint_id, now - timedelta(hours=1), now)
    assert accepted.count is None  # counted by the redrive's first job, in the background
    seen: list[Redrive] = []

    def progress(redrive: Redrive) -> None:
        seen.append(redrive)
        run_redrive_pages(platform)

    final = tenant["client"].follow_redrive(accepted.redrive_id, poll_interval=0, on_progress=progress)
    assert (final.state, final.replayed, final.total) == ("completed", 3, 3)
    assert seen[-1] == final

    platform.pump()
    requests_seen = consumer.wait_for(3)
    assert sorted(r.headers["webhook-id"] for r in requests_seen) == sorted(s.event.id for s in dead)
    assert outside.event.id not in {r.headers["webhook-id"] for r in requests_seen}


# -- the CLI ------------------------------------------------------------------------------------------


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Callable[..., tuple[int, str, str]]:
    """Runs the CLI with the URL and key from the environment; returns (exit code, stdout, stderr)."""
    monkeypatch.setenv("HOOKRELAY_URL", GATEWAY_URL)

    def run(token: str, *argv: str) -> tuple[int, str, str]:
        monkeypatch.setenv("HOOKRELAY_TOKEN", token)
        out, err = io.StringIO(), io.StringIO()
        code = main(list(argv), session=gateway_session(), stdout=out, stderr=err)
        return code, out.getvalue(), err.getvalue()

    return run


def token_of(client: HookrelayClient) -> str:
    return client._headers["Authorization"].removeprefix("Bearer ")


def test_cli_prints_problem_details_and_exits_non_zero(tenant: dict[str, Any], cli) -> None:
    code, out, err = cli(token_of(tenant["client"]), "deliveries", "show", "del_does_not_exist")
    assert code == 1 and out == ""
    assert err.startswith("error: 404 ")

    code, out, err = cli(token_of(tenant["client"]), "--json", "deliveries", "show", "del_does_not_exist")
    assert code == 1 and json.loads(err)["status"] == 404


def test_cli_validation_problem_lists_the_fields(tenant: dict[str, Any], cli) -> None:
    code, _, err = cli(
        token_of(tenant["client"]), "endpoints", "create", "--url", "https://x.test", "--event-type", "!"
    )
    assert code == 1
    assert "422" in err and "event_types" in err


def test_cli_send_list_and_show(platform: Platform, tenant: dict[str, Any], cli) -> None:
    code, out, _ = cli(
        token_of(tenant["producer"]), "send", "--tenant-id", tenant["id"], "--type", "order.paid", "--data", '{"id": 5}'
    )
    assert code == 0 and out.startswith("accepted evt_")
    platform.pump()

    code, out, _ = cli(token_of(tenant["client"]), "deliveries", "list", "--json")
    assert code == 0
    [listed] = json.loads(out)["data"]
    assert listed["status"] == "delivered" and listed["event_type"] == "order.paid"

    code, out, _ = cli(token_of(tenant["client"]), "deliveries", "list")
    assert code == 0
    header, row = out.splitlines()
    assert header.split()[:3] == ["ID", "STATUS", "ATTEMPTS"] and row.split()[:3] == [listed["id"], "delivered", "1"]

    code, out, _ = cli(token_of(tenant["client"]), "deliveries", "show", listed["id"])
    assert code == 0 and "STARTED" in out and listed["event_id"] in out


def test_cli_redrive_follow_draws_progress_on_stderr(
    platform: Platform, tenant: dict[str, Any], cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = datetime.now(UTC)
    for i in range(2):
        seed(tenant["id"], tenant["endpoint"].id, now - timedelta(minutes=10 + i))
    # Each poll's GET runs the queued redrive pages first, as the redrive Lambda would meanwhile.
    original = HookrelayClient.get_redrive

    def get_redrive_after_pages(self: HookrelayClient, redrive_id: str) -> Redrive:
        run_redrive_pages(platform)
        return original(self, redrive_id)

    monkeypatch.setattr(HookrelayClient, "get_redrive", get_redrive_after_pages)
    code, out, err = cli(
        token_of(tenant["client"]),
        "redrive",
        tenant["endpoint"].id,
        "--since",
        "1h",
        "--follow",
        "--poll-interval",
        "0",
    )
    assert code == 0
    assert "counting the deliveries to replay" in err and "2/2 replayed (completed)" in err
    assert err.rstrip().splitlines()[-1].startswith("[" + "#" * 30 + "] 2/2 replayed")
    assert "completed" in out and "2/2" in out


def test_cli_without_configuration_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HOOKRELAY_URL", raising=False)
    monkeypatch.delenv("HOOKRELAY_TOKEN", raising=False)
    with pytest.raises(SystemExit) as exited:
        main(["endpoints", "list"])
    assert exited.value.code == 2


def test_cli_unreachable_api_exits_3() -> None:
    session, err = requests.Session(), io.StringIO()
    session.mount("http://", _Refusing())
    argv = ["--api-url", "http://127.0.0.1:9", "--token", "t", "endpoints", "list"]
    assert main(argv, session=session, stderr=err) == 3
    assert "cannot reach" in err.getvalue()


class _Refusing(requests.adapters.BaseAdapter):
    def send(self, request: requests.PreparedRequest, **_: Any) -> requests.Response:
        raise requests.ConnectionError("connection refused")

    def close(self) -> None:
        pass


class _Answering(requests.adapters.BaseAdapter):
    """Answers every request with one canned response: what a proxy in front of the API might say."""

    def __init__(self, status: int, body: bytes, content_type: str) -> None:
        super().__init__()
        self.status, self.body, self.content_type = status, body, content_type

    def send(self, request: requests.PreparedRequest, **_: Any) -> requests.Response:
        response = requests.Response()
        response.status_code, response.reason, response._content = self.status, "Bad Gateway", self.body
        response.headers = requests.structures.CaseInsensitiveDict({"content-type": self.content_type})
        response.request, response.url = request, request.url or ""
        return response

    def close(self) -> None:
        pass


def test_an_error_that_is_not_problem_details_still_raises_with_status_and_excerpt() -> None:
    session = requests.Session()
    session.mount("http://proxy.test", _Answering(502, b"<html>upstream timed out</html>", "text/html"))
    with pytest.raises(HookrelayError) as failed:
        HookrelayClient("http://proxy.test", "t", session=session).list_endpoints()
    assert (failed.value.status, failed.value.problem.title) == (502, "Bad Gateway")
    assert failed.value.problem.detail == "<html>upstream timed out</html>"


def test_following_a_redrive_that_never_finishes_times_out() -> None:
    running = {"id": "rdr_1", "endpoint_id": "ep_1", "since": "2030-01-01T00:00:00Z", "until": "2030-01-01T01:00:00Z"}
    body = json.dumps(running | {"state": "running", "total": 3, "replayed": 1}).encode()
    session = requests.Session()
    session.mount("http://api.test", _Answering(200, body, "application/json"))
    client = HookrelayClient("http://api.test", "t", session=session)
    polls: list[Redrive] = []
    with pytest.raises(TimeoutError):
        client.follow_redrive("rdr_1", poll_interval=0, timeout=0, on_progress=polls.append)
    assert [(p.state, p.replayed) for p in polls] == [("running", 1)]


@pytest.mark.parametrize(
    ("text", "ago"),
    [
        ("90s", timedelta(seconds=90)),
        ("30m", timedelta(minutes=30)),
        ("6h", timedelta(hours=6)),
        ("2d", timedelta(days=2)),
    ],
)
def test_cli_moments_accept_durations_ago(text: str, ago: timedelta) -> None:
    before = datetime.now(UTC)
    parsed = moment(text)
    assert before - ago - timedelta(seconds=5) <= parsed <= datetime.now(UTC) - ago


def test_cli_moments_accept_rfc3339_and_refuse_naive_times() -> None:
    assert moment("2030-01-01T02:00:00Z") == datetime(2030, 1, 1, 2, tzinfo=UTC)
    for bad in ("2030-01-01T02:00:00", "yesterday"):
        with pytest.raises(argparse.ArgumentTypeError):
            moment(bad)


def test_cli_filters_deliveries_by_time_and_status(platform: Platform, tenant: dict[str, Any], cli) -> None:
    tenant["producer"].publish_event(tenant["id"], "order.paid", {"id": 6})
    platform.pump()
    token = token_of(tenant["client"])
    code, out, _ = cli(token, "deliveries", "list", "--since", "1h", "--status", "delivered", "--json")
    assert code == 0 and len(json.loads(out)["data"]) == 1
    code, out, _ = cli(token, "deliveries", "list", "--until", "1h", "--json")
    assert code == 0 and json.loads(out)["data"] == []


# -- the endpoint lifecycle ---------------------------------------------------------------------------


def test_update_endpoint_changes_only_what_is_given(tenant: dict[str, Any]) -> None:
    client, endpoint = tenant["client"], tenant["endpoint"]
    changed = client.update_endpoint(endpoint.id, max_in_flight=2, event_types=["order.paid"])
    assert (changed.max_in_flight, changed.event_types, changed.description) == (2, ["order.paid"], "orders")
    assert "secret" not in changed.model_dump()
    assert client.update_endpoint(endpoint.id, description=None).description is None
    assert client.get_endpoint(endpoint.id).max_in_flight == 2

    with pytest.raises(HookrelayError) as nothing:
        client.update_endpoint(endpoint.id)
    assert nothing.value.status == 422


def test_a_rate_limit_is_set_shown_in_health_and_cleared_through_the_client_and_cli(
    tenant: dict[str, Any], cli: Callable[..., tuple[int, str, str]]
) -> None:
    client, endpoint = tenant["client"], tenant["endpoint"]
    limited = client.update_endpoint(endpoint.id, rate_limit_per_second=50)
    assert limited.rate_limit_per_second == 50 and limited.max_in_flight == endpoint.max_in_flight
    health = client.get_endpoint_health(endpoint.id)
    assert health.rate_limit_per_second == 50 and health.backlog.parked == 0 and health.backlog.paced_seconds == 0
    with pytest.raises(HookrelayError) as too_few:  # more message groups than 5 s of the limit serves
        client.update_endpoint(endpoint.id, rate_limit_per_second=1, max_in_flight=50)
    assert too_few.value.status == 422 and [e["pointer"] for e in too_few.value.problem.errors] == [
        "/rate_limit_per_second"
    ]
    code, out, _ = cli(token_of(client), "endpoints", "update", endpoint.id, "--clear-rate-limit")
    assert code == 0 and "rate limit" in out and "none" in out
    assert client.get_endpoint(endpoint.id).rate_limit_per_second is None
    created = client.create_endpoint("https://example.com/limited", rate_limit_per_second=10)
    assert created.rate_limit_per_second == 10


def test_disable_enable_rotate_health_and_delete_through_the_client(
    platform: Platform, tenant: dict[str, Any], consumer: ScriptedConsumer
) -> None:
    client, producer, endpoint = tenant["client"], tenant["producer"], tenant["endpoint"]
    assert client.disable_endpoint(endpoint.id).state == "disabled"
    ingest_reads_endpoints_again()  # as each change applies to ingest (within ENDPOINT_LIST_SECONDS)
    missed = producer.publish_event(tenant["id"], "order.updated", {"id": 1})
    assert [d.id for d in client.list_deliveries(status="cancelled").data] == missed.delivery_ids
    assert client.enable_endpoint(endpoint.id).state == "enabled"
    ingest_reads_endpoints_again()

    rotated = client.rotate_endpoint_secret(endpoint.id, expire_previous_after_seconds=600)
    assert rotated.secret.startswith("whsec_") and rotated.secret not in repr(rotated)
    assert [s.expires_at for s in rotated.signing_secrets] == [rotated.previous_secrets_expire_at, None]
    producer.publish_event(tenant["id"], "order.updated", {"id": 2})
    platform.pump()
    [request] = consumer.wait_for(1)
    for secret in (endpoint.secret, rotated.secret):
        assert Webhook(secret).verify(request.body, request.headers)["data"] == {"id": 2}

    health = client.get_endpoint_health(endpoint.id)
    assert (health.counts["delivered"], health.counts["cancelled"], health.success_rate) == (1, 1, 1.0)
    assert health.sample.size == 2 and health.last_failure is None

    client.delete_endpoint(endpoint.id)
    assert client.list_endpoints() == [] and client.get_endpoint(endpoint.id).state == "deleted"
    with pytest.raises(HookrelayError) as refused:
        client.enable_endpoint(endpoint.id)
    assert refused.value.status == 409


def test_cli_endpoint_lifecycle(platform: Platform, tenant: dict[str, Any], consumer: ScriptedConsumer, cli) -> None:
    token, endpoint_id = token_of(tenant["client"]), tenant["endpoint"].id

    code, out, _ = cli(token, "endpoints", "update", endpoint_id, "--max-in-flight", "3", "--clear-description")
    assert code == 0 and "max in flight  3" in out and "description    -" in out
    code, out, _ = cli(token, "endpoints", "disable", endpoint_id)
    assert code == 0 and "disabled" in out and "--status cancelled" in out
    code, out, _ = cli(token, "--json", "endpoints", "enable", endpoint_id)
    assert code == 0 and json.loads(out)["state"] == "enabled"

    code, out, _ = cli(token, "--json", "endpoints", "rotate-secret", endpoint_id, "--expire-previous-after", "0")
    assert code == 0
    new_secret = json.loads(out)["secret"]
    tenant["producer"].publish_event(tenant["id"], "order.updated", {"id": 3})
    platform.pump()
    [request] = consumer.wait_for(1)
    assert Webhook(new_secret).verify(request.body, request.headers)["data"] == {"id": 3}

    code, out, _ = cli(token, "endpoints", "health", endpoint_id)
    assert code == 0 and "delivered 1" in out and "100.0%" in out
    code, out, _ = cli(token, "endpoints", "delete", endpoint_id)
    assert code == 0 and out.strip() == f"deleted {endpoint_id}"
    code, out, _ = cli(token, "endpoints", "list")
    assert code == 0 and out.strip() == "no endpoints"


@pytest.mark.parametrize(("text", "expected"), [("0", 0), ("3600", 3600), ("30m", 1800), ("7d", 604800)])
def test_cli_overlaps_accept_seconds_and_durations(text: str, expected: int) -> None:
    assert seconds(text) == expected


def test_cli_overlaps_refuse_anything_else() -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        seconds("an hour")


# --- The event-type catalogue ---

ORDER_SCHEMA = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer", "minimum": 0}}}


def test_the_client_covers_the_event_type_catalogue(
    platform: Platform, tenant: dict[str, Any], client_for: ClientFor
) -> None:
    admin = client_for(platform.admin_token)
    registered = admin.put_event_type(
        "order.created", description="An order", schema=ORDER_SCHEMA, example={"amount": 1}
    )
    assert (registered.name, registered.data_schema, registered.example) == (
        "order.created",
        ORDER_SCHEMA,
        {"amount": 1},
    )
    for name in ("order.paid", "order.shipped"):
        admin.put_event_type(name)
    page = tenant["client"].list_event_types(limit=2)
    assert [t.name for t in page.data] == ["order.created", "order.paid"] and page.next_cursor
    assert [t.name for t in tenant["client"].iter_event_types(limit=2)] == [
        "order.created",
        "order.paid",
        "order.shipped",
    ]
    assert tenant["client"].get_event_type("order.created").description == "An order"

    with pytest.raises(HookrelayError) as refused:
        tenant["producer"].publish_event(tenant["id"], "order.created", {"amount": -1})
    assert refused.value.status == 422
    assert refused.value.problem.errors == [{"pointer": "/data/amount", "detail": "must be bigger than or equal to 0"}]
    assert "/data/amount: must be bigger than or equal to 0" in refused.value.problem.describe()

    with pytest.raises(HookrelayError) as forbidden:
        tenant["client"].put_event_type("order.created")
    assert forbidden.value.status == 403
    admin.delete_event_type("order.paid")
    with pytest.raises(HookrelayError) as gone:
        admin.get_event_type("order.paid")
    assert gone.value.status == 404


def test_the_cli_covers_the_event_type_catalogue(platform: Platform, tenant: dict[str, Any], cli, tmp_path) -> None:
    schema_file = tmp_path / "order.json"
    schema_file.write_text(json.dumps(ORDER_SCHEMA))
    code, out, err = cli(
        platform.admin_token,
        "event-types",
        "put",
        "order.created",
        "--description",
        "An order",
        "--schema",
        f"@{schema_file}",
        "--example",
        '{"amount": 3}',
    )
    assert code == 0, err
    assert "order.created" in out and '"minimum": 0' in out

    code, out, _ = cli(token_of(tenant["client"]), "event-types", "list")
    header, row = out.splitlines()
    assert header.split()[:2] == ["NAME", "SCHEMA"] and row.split()[:2] == ["order.created", "yes"]
    code, out, _ = cli(token_of(tenant["client"]), "event-types", "list", "--json", "--all")
    assert [t["name"] for t in json.loads(out)["data"]] == ["order.created"]
    code, out, _ = cli(token_of(tenant["client"]), "event-types", "show", "order.created")
    assert code == 0 and '"amount": 3' in out

    code, _, err = cli(
        platform.admin_token, "event-types", "put", "bad.schema", "--schema", '{"properties": {"a": {"pattern": "x"}}}'
    )
    assert code == 1 and "422" in err and "/schema/properties/a/pattern" in err
    code, out, _ = cli(platform.admin_token, "event-types", "delete", "order.created")
    assert code == 0 and "deleted" in out
    code, _, err = cli(token_of(tenant["client"]), "event-types", "show", "order.created")
    assert code == 1 and err.startswith("error: 404 ")


def test_a_portal_session_through_the_client_and_cli(platform: Platform, tenant: dict[str, Any], cli) -> None:
    opened = tenant["client"].open_portal_session(ttl_seconds=300)
    assert opened.tenant_id == tenant["id"] and opened.portal_url.endswith(f"/portal#token={opened.token}")
    assert opened.token not in repr(opened)
    # The session's token is a client for the tenant's own routes.
    portal_client = HookrelayClient(GATEWAY_URL, opened.token, session=gateway_session())
    assert [e.id for e in portal_client.list_endpoints()] == [tenant["endpoint"].id]

    code, out, _ = cli(platform.admin_token, "portal", "open", "--tenant-id", tenant["id"], "--ttl", "10m")
    assert code == 0 and "/portal#token=hrp_ps_" in out and tenant["id"] in out
    assert opened.capabilities == ["view", "recover"]
    assert tenant["client"].open_portal_session(capabilities=["manage"]).capabilities == ["view", "manage"]
    code, out, _ = cli(platform.admin_token, "portal", "open", "--tenant-id", tenant["id"], "--capability", "manage")
    assert code == 0 and "view, manage" in out
    code, out, _ = cli(token_of(tenant["client"]), "--json", "portal", "open")
    assert code == 0 and json.loads(out)["tenant_id"] == tenant["id"]
    code, _, err = cli(opened.token, "portal", "open")  # a session cannot open another
    assert code == 1 and "403" in err


def test_recovered_deliveries_through_the_client_and_cli(
    platform: Platform, tenant: dict[str, Any], consumer: ScriptedConsumer, cli
) -> None:
    """A dead delivery whose replay was delivered shows "dead, recovered by dlv_…"; `--unrecovered` leaves it out,
    and a redrive skips it unless `--include-recovered`."""
    now = datetime.now(UTC)
    endpoint_id, client = tenant["endpoint"].id, tenant["client"]
    recovered, still_dead = (seed(tenant["id"], endpoint_id, now - timedelta(minutes=30 + i)) for i in range(2))
    replay = client.replay_delivery(recovered.delivery.id)
    platform.pump()

    shown = client.get_delivery(recovered.delivery.id)
    assert (shown.status, shown.recovered_by, shown.shown_status) == (
        "dead",
        replay.delivery_id,
        f"dead, recovered by {replay.delivery_id}",
    )
    assert shown.recovered_at is not None
    unrecovered = client.list_deliveries(status="dead", recovered=False).data
    assert [d.id for d in unrecovered] == [still_dead.delivery.id]
    assert [d.id for d in client.list_deliveries(status="dead", recovered=True).data] == [recovered.delivery.id]

    token = token_of(client)
    code, out, _ = cli(token, "deliveries", "list", "--status", "dead")
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert f"dead, recovered by {replay.delivery_id}" in rows[recovered.delivery.id]
    assert "recovered" not in rows[still_dead.delivery.id]
    code, out, _ = cli(token, "deliveries", "list", "--status", "dead", "--unrecovered", "--json")
    assert code == 0 and [d["id"] for d in json.loads(out)["data"]] == [still_dead.delivery.id]
    code, out, _ = cli(token, "deliveries", "show", recovered.delivery.id)
    assert code == 0 and f"dead, recovered by {replay.delivery_id}" in out

    accepted = client.redrive(endpoint_id, now - timedelta(hours=1), now)
    run_redrive_pages(platform)
    done = client.get_redrive(accepted.redrive_id)
    assert (done.total, done.replayed, done.skipped, done.include_recovered) == (2, 1, 1, False)
    code, out, _ = cli(token, "redrive", endpoint_id, "--since", "1h", "--include-recovered", "--json")
    assert code == 0
    run_redrive_pages(platform)
    everything = client.get_redrive(json.loads(out)["redrive_id"])
    assert (everything.replayed, everything.skipped, everything.include_recovered) == (2, 0, True)


def test_an_aws_destination_through_the_client_and_cli(tenant: dict[str, Any], cli) -> None:
    """The CLI makes an SQS destination with its role, shows the external ID its trust policy must require, and moves
    the endpoint back to a webhook URL (clearing the role) through the client."""
    token, client = token_of(tenant["client"]), tenant["client"]
    queue = "arn:aws:sqs:us-east-1:123456789012:orders"
    role = "arn:aws:iam::123456789012:role/hookrelay-orders"

    code, out, _ = cli(token, "endpoints", "create", "--url", queue, "--role-arn", role)
    assert code == 0 and f"external id  hookrelay-{tenant['id']}" in out
    [created] = [e for e in client.list_endpoints() if e.url == queue]
    assert (created.kind, created.role_arn, created.external_id) == ("sqs", role, f"hookrelay-{tenant['id']}")
    code, out, _ = cli(token, "endpoints", "show", created.id)
    assert code == 0 and "kind           sqs" in out and role in out

    moved = client.update_endpoint(created.id, url="https://8.8.8.8/hook", role_arn=None)
    assert (moved.kind, moved.role_arn, moved.external_id) == ("http", None, None)


def test_pull_delivery_through_the_client_and_cli(platform: Platform, tenant: dict[str, Any], cli) -> None:
    """A poll endpoint made with the CLI; its messages read with the client, verified, and acknowledged with the
    CLI's --after (they are not returned again)."""
    token, client = token_of(tenant["client"]), tenant["client"]
    code, out, _ = cli(token, "--json", "endpoints", "create", "--poll", "--event-type", "order.*")
    assert code == 0
    created = json.loads(out)
    assert (created["kind"], created["url"]) == ("poll", None)
    tenant["producer"].publish_event(tenant["id"], "order.updated", {"id": 5})
    platform.pump()

    page = client.read_messages(created["id"])
    message = next(m for m in page.data if m.type == "order.updated")
    assert Webhook(created["secret"]).verify(message.body, message.headers)["data"] == {"id": 5}
    code, out, _ = cli(token, "endpoints", "messages", created["id"], "--after", str(page.next_after))
    assert code == 0 and out.startswith("no messages")
    assert client.read_messages(created["id"]).data == []


def test_endpoint_stats_through_the_client_and_the_cli_chart(
    platform: Platform, tenant: dict[str, Any], consumer: ScriptedConsumer, cli
) -> None:
    consumer.queue([Reply(502, b"down"), Reply(200, b"ok")])
    for n in range(2):
        tenant["producer"].publish_event(tenant["id"], "order.updated", {"id": n})
    platform.pump()
    consumer.wait_for(2)
    endpoint_id = tenant["endpoint"].id
    stats = tenant["client"].get_endpoint_stats(endpoint_id, hours=3)
    assert len(stats.hours) == 3 and not stats.partial and stats.deliveries_read == 2
    now = stats.hours[-1]
    assert (now.delivered, now.failed_attempts, now.dead, now.attempts) == (1, 1, 0, 2)
    assert now.latency_ms.p50 is not None and now.latency_ms.p50 <= now.latency_ms.p99  # type: ignore[operator]
    assert now.wait_ms.p50 is not None and now.wait_ms.p50 <= now.wait_ms.p99  # type: ignore[operator]

    code, out, _ = cli(token_of(tenant["client"]), "deliveries", "stats", "--endpoint", endpoint_id, "--hours", "3")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == f"endpoint {endpoint_id}: 2 deliveries read"
    assert lines[2].split()[:4] == ["HOUR", "(UTC)", "DELIVERED", "FAILED"]
    last = lines[-1].split()
    assert last[2:5] == ["1", "1", "0"] and last[-1] == "#" * 15 + "x" * 15  # one of each, half the width each
    assert lines[2].split()[-5:] == ["WAIT", "P50", "WAIT", "P99", "CHART"]
    assert last[8:10] == [str(now.wait_ms.p50), str(now.wait_ms.p99)]
    assert all(line.split()[2:5] == ["0", "0", "0"] for line in lines[3:-1])  # the two earlier hours: nothing

    code, out, _ = cli(token_of(tenant["client"]), "--json", "deliveries", "stats", "--endpoint", endpoint_id)
    assert code == 0 and json.loads(out)["hours"][-1]["delivered"] == 1


def test_send_prints_ingests_warning_of_a_type_unknown_to_the_catalogue(
    platform: Platform, tenant: dict[str, Any], cli: Callable[..., tuple[int, str, str]]
) -> None:
    platform.call("PUT", "/v1/event-types/order.created", platform.admin_token, {"description": "placed"})
    producer = platform.new_key("producer")
    code, out, _ = cli(producer, "send", "--tenant-id", tenant["id"], "--type", "oder.created", "--data", "{}")
    assert code == 0 and "0 deliveries" in out
    assert "warning: unknown_event_type:" in out and "did you mean order.created?" in out
    published = tenant["producer"].publish_event(tenant["id"], "oder.created", {})
    assert [warning.code for warning in published.warnings] == ["unknown_event_type"]
