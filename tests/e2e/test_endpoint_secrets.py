"""Custom headers and endpoint auth on the local stack (issue 29): each credential arrives where it should, and none
of them (nor the OAuth2 token, nor a secret header's value) is in any line of the platform's logs: registered in
SECRETS here, searched for when the session ends (tests/e2e/conftest.py), the count printed with the figures."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest

from tests.e2e.harness import SECRETS, LocalStack, eventually
from tests.support.consumer import Reply, ScriptedConsumer

pytestmark = pytest.mark.e2e

HEADER_SECRET = "e2e-gateway-key-9f1c2b"
PASSWORD = "e2e-basic-password-4d7a"
BEARER = "e2e-static-bearer-8b2e"
CLIENT_SECRET = "e2e-client-secret-1a9d"
ACCESS_TOKEN = "e2e-access-token-6c3f"


@pytest.fixture
def servers() -> Iterator[dict[str, ScriptedConsumer]]:
    issued = {"access_token": ACCESS_TOKEN, "token_type": "Bearer", "expires_in": 3600}
    started = {
        "token": ScriptedConsumer(
            default=Reply(200, json.dumps(issued).encode(), (("content-type", "application/json"),))
        ),
        "basic": ScriptedConsumer(),
        "bearer": ScriptedConsumer(),
        "oauth2": ScriptedConsumer(),
    }
    yield started
    for server in started.values():
        server.close()


def test_credentials_arrive_and_no_secret_is_logged(stack: LocalStack, servers: dict[str, ScriptedConsumer]) -> None:
    basic = base64.b64encode(f"hookrelay:{PASSWORD}".encode()).decode()
    SECRETS.update({HEADER_SECRET, PASSWORD, BEARER, CLIENT_SECRET, ACCESS_TOKEN, basic})
    tenant_id, tenant_key = stack.new_tenant("secrets")
    token_url = servers["token"].url.replace("/hook", "/oauth/token")
    auths = {
        "basic": {"kind": "basic", "username": "hookrelay", "password": PASSWORD},
        "bearer": {"kind": "bearer", "token": BEARER},
        "oauth2": {
            "kind": "oauth2_client_credentials",
            "token_url": token_url,
            "client_id": "e2e-client",
            "client_secret": CLIENT_SECRET,
        },
    }
    for name, auth in auths.items():
        headers = [
            {"name": "X-Gateway-Key", "value": HEADER_SECRET, "secret": True},
            {"name": "X-Team", "value": "e2e"},
        ]
        created = stack.created(
            "/v1/endpoints", tenant_key, {"url": servers[name].url, "headers": headers, "auth": auth}
        )
        shown = json.dumps(created)
        assert all(secret not in shown for secret in (HEADER_SECRET, PASSWORD, BEARER, CLIENT_SECRET))

    accepted = stack.publish(tenant_id, "order.created", {"order_id": 1})
    for delivery_id in accepted["delivery_ids"]:
        eventually(
            lambda d=delivery_id: stack.delivery(tenant_key, d)["status"] == "delivered" or None,
            f"delivery {delivery_id} is delivered",
        )
    expected = {"basic": f"Basic {basic}", "bearer": f"Bearer {BEARER}", "oauth2": f"Bearer {ACCESS_TOKEN}"}
    for name, authorization in expected.items():
        [request] = servers[name].received
        headers = {key.lower(): value for key, value in request.headers.items()}
        assert headers["authorization"] == authorization
        assert (headers["x-gateway-key"], headers["x-team"]) == (HEADER_SECRET, "e2e")
    assert len(servers["token"].received) == 1  # one token, fetched once
