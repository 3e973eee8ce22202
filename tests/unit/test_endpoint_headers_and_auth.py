"""Custom headers and endpoint auth, pure: the header rules, the auth rules, the token answer, the 401 refresh, the
token cache and the token URL's guard at fetch time."""

from __future__ import annotations

import base64
import json
import re
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from hookrelay.adapters.http_sender import RequestsSender
from hookrelay.adapters.oauth2 import CachedTokens
from hookrelay.domain import custom_headers, endpoint_auth
from hookrelay.domain.classification import FailureKind, Outcome, classify
from hookrelay.domain.custom_headers import CustomHeader, GivenHeader
from hookrelay.domain.endpoint_auth import AuthKind, EndpointAuth, TokenUnavailable
from hookrelay.domain.errors import InvalidDocument
from hookrelay.domain.models import Endpoint
from hookrelay.services.endpoint_requests import EndpointRequests
from hookrelay.services.ports import SendResult
from tests.support.consumer import Reply, ScriptedConsumer
from tests.unit.test_endpoint_service import an_endpoint, service_with

NOW = datetime(2026, 1, 1, tzinfo=UTC)

# --- Which headers may be set ---


@pytest.mark.parametrize(
    "name",
    [
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "WEBHOOK-SIGNATURE",
        "webhook-future-header",
        "Connection",
        "Keep-Alive",
        "Proxy-Authorization",
        "Proxy-Connection",
        "TE",
        "Trailer",
        "Transfer-Encoding",
        "Upgrade",
        "Host",
        "Content-Length",
        "Content-Type",
        "User-Agent",
        "",
        "X Space",
        "X:Colon",
        "Ünicode",
        "x" * (custom_headers.MAX_NAME_LENGTH + 1),
    ],
)
def test_reserved_and_malformed_names_are_refused(name: str) -> None:
    assert custom_headers.refusal(name, has_auth=False) is not None


@pytest.mark.parametrize("name", ["X-Api-Key", "X-Route", "Authorization", "api_key", "X-A.b~c"])
def test_other_token_names_may_be_set(name: str) -> None:
    assert custom_headers.refusal(name, has_auth=False) is None


def test_authorization_is_refused_only_beside_auth() -> None:
    assert custom_headers.refusal("authorization", has_auth=True) is not None


@pytest.mark.parametrize("value", ["a\r\nX-Evil: 1", "a\nb", "nul\x00", " leading", "trailing ", "", "é", "x" * 1025])
def test_values_that_could_split_or_garble_a_header_are_refused(value: str) -> None:
    assert custom_headers.value_refusal(value) is not None


def test_every_problem_is_named_by_its_pointer() -> None:
    headers = [
        CustomHeader(name="X-Ok", value="1"),
        CustomHeader(name="webhook-signature", value="v1,forged"),
        CustomHeader(name="x-ok", value="bad\r\n"),
    ]
    found = custom_headers.problems(headers, has_auth=False)
    assert [p["pointer"] for p in found] == ["/headers/1/name", "/headers/2/name", "/headers/2/value"]
    many = [CustomHeader(name=f"X-{i}", value="v") for i in range(custom_headers.MAX_HEADERS + 1)]
    assert [p["pointer"] for p in custom_headers.problems(many, has_auth=False)] == ["/headers"]
    big = [CustomHeader(name=f"X-{i}", value="v" * 1000) for i in range(5)]
    assert [p["pointer"] for p in custom_headers.problems(big, has_auth=False)] == ["/headers"]


def test_an_attempt_never_sends_a_stored_header_the_rule_refuses_today() -> None:
    stored = [CustomHeader(name="X-A", value="1"), CustomHeader(name="Webhook-Signature", value="forged")]
    assert custom_headers.outbound_headers(stored, has_auth=False) == {"X-A": "1"}
    stored = [CustomHeader(name="Authorization", value="Token t")]
    assert custom_headers.outbound_headers(stored, has_auth=True) == {}


def test_a_secret_header_is_shown_by_name_alone() -> None:
    assert custom_headers.masked(CustomHeader(name="X-K", value="v", secret=True)) == {"name": "X-K", "secret": True}


