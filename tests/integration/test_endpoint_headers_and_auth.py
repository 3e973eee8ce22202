"""Custom headers and endpoint authentication on moto, through the real API and delivery handlers, to consumers (and
an OAuth2 token server) listening on 127.0.0.1: what arrives, what is shown, what is refused, and what is never
logged."""

from __future__ import annotations

import base64
import importlib
import io
import json
import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs

import pytest
from hookrelay_client import HookrelayClient, basic_auth, bearer_auth, header, oauth2_client_credentials
from hookrelay_client.cli import main as cli_main
from standardwebhooks import Webhook

from tests.integration.test_asymmetric_signatures import conforms
from tests.integration.test_endpoint_lifecycle import Tenant, stored
from tests.support.consumer import Received, Reply, ScriptedConsumer
from tests.support.gateway_adapter import GATEWAY_URL, gateway_session
from tests.support.platform import Platform

TOKEN_SECRET = "s3cr3t-client-secret"
BASIC_PASSWORD = "pa55-w0rd-never-shown"
BEARER_TOKEN = "static.bearer-token_never~shown"
HEADER_SECRET = "gw-key-never-shown-0123"


def issued(token: str, expires_in: int = 3600) -> Reply:
    body = {"access_token": token, "token_type": "Bearer", "expires_in": expires_in}
    return Reply(200, json.dumps(body).encode(), (("content-type", "application/json"),))


@pytest.fixture
def token_server() -> Any:
    server = ScriptedConsumer(default=issued("tok-default"))
    yield server
    server.close()


def token_url(server: ScriptedConsumer) -> str:
    return server.url.replace("/hook", "/oauth/token")


def oauth2(server: ScriptedConsumer, **fields: Any) -> dict[str, Any]:
    return {
        "kind": "oauth2_client_credentials",
        "token_url": token_url(server),
        "client_id": "hookrelay-client",
        "client_secret": TOKEN_SECRET,
        "scope": "webhooks:write",
    } | fields


def problems(response: Any) -> dict[str, str]:
    assert response.status == 422, response.body
    return {e["pointer"]: e["detail"] for e in response.json()["errors"]}


# --- Custom headers ---