def test_a_secret_header_without_value_keeps_the_stored_one_by_name() -> None:
    stored = [CustomHeader(name="X-Key", value="kept", secret=True)]
    headers, found = custom_headers.resolve([GivenHeader("x-key", None, True)], stored)
    assert found == [] and headers == [CustomHeader(name="x-key", value="kept", secret=True)]
    _, found = custom_headers.resolve([GivenHeader("X-Other", None, True)], stored)
    assert [p["pointer"] for p in found] == ["/headers/0/value"]


# --- The service: one 422 with every pointer, nothing written ---


def test_the_service_refuses_with_pointers_and_writes_nothing() -> None:
    service, endpoints = service_with(an_endpoint())
    with pytest.raises(InvalidDocument) as refused:
        service.update("ten_1", "ep_1", headers=[GivenHeader("webhook-signature", "v1,x")])
    assert refused.value.errors[0]["pointer"] == "/headers/0/name"
    assert endpoints.get("ten_1", "ep_1").headers == []


def test_the_token_url_is_held_to_the_endpoint_rule_at_config_time() -> None:
    service, _ = service_with(an_endpoint())
    for url in (
        "http://tokens.example.com/t",
        "https://169.254.169.254/t",
        "https://10.0.0.1/t",
        "https://localhost/t",
    ):
        auth = {"kind": "oauth2_client_credentials", "token_url": url, "client_id": "c", "client_secret": "s"}
        with pytest.raises(InvalidDocument) as refused:
            service.update("ten_1", "ep_1", auth=auth)
        assert [e["pointer"] for e in refused.value.errors] == ["/auth/token_url"], url


def test_new_credentials_get_a_new_version_and_auth_null_removes_them() -> None:
    service, endpoints = service_with(an_endpoint())
    service.update("ten_1", "ep_1", auth={"kind": "bearer", "token": "a"})
    first = endpoints.get("ten_1", "ep_1").auth
    service.update("ten_1", "ep_1", auth={"kind": "bearer", "token": "b"})
    second = endpoints.get("ten_1", "ep_1").auth
    assert first is not None and second is not None and first.version != second.version and second.token == "b"
    service.update("ten_1", "ep_1", auth=None)
    assert endpoints.get("ten_1", "ep_1").auth is None


def test_a_change_of_credentials_is_one_write_so_a_crash_leaves_the_old_ones_whole() -> None:
    service, endpoints = service_with(an_endpoint(auth=auth_of(AuthKind.BASIC, username="u", password="old")))

    def crash() -> None:
        raise SystemExit("the process dies before its write")

    endpoints.before_write = crash
    with pytest.raises(SystemExit):
        service.update(
            "ten_1",
            "ep_1",
            headers=[GivenHeader("X-New", "1")],
            auth={"kind": "basic", "username": "v", "password": "new"},
        )
    kept = endpoints.get("ten_1", "ep_1")
    assert kept.headers == [] and kept.auth is not None and (kept.auth.username, kept.auth.password) == ("u", "old")
    endpoints.before_write = None  # the request again (the client saw no answer): applied whole
    service.update("ten_1", "ep_1", headers=[GivenHeader("X-New", "1")], auth={"kind": "bearer", "token": "t"})
    changed = endpoints.get("ten_1", "ep_1")
    assert [h.name for h in changed.headers] == ["X-New"] and changed.auth is not None and changed.auth.token == "t"


def test_delete_drops_the_headers_and_the_credentials() -> None:
    service, endpoints = service_with(
        an_endpoint(
            headers=[CustomHeader(name="X-K", value="v", secret=True)], auth=auth_of(AuthKind.BEARER, token="t")
        )
    )
    service.delete("ten_1", "ep_1")
    deleted = endpoints.get("ten_1", "ep_1")
    assert deleted.headers == [] and deleted.auth is None


# --- Auth rules and the token answer ---


def auth_of(kind: AuthKind, **fields: Any) -> EndpointAuth:
    return EndpointAuth(kind=kind, version=fields.pop("version", "cred_1"), set_at=NOW, **fields)


def oauth(**fields: Any) -> EndpointAuth:
    values = {"token_url": "https://tokens.example.com/t", "client_id": "id", "client_secret": "sec"} | fields
    return auth_of(AuthKind.OAUTH2, **values)


def test_authorization_headers() -> None:
    basic = auth_of(AuthKind.BASIC, username="u", password="p:w")
    assert endpoint_auth.authorization(basic) == "Basic " + base64.b64encode(b"u:p:w").decode()
    assert endpoint_auth.authorization(auth_of(AuthKind.BEARER, token="t")) == "Bearer t"
    assert endpoint_auth.authorization(oauth(), "tok") == "Bearer tok"
    with pytest.raises(ValueError):
        endpoint_auth.authorization(oauth())


def test_the_client_credentials_request() -> None:
    headers, form = endpoint_auth.token_request(oauth(client_id="a:b", client_secret="s/é", scope="x y", audience="z"))
    assert headers["authorization"] == "Basic " + base64.b64encode(b"a%3Ab:s%2F%C3%A9").decode()  # RFC 6749 2.3.1
    assert form == {"grant_type": "client_credentials", "scope": "x y", "audience": "z"}


def test_the_secrets_are_never_in_the_masked_view() -> None:
    for auth in (auth_of(AuthKind.BASIC, username="u", password="pw"), auth_of(AuthKind.BEARER, token="tk"), oauth()):
        shown = json.dumps(endpoint_auth.masked(auth))
        assert all(secret not in shown for secret in ("pw", "tk", "sec"))
    assert endpoint_auth.masked(oauth())["client_id"] == "id"


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (401, b'{"error": "invalid_client", "error_description": "secret sec wrong"}', "answered 401 (invalid_client)"),
        (500, b"<html>boom</html>", "answered 500"),
        (200, b"not json", "not JSON"),
        (200, b'{"token_type": "bearer"}', "no usable access_token"),
        (200, b'{"access_token": "a b"}', "no usable access_token"),
        (200, b'{"access_token": "t", "token_type": "mac"}', "not a bearer token"),
    ],
)
def test_a_token_answer_without_a_usable_token_says_why_without_echoing_it(
    status: int, body: bytes, message: str
) -> None:
    with pytest.raises(TokenUnavailable) as refused:
        endpoint_auth.read_token_response(status, body)
    assert message in str(refused.value) and "sec" not in str(refused.value)


def test_how_long_a_token_is_cached() -> None:
    assert endpoint_auth.cache_seconds(3600) == 3540
    assert endpoint_auth.cache_seconds(30) == 27
    assert endpoint_auth.cache_seconds(None) == endpoint_auth.UNSTATED_LIFETIME_SECONDS
    assert endpoint_auth.cache_seconds(True) == endpoint_auth.UNSTATED_LIFETIME_SECONDS
    assert endpoint_auth.cache_seconds("3600") == 3540 and endpoint_auth.cache_seconds("soon") == 300
    assert endpoint_auth.cache_seconds(10**9) < endpoint_auth.MAX_CACHE_SECONDS


def test_a_token_failure_is_retried_on_the_schedule() -> None:
    assert classify(None, FailureKind.TOKEN) is Outcome.RETRY


@pytest.mark.parametrize(
    ("fields", "pointers"),
    [
        ({"kind": "basic", "username": "a:b", "password": "p"}, ["/auth/username"]),
        ({"kind": "bearer"}, ["/auth/token"]),
        ({"kind": "bearer", "token": "t", "password": "p"}, ["/auth/password"]),
        ({"kind": "bearer", "token": "t\r\nX: y"}, ["/auth/token"]),
        ({"kind": "oauth2_client_credentials", "token_url": "https://a/t"}, ["/auth/client_id", "/auth/client_secret"]),
    ],
)
def test_auth_problems_are_named_by_pointer(fields: dict[str, Any], pointers: list[str]) -> None:
    assert [p["pointer"] for p in endpoint_auth.problems(fields)] == pointers


# --- One attempt: the 401 refresh and the budget ---


class Sender:
    def __init__(self, *statuses: int) -> None:
        self.statuses = list(statuses)
        self.sent: list[tuple[dict[str, str], float | None]] = []

    def send(self, url: str, headers: dict[str, str], body: bytes, timeout: float | None = None) -> SendResult:
        self.sent.append((headers, timeout))
        return SendResult(self.statuses.pop(0), 5)


class Tokens:
    def __init__(self, *tokens: str | Exception) -> None:
        self.tokens = list(tokens)
        self.asked: list[str | None] = []

    def token(self, endpoint_id: str, auth: EndpointAuth, *, timeout: float, stale: str | None = None) -> str:
        self.asked.append(stale)
        token = self.tokens.pop(0)
        if isinstance(token, Exception):
            raise token
        return token


def oauth_endpoint() -> Endpoint:
    return an_endpoint(auth=oauth())