def test_custom_headers_arrive_beside_a_valid_signature_and_a_secret_one_is_never_shown(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    tenant = Tenant(platform)
    headers = [
        {"name": "X-Route", "value": "eu-1"},
        {"name": "X-Api-Key", "value": HEADER_SECRET, "secret": True},
    ]
    created = tenant.endpoint(consumer.url, headers=headers)
    conforms(created, "/v1/endpoints", "post", 201)
    assert created["headers"] == [
        {"name": "X-Route", "value": "eu-1", "secret": False},
        {"name": "X-Api-Key", "secret": True},
    ]
    shown = tenant.call("GET", f"/v1/endpoints/{created['id']}").json()
    conforms(shown, "/v1/endpoints/{endpoint_id}", "get", 200)
    assert shown["headers"] == created["headers"]
    assert HEADER_SECRET not in json.dumps(shown) + json.dumps(tenant.call("GET", "/v1/endpoints").json())

    tenant.publish()
    platform.pump()
    [request] = consumer.wait_for(1)
    assert request.headers["x-route"] == "eu-1" and request.headers["x-api-key"] == HEADER_SECRET
    assert Webhook(created["secret"]).verify(request.body, request.headers)["type"] == "order.updated"


def test_a_header_that_tries_to_override_the_signature_is_refused_with_its_pointer(platform: Platform) -> None:
    tenant = Tenant(platform)
    forged = {"name": "Webhook-Signature", "value": "v1,Zm9yZ2Vk"}
    refused = tenant.call("POST", "/v1/endpoints", {"url": "http://127.0.0.1:9/a", "headers": [forged]})
    assert "/headers/0/name" in problems(refused)
    assert "signature" in problems(refused)["/headers/0/name"]

    endpoint_id = tenant.endpoint("http://127.0.0.1:9/a")["id"]
    ok = {"name": "X-Ok", "value": "1"}
    refused = tenant.call("PATCH", f"/v1/endpoints/{endpoint_id}", {"headers": [ok, forged]})
    assert list(problems(refused)) == ["/headers/1/name"]
    assert stored(tenant, endpoint_id).headers == []  # nothing of a refused change is written


@pytest.mark.parametrize(
    "name",
    [
        "webhook-id",
        "webhook-timestamp",
        "Webhook-Anything",
        "Host",
        "Content-Length",
        "Transfer-Encoding",
        "Connection",
        "Keep-Alive",
        "Proxy-Authorization",
        "TE",
        "Trailer",
        "Upgrade",
        "Content-Type",
        "bad name",
    ],
)
def test_each_reserved_or_malformed_header_name_is_refused(platform: Platform, name: str) -> None:
    tenant = Tenant(platform)
    body = {"url": "http://127.0.0.1:9/a", "headers": [{"name": name, "value": "x"}]}
    assert "/headers/0/name" in problems(tenant.call("POST", "/v1/endpoints", body))


def test_caps_and_values_are_refused_with_their_pointers(platform: Platform) -> None:
    tenant = Tenant(platform)
    url = "http://127.0.0.1:9/a"
    eleven = [{"name": f"X-{i}", "value": "v"} for i in range(11)]
    assert list(problems(tenant.call("POST", "/v1/endpoints", {"url": url, "headers": eleven}))) == ["/headers"]
    long_name = [{"name": "X-" + "a" * 70, "value": "v"}]
    assert list(problems(tenant.call("POST", "/v1/endpoints", {"url": url, "headers": long_name}))) == [
        "/headers/0/name"
    ]
    split = [{"name": "X-A", "value": "a\r\nX-Injected: 1"}, {"name": "X-B", "value": "b" * 1025}]
    assert list(problems(tenant.call("POST", "/v1/endpoints", {"url": url, "headers": split}))) == [
        "/headers/0/value",
        "/headers/1/value",
    ]
    long_secret = {"kind": "bearer", "token": "t" * 1025}
    assert list(problems(tenant.call("POST", "/v1/endpoints", {"url": url, "auth": long_secret}))) == ["/auth/token"]


def test_authorization_is_the_auth_s_once_there_is_one(platform: Platform) -> None:
    tenant = Tenant(platform)
    header = {"name": "Authorization", "value": "Token abc"}
    endpoint_id = tenant.endpoint("http://127.0.0.1:9/a", headers=[header])["id"]  # no auth: allowed
    refused = tenant.call("PATCH", f"/v1/endpoints/{endpoint_id}", {"auth": {"kind": "bearer", "token": "abc"}})
    assert list(problems(refused)) == ["/auth"]
    both = {"headers": [header], "auth": {"kind": "bearer", "token": "abc"}}
    assert list(problems(tenant.call("POST", "/v1/endpoints", {"url": "http://127.0.0.1:9/a"} | both))) == [
        "/headers/0/name"
    ]


def test_a_secret_header_left_without_value_keeps_the_stored_one(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    tenant = Tenant(platform)
    secret = {"name": "X-Api-Key", "value": HEADER_SECRET, "secret": True}
    endpoint_id = tenant.endpoint(consumer.url, headers=[secret])["id"]
    changed = tenant.call(
        "PATCH",
        f"/v1/endpoints/{endpoint_id}",
        {"headers": [{"name": "x-api-key", "secret": True}, {"name": "X-B", "value": "2"}]},
    )
    assert changed.status == 200, changed.body
    assert [h.value for h in stored(tenant, endpoint_id).headers] == [HEADER_SECRET, "2"]
    unknown = tenant.call("PATCH", f"/v1/endpoints/{endpoint_id}", {"headers": [{"name": "X-New", "secret": True}]})
    assert list(problems(unknown)) == ["/headers/0/value"]


# --- Basic and bearer ---


@pytest.mark.parametrize(
    ("auth", "expected"),
    [
        (
            {"kind": "basic", "username": "hookrelay", "password": BASIC_PASSWORD},
            "Basic " + base64.b64encode(f"hookrelay:{BASIC_PASSWORD}".encode()).decode(),
        ),
        ({"kind": "bearer", "token": BEARER_TOKEN}, f"Bearer {BEARER_TOKEN}"),
    ],
)
def test_basic_and_bearer_credentials_arrive_and_are_never_shown(
    platform: Platform, consumer: ScriptedConsumer, auth: dict[str, Any], expected: str
) -> None:
    tenant = Tenant(platform)
    created = tenant.endpoint(consumer.url, auth=auth)
    conforms(created, "/v1/endpoints", "post", 201)
    shown = tenant.call("GET", f"/v1/endpoints/{created['id']}").json()
    for view in (created, shown):
        assert view["auth"]["kind"] == auth["kind"]
        assert BASIC_PASSWORD not in json.dumps(view) and BEARER_TOKEN not in json.dumps(view)
    if auth["kind"] == "basic":
        assert shown["auth"]["username"] == "hookrelay"

    tenant.publish()
    platform.pump()
    [request] = consumer.wait_for(1)
    assert request.headers["authorization"] == expected


def test_new_credentials_are_used_from_the_next_attempt_and_auth_null_removes_them(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    tenant = Tenant(platform)
    endpoint_id = tenant.endpoint(consumer.url, auth={"kind": "bearer", "token": "old-token"})["id"]
    tenant.publish()
    platform.pump()
    changed = tenant.call("PATCH", f"/v1/endpoints/{endpoint_id}", {"auth": {"kind": "bearer", "token": "new-token"}})
    assert changed.status == 200, changed.body
    tenant.publish()
    platform.pump()
    removed = tenant.call("PATCH", f"/v1/endpoints/{endpoint_id}", {"auth": None})
    assert removed.status == 200 and removed.json()["auth"] is None
    tenant.publish()
    platform.pump()
    received = consumer.wait_for(3)
    assert [r.headers.get("authorization") for r in received] == ["Bearer old-token", "Bearer new-token", None]


@pytest.mark.parametrize(
    ("auth", "pointer"),
    [
        ({"kind": "basic", "username": "a:b", "password": "p"}, "/auth/username"),
        ({"kind": "basic", "username": "a"}, "/auth/password"),
        ({"kind": "bearer", "token": "has space"}, "/auth/token"),
        ({"kind": "bearer", "token": "t", "client_id": "x"}, "/auth/client_id"),
        ({"kind": "oauth2_client_credentials", "client_id": "c", "client_secret": "s"}, "/auth/token_url"),
        (
            {
                "kind": "oauth2_client_credentials",
                "token_url": "ftp://tokens.example.com/token",
                "client_id": "c",
                "client_secret": "s",
            },
            "/auth/token_url",
        ),
    ],
)
def test_auth_is_validated_with_the_pointer_of_the_problem(
    platform: Platform, auth: dict[str, Any], pointer: str
) -> None:
    tenant = Tenant(platform)
    assert pointer in problems(tenant.call("POST", "/v1/endpoints", {"url": "http://127.0.0.1:9/a", "auth": auth}))


# --- OAuth2 client credentials ---


def token_requests(server: ScriptedConsumer) -> list[Received]:
    return [r for r in server.received if r.path == "/oauth/token"]


def test_an_oauth2_token_is_fetched_once_and_cached_across_deliveries(
    platform: Platform, consumer: ScriptedConsumer, token_server: ScriptedConsumer
) -> None:
    tenant = Tenant(platform)
    token_server.queue([issued("tok-1")])
    created = tenant.endpoint(consumer.url, auth=oauth2(token_server))
    assert created["auth"] == {
        "kind": "oauth2_client_credentials",
        "token_url": token_url(token_server),
        "client_id": "hookrelay-client",
        "scope": "webhooks:write",
        "audience": None,
        "set_at": created["auth"]["set_at"],
    }
    for _ in range(2):
        tenant.publish()
        platform.pump()
    received = consumer.wait_for(2)
    assert [r.headers["authorization"] for r in received] == ["Bearer tok-1", "Bearer tok-1"]
    [fetch] = token_requests(token_server)
    form = parse_qs(fetch.body.decode())
    assert form == {"grant_type": ["client_credentials"], "scope": ["webhooks:write"]}
    assert (
        fetch.headers["authorization"]
        == "Basic " + base64.b64encode(f"hookrelay-client:{TOKEN_SECRET}".encode()).decode()
    )


def test_a_401_fetches_a_new_token_once_and_the_attempt_is_sent_again(
    platform: Platform, consumer: ScriptedConsumer, token_server: ScriptedConsumer
) -> None:
    tenant = Tenant(platform)
    token_server.queue([issued("tok-revoked"), issued("tok-fresh")])
    consumer.queue([Reply(401)])
    tenant.endpoint(consumer.url, auth=oauth2(token_server))
    accepted = tenant.publish()
    platform.pump()
    received = consumer.wait_for(2)
    assert [r.headers["authorization"] for r in received] == ["Bearer tok-revoked", "Bearer tok-fresh"]
    assert len(token_requests(token_server)) == 2
    [delivery_id] = accepted["delivery_ids"]
    shown = tenant.delivery(delivery_id)
    assert shown["status"] == "delivered" and [a["status_code"] for a in shown["attempts"]] == [200]

    tenant.publish()  # the fresh token is the cached one now
    platform.pump()
    assert consumer.wait_for(3)[2].headers["authorization"] == "Bearer tok-fresh"
    assert len(token_requests(token_server)) == 2


def test_a_second_401_is_the_attempt_s_outcome(
    platform: Platform, consumer: ScriptedConsumer, token_server: ScriptedConsumer
) -> None:
    tenant = Tenant(platform)
    consumer.default = Reply(401)
    tenant.endpoint(consumer.url, auth=oauth2(token_server))
    accepted = tenant.publish()
    platform.pump()
    assert len(consumer.wait_for(2)) == 2  # one refresh, no more
    assert len(token_requests(token_server)) == 2
    shown = tenant.delivery(accepted["delivery_ids"][0])
    assert shown["status"] == "retrying" and shown["attempts"][0]["status_code"] == 401


def test_a_token_url_that_is_down_is_a_recorded_failed_attempt_retried_on_the_schedule(
    platform: Platform, consumer: ScriptedConsumer, token_server: ScriptedConsumer
) -> None:
    tenant = Tenant(platform)
    token_server.default = Reply(503, b'{"error": "temporarily_unavailable"}')
    tenant.endpoint(consumer.url, auth=oauth2(token_server))
    accepted = tenant.publish()
    platform.pump()
    shown = tenant.delivery(accepted["delivery_ids"][0])
    assert shown["status"] == "retrying" and shown["next_attempt_at"]
    [attempt] = shown["attempts"]
    assert attempt["status_code"] is None
    assert attempt["error"] == "token_error: the token URL answered 503 (temporarily_unavailable)"
    assert consumer.received == []  # nothing sent without a token


def test_new_client_credentials_never_use_the_old_credentials_token(
    platform: Platform, consumer: ScriptedConsumer, token_server: ScriptedConsumer
) -> None:
    tenant = Tenant(platform)
    token_server.queue([issued("tok-old"), issued("tok-new")])
    endpoint_id = tenant.endpoint(consumer.url, auth=oauth2(token_server))["id"]
    tenant.publish()
    platform.pump()
    # A new client secret (the rest kept): a new version of the credentials, so a new token on the next attempt.
    changed = tenant.call(
        "PATCH", f"/v1/endpoints/{endpoint_id}", {"auth": oauth2(token_server, client_secret="rotated")}
    )
    assert changed.status == 200, changed.body
    tenant.publish()
    platform.pump()
    assert [r.headers["authorization"] for r in consumer.wait_for(2)] == ["Bearer tok-old", "Bearer tok-new"]
    second = token_requests(token_server)[1]
    assert second.headers["authorization"] == "Basic " + base64.b64encode(b"hookrelay-client:rotated").decode()


def test_a_scope_change_keeps_the_stored_client_secret(
    platform: Platform, consumer: ScriptedConsumer, token_server: ScriptedConsumer
) -> None:
    tenant = Tenant(platform)
    endpoint_id = tenant.endpoint(consumer.url, auth=oauth2(token_server))["id"]
    before = stored(tenant, endpoint_id).auth
    without_secret = {k: v for k, v in oauth2(token_server, scope="other").items() if k != "client_secret"}
    changed = tenant.call("PATCH", f"/v1/endpoints/{endpoint_id}", {"auth": without_secret})
    assert changed.status == 200, changed.body
    after = stored(tenant, endpoint_id).auth
    assert before is not None and after is not None
    assert after.client_secret == TOKEN_SECRET and after.scope == "other" and after.version != before.version


# --- Never logged ---


@pytest.fixture
def log_output() -> Iterator[io.StringIO]:
    """Every line any logger writes, formatted as it would leave the function: the Powertools loggers (JSON, with
    their extra fields) hold their stream from when they were made, so each stream handler is pointed here."""
    for handler_module in ("api", "ingest", "delivery", "authorizer"):  # their loggers exist from here on
        importlib.import_module(f"hookrelay.handlers.{handler_module}")
    output = io.StringIO()
    loggers = [logging.getLogger(), *(logging.getLogger(name) for name in list(logging.root.manager.loggerDict))]
    swapped = [
        (handler, handler.setStream(output))
        for logger in loggers
        for handler in logger.handlers
        if type(handler) is logging.StreamHandler
    ]
    for name in ("hookrelay", "urllib3", "requests"):  # the HTTP stack at its most verbose too
        logging.getLogger(name).setLevel(logging.DEBUG)
    catch_all = logging.StreamHandler(output)
    logging.getLogger().addHandler(catch_all)
    try:
        yield output
    finally:
        logging.getLogger().removeHandler(catch_all)
        for name in ("hookrelay", "urllib3", "requests"):
            logging.getLogger(name).setLevel(logging.NOTSET)
        for handler, previous in swapped:
            if previous is not None:
                handler.setStream(previous)


def test_no_secret_appears_in_any_log_line_of_a_delivery(
    platform: Platform, consumer: ScriptedConsumer, token_server: ScriptedConsumer, log_output: io.StringIO
) -> None:
    tenant = Tenant(platform)
    token_server.queue([issued("tok-logged-never-1"), issued("tok-logged-never-2")])
    refusing = ScriptedConsumer()
    refusing.queue([Reply(401), Reply(500)])  # a refresh, then a failed attempt (its record and its log line)
    secret_header = {"name": "X-Api-Key", "value": HEADER_SECRET, "secret": True}
    tenant.endpoint(refusing.url, headers=[secret_header], auth=oauth2(token_server))
    basic = {"kind": "basic", "username": "u", "password": BASIC_PASSWORD}
    tenant.endpoint(consumer.url, auth=basic)
    tenant.endpoint(consumer.url, auth={"kind": "bearer", "token": BEARER_TOKEN})
    tenant.publish()
    platform.pump()
    try:
        assert [r.headers["x-api-key"] for r in refusing.wait_for(2)] == [HEADER_SECRET] * 2
        assert len(consumer.wait_for(2)) == 2
    finally:
        refusing.close()
    text = log_output.getvalue()
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert any(line.get("message") == "attempt" and line.get("status") == "retrying" for line in lines), text
    encoded = base64.b64encode(f"u:{BASIC_PASSWORD}".encode()).decode()
    for secret in (TOKEN_SECRET, BASIC_PASSWORD, BEARER_TOKEN, HEADER_SECRET, "tok-logged-never", encoded):
        assert secret not in text, secret


# --- The client and the CLI ---


def test_the_client_sets_shows_and_changes_headers_and_auth(
    platform: Platform, consumer: ScriptedConsumer, token_server: ScriptedConsumer
) -> None:
    tenant = Tenant(platform)
    client = HookrelayClient(GATEWAY_URL, tenant.token, session=gateway_session())
    created = client.create_endpoint(
        consumer.url,
        headers=[header("X-Route", "eu"), header("X-Api-Key", HEADER_SECRET, secret=True)],
        auth=oauth2_client_credentials(token_url(token_server), "cid", TOKEN_SECRET, scope="s"),
    )
    shown = client.get_endpoint(created.id)
    assert [(h.name, h.value, h.secret) for h in shown.headers] == [("X-Route", "eu", False), ("X-Api-Key", None, True)]
    assert shown.auth is not None and (shown.auth.kind, shown.auth.client_id) == ("oauth2_client_credentials", "cid")
    assert TOKEN_SECRET not in repr(shown) and HEADER_SECRET not in repr(shown)

    changed = client.update_endpoint(created.id, headers=[header("X-Api-Key", secret=True)], auth=bearer_auth("t2"))
    assert [h.name for h in changed.headers] == ["X-Api-Key"] and changed.auth and changed.auth.kind == "bearer"
    assert stored(tenant, created.id).headers[0].value == HEADER_SECRET  # kept, never sent back
    assert client.update_endpoint(created.id, auth=None).auth is None
    basic = client.update_endpoint(created.id, auth=basic_auth("u", "p"))
    assert basic.auth and basic.auth.username == "u"
    assert client.update_endpoint(created.id, description="unchanged auth").auth == basic.auth


def test_the_cli_reads_every_secret_from_the_environment(
    platform: Platform, consumer: ScriptedConsumer, token_server: ScriptedConsumer
) -> None:
    tenant = Tenant(platform)

    def cli(*argv: str) -> tuple[int, str]:
        out = io.StringIO()
        env = {
            "HOOKRELAY_URL": GATEWAY_URL,
            "HOOKRELAY_TOKEN": tenant.token,
            "GATEWAY_KEY": HEADER_SECRET,
            "CLIENT_SECRET": TOKEN_SECRET,
            "PASSWORD": BASIC_PASSWORD,
        }
        with pytest.MonkeyPatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            code = cli_main(list(argv), session=gateway_session(), stdout=out, stderr=io.StringIO())
        return code, out.getvalue()

    code, out = cli(
        "--json", "endpoints", "create", "--url", consumer.url,
        "--header", "X-Route=eu", "--secret-header", "X-Api-Key=GATEWAY_KEY",
        "--auth", "oauth2_client_credentials", "--token-url", token_url(token_server),
        "--client-id", "cid", "--client-secret-env", "CLIENT_SECRET",
    )  # fmt: skip
    assert code == 0, out
    endpoint_id = json.loads(out)["id"]
    assert stored(tenant, endpoint_id).headers[1].value == HEADER_SECRET
    code, out = cli("endpoints", "show", endpoint_id)
    assert code == 0 and "X-Route: eu" in out and "X-Api-Key: (secret)" in out and "client_id=cid" in out
    assert HEADER_SECRET not in out and TOKEN_SECRET not in out
    code, out = cli(
        "endpoints", "update", endpoint_id, "--auth", "basic", "--username", "u", "--password-env", "PASSWORD"
    )
    assert code == 0 and "basic username=u" in out and BASIC_PASSWORD not in out
    code, out = cli("endpoints", "update", endpoint_id, "--clear-headers", "--auth", "none")
    assert code == 0
    cleared = stored(tenant, endpoint_id)
    assert cleared.headers == [] and cleared.auth is None