def test_a_401_gets_one_new_token_and_one_more_send() -> None:
    sender, tokens = Sender(401, 200), Tokens("old", "new")
    result = EndpointRequests(sender, tokens).send(oauth_endpoint(), {"x": "1"}, b"{}")
    assert result.status_code == 200
    assert [h["authorization"] for h, _ in sender.sent] == ["Bearer old", "Bearer new"]
    assert tokens.asked == [None, "old"]  # the refused token is named: never handed out again


def test_a_second_401_is_the_outcome() -> None:
    sender = Sender(401, 401)
    assert EndpointRequests(sender, Tokens("a", "b")).send(oauth_endpoint(), {}, b"").status_code == 401
    assert len(sender.sent) == 2


def test_a_401_with_no_new_token_keeps_the_401() -> None:
    sender = Sender(401)
    result = EndpointRequests(sender, Tokens("a", TokenUnavailable("down"))).send(oauth_endpoint(), {}, b"")
    assert result.status_code == 401 and len(sender.sent) == 1


def test_no_token_is_a_token_error_and_nothing_is_sent() -> None:
    sender = Sender()
    result = EndpointRequests(sender, Tokens(TokenUnavailable("the token URL answered 503"))).send(
        oauth_endpoint(), {}, b""
    )
    assert (result.status_code, result.error, result.error_detail) == (
        None,
        FailureKind.TOKEN,
        "the token URL answered 503",
    )
    assert sender.sent == []


def test_the_sends_share_the_attempt_budget() -> None:
    ticks = iter([0.0, 2.0, 2.0, 5.0, 5.0, 5.5, 5.5, 6.0])  # started, token fetched, sent (401), refreshed
    sender = Sender(401, 200)
    requests = EndpointRequests(sender, Tokens("a", "b"), budget_seconds=8, clock=lambda: next(ticks))
    requests.send(oauth_endpoint(), {}, b"")
    assert [timeout for _, timeout in sender.sent] == [6.0, 2.5]


def test_no_resend_when_too_little_of_the_budget_is_left() -> None:
    ticks = iter([0.0, 1.0, 1.0, 7.5])
    sender = Sender(401)
    requests = EndpointRequests(sender, Tokens("a"), budget_seconds=8, clock=lambda: next(ticks))
    assert requests.send(oauth_endpoint(), {}, b"").status_code == 401 and len(sender.sent) == 1


def test_basic_and_bearer_need_no_token_source() -> None:
    sender = Sender(200, 200)
    for auth in (auth_of(AuthKind.BASIC, username="u", password="p"), auth_of(AuthKind.BEARER, token="t")):
        EndpointRequests(sender).send(an_endpoint(auth=auth), {}, b"")
    assert [h["authorization"][:6] for h, _ in sender.sent] == ["Basic ", "Bearer"]
    assert [timeout for _, timeout in sender.sent] == [None, None]  # the sender's own deadline, whole


# --- The token cache and the token URL's guard, against a token server on 127.0.0.1 ---


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def issued(token: str, expires_in: int = 3600) -> Reply:
    return Reply(200, json.dumps({"access_token": token, "token_type": "Bearer", "expires_in": expires_in}).encode())


@pytest.fixture
def token_server() -> Any:
    server = ScriptedConsumer(default=issued("default"))
    yield server
    server.close()


def local_tokens(clock: Clock | None = None) -> CachedTokens:
    return CachedTokens(allow_private_destinations=True, clock=clock or Clock())


def test_a_token_is_cached_until_shortly_before_it_expires(token_server: ScriptedConsumer) -> None:
    clock = Clock()
    tokens = local_tokens(clock)
    token_server.queue([issued("t1", expires_in=100), issued("t2")])
    auth = oauth(token_url=token_server.url)
    assert tokens.token("ep_1", auth, timeout=5) == "t1"
    clock.now += 89  # within the 100 s less the margin (a tenth of it: 10 s)
    assert tokens.token("ep_1", auth, timeout=5) == "t1"
    clock.now += 2
    assert tokens.token("ep_1", auth, timeout=5) == "t2"
    assert len(token_server.received) == 2


def test_new_credentials_and_a_refused_token_each_fetch_anew(token_server: ScriptedConsumer) -> None:
    tokens = local_tokens()
    token_server.queue([issued("a"), issued("b"), issued("c")])
    auth = oauth(token_url=token_server.url)
    assert tokens.token("ep_1", auth, timeout=5) == "a"
    assert tokens.token("ep_1", oauth(token_url=token_server.url, version="cred_2"), timeout=5) == "b"
    assert tokens.token("ep_1", auth, timeout=5, stale="a") == "c"
    assert tokens.token("ep_1", auth, timeout=5, stale="a") == "c"  # already replaced: no fetch for a stale name


def test_concurrent_attempts_share_one_fetch(token_server: ScriptedConsumer) -> None:
    tokens = local_tokens()
    token_server.queue([Reply(200, json.dumps({"access_token": "one"}).encode(), delay=0.2)])
    auth = oauth(token_url=token_server.url)
    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.append(tokens.token("ep_1", auth, timeout=5))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got == ["one"] * 4 and len(token_server.received) == 1


def test_the_token_url_is_guarded_at_fetch_time_too() -> None:
    deployed = CachedTokens(allow_private_destinations=False, resolver=lambda host, port: ["10.0.0.7"])
    for url in ("https://tokens.example.com/t", "http://tokens.example.com/t", "https://127.0.0.1/t"):
        with pytest.raises(TokenUnavailable, match="refused"):
            deployed.token("ep_1", oauth(token_url=url), timeout=2)


def test_a_token_server_that_hangs_is_cut_off_at_the_timeout(token_server: ScriptedConsumer) -> None:
    token_server.queue([Reply(200, b"{}", delay=3)])
    with pytest.raises(TokenUnavailable, match="no answer within the attempt's deadline"):
        local_tokens().token("ep_1", oauth(token_url=token_server.url), timeout=0.5)


# --- The portal shows them, read-only ---


def test_the_portal_shows_every_field_of_the_auth_that_the_api_shows() -> None:
    script = (Path(__file__).resolve().parents[2] / "lambdas" / "hookrelay" / "portal" / "app.js").read_text()
    listed = re.search(r"const shown = \[([^\]]*)\]\.filter", script)
    assert listed is not None
    names = set(re.findall(r'"(\w+)"', listed.group(1)))
    every = {name for kind in AuthKind for name in (*endpoint_auth.REQUIRED[kind], *endpoint_auth.OPTIONAL[kind])}
    assert names == every - endpoint_auth.SECRET_FIELDS
    assert "(secret)" in script and "headersText(endpoint.headers)" in script


def test_the_consumer_guide_states_the_rules_the_code_enforces() -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "consumer-guide.md").read_text()
    section = guide[guide.index("## Custom headers and authentication") :]
    section = section[: section.index("\n## ", 1)].lower()
    for name in (*custom_headers.CONNECTION_HEADERS, *custom_headers.PLATFORM_HEADERS, "authorization", "webhook-*"):
        assert f"`{name}`" in section, name
    assert "proxy-*" in section and f"up to {custom_headers.MAX_HEADERS} headers" in section
    assert f"{custom_headers.MAX_TOTAL_BYTES // 1024} kib" in section
    assert f"`{FailureKind.TOKEN.value}`" in section
    assert f"{int(endpoint_auth.UNSTATED_LIFETIME_SECONDS // 60)} minutes" in section
    for kind in AuthKind:
        assert f'"kind": "{kind.value}"' in section


def test_the_sender_keeps_to_what_is_left_of_the_attempt(token_server: ScriptedConsumer) -> None:
    token_server.queue([Reply(200, b"late", delay=2)])
    result = RequestsSender(timeout_seconds=8, allow_private_destinations=True).send(
        token_server.url, {}, b"{}", timeout=0.5
    )
    assert (
        result.error is FailureKind.TIMEOUT and result.error_detail == "no complete response within the 0.5 s deadline"
    )


def test_a_token_url_that_is_no_url_is_a_422_and_never_a_crash() -> None:
    service, _ = service_with(an_endpoint())
    auth = {"kind": "oauth2_client_credentials", "token_url": "https://[::1/t", "client_id": "c", "client_secret": "s"}
    with pytest.raises(InvalidDocument) as refused:
        service.update("ten_1", "ep_1", auth=auth)
    assert [e["pointer"] for e in refused.value.errors] == ["/auth/token_url"]
    with pytest.raises(TokenUnavailable, match="refused"):
        local_tokens().token("ep_1", oauth(token_url="https://[::1/t"), timeout=1)
