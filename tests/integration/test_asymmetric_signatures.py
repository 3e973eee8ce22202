"""Ed25519 (`v1a`) endpoints on moto: created and rotated through the API, the client and the CLI; deliveries
verified with the public key alone by libsodium (PyNaCl), an implementation independent of the signer's."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hookrelay_client import HookrelayClient
from hookrelay_client.cli import main
from referencing import Registry
from referencing.jsonschema import DRAFT202012
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from tests.integration.test_endpoint_lifecycle import Tenant, signatures, stored
from tests.support.consumer import ScriptedConsumer
from tests.support.gateway_adapter import GATEWAY_URL, gateway_session
from tests.support.platform import Platform
from tests.unit.test_signing import nacl_verifies

DOCUMENT = Path(__file__).resolve().parents[2] / "openapi" / "openapi.yaml"
_REGISTRY = Registry().with_resource("urn:openapi", DRAFT202012.create_resource(yaml.safe_load(DOCUMENT.read_text())))


def conforms(body: Any, path: str, method: str, status: int) -> None:
    """The response body matches what openapi.yaml says this operation answers."""
    pointer = "/paths/" + path.replace("/", "~1") + f"/{method}/responses/{status}/content/application~1json/schema"
    jsonschema.Draft202012Validator({"$ref": f"urn:openapi#{pointer}"}, registry=_REGISTRY).validate(body)


def never_shows_a_private_key(body: Any) -> None:
    assert "whsk_" not in json.dumps(body)


def test_an_ed25519_endpoint_shows_only_its_public_key_and_deliveries_verify_with_it(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    tenant = Tenant(platform)
    created = tenant.endpoint(consumer.url, key_type="ed25519")
    conforms(created, "/v1/endpoints", "post", 201)
    never_shows_a_private_key(created)
    assert created["key_type"] == "ed25519" and "secret" not in created
    whpk = created["public_key"]
    assert whpk.startswith("whpk_")
    assert stored(tenant, created["id"]).secrets[0].secret.startswith("whsk_")  # kept by the platform only

    shown = tenant.call("GET", f"/v1/endpoints/{created['id']}").json()
    conforms(shown, "/v1/endpoints/{endpoint_id}", "get", 200)
    never_shows_a_private_key(shown)
    assert [(s["key_type"], s["public_key"]) for s in shown["signing_secrets"]] == [("ed25519", whpk)]
    never_shows_a_private_key(tenant.call("GET", "/v1/endpoints").json())

    tenant.publish()
    platform.pump()
    [request] = consumer.wait_for(1)
    assert [s.split(",")[0] for s in signatures(request.headers)] == ["v1a"]
    assert nacl_verifies(whpk, request.headers, request.body)
    assert not nacl_verifies(whpk, request.headers, request.body + b" ")


def test_rotation_between_types_overlaps_with_one_signature_of_each(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    tenant = Tenant(platform)
    created = tenant.endpoint(consumer.url)  # hmac by default
    assert created["key_type"] == "hmac" and created["secret"].startswith("whsec_")
    path = f"/v1/endpoints/{created['id']}/rotate-secret"

    rotated = tenant.call("POST", path, {"expire_previous_after_seconds": 3600, "key_type": "ed25519"})
    assert rotated.status == 200, rotated.body
    conforms(rotated.json(), "/v1/endpoints/{endpoint_id}/rotate-secret", "post", 200)
    never_shows_a_private_key(rotated.json())
    whpk = rotated.json()["public_key"]
    assert [s["key_type"] for s in rotated.json()["signing_secrets"]] == ["hmac", "ed25519"]

    tenant.publish()
    platform.pump()
    [during] = consumer.wait_for(1)
    assert [s.split(",")[0] for s in signatures(during.headers)] == ["v1", "v1a"]
    assert Webhook(created["secret"]).verify(during.body, during.headers)["type"] == "order.updated"
    assert nacl_verifies(whpk, during.headers, during.body)

    # No type given: the newest key's (Ed25519); no overlap retires the HMAC secret and the first Ed25519 key.
    again = tenant.call("POST", path, {"expire_previous_after_seconds": 0}).json()
    assert again["key_type"] == "ed25519" and again["public_key"] != whpk
    assert [s["public_key"] for s in again["signing_secrets"]] == [again["public_key"]]
    tenant.publish()
    platform.pump()
    after = consumer.wait_for(2)[1]
    assert [s.split(",")[0] for s in signatures(after.headers)] == ["v1a"]
    assert nacl_verifies(again["public_key"], after.headers, after.body)
    assert not nacl_verifies(whpk, after.headers, after.body)
    with pytest.raises(WebhookVerificationError):
        Webhook(created["secret"]).verify(after.body, after.headers)


def test_an_unknown_key_type_is_refused(platform: Platform) -> None:
    tenant = Tenant(platform)
    refused = tenant.call("POST", "/v1/endpoints", {"url": "http://127.0.0.1:9/a", "key_type": "rsa"})
    assert refused.status == 422
    endpoint_id = tenant.endpoint("http://127.0.0.1:9/a")["id"]
    refused = tenant.call("POST", f"/v1/endpoints/{endpoint_id}/rotate-secret", {"key_type": "whsk_"})
    assert refused.status == 422


def test_the_client_and_the_cli_create_and_rotate_ed25519_keys(platform: Platform, consumer: ScriptedConsumer) -> None:
    tenant = Tenant(platform)
    client = HookrelayClient(GATEWAY_URL, tenant.token, session=gateway_session())
    endpoint = client.create_endpoint(consumer.url, key_type="ed25519")
    assert endpoint.key_type == "ed25519" and endpoint.secret is None and endpoint.public_key
    assert client.get_endpoint(endpoint.id).signing_secrets[0].public_key == endpoint.public_key
    rotated = client.rotate_endpoint_secret(endpoint.id, expire_previous_after_seconds=60, key_type="hmac")
    assert rotated.key_type == "hmac" and rotated.secret and rotated.secret.startswith("whsec_")

    def cli(*argv: str) -> tuple[int, str]:
        out = io.StringIO()
        env = {"HOOKRELAY_URL": GATEWAY_URL, "HOOKRELAY_TOKEN": tenant.token}
        with pytest.MonkeyPatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            code = main(list(argv), session=gateway_session(), stdout=out, stderr=io.StringIO())
        return code, out.getvalue()

    code, out = cli("endpoints", "create", "--url", consumer.url, "--key-type", "ed25519")
    assert code == 0 and "public key" in out and "whpk_" in out and "whsk_" not in out
    code, out = cli("--json", "endpoints", "create", "--url", consumer.url, "--key-type", "ed25519")
    created = json.loads(out)
    assert code == 0 and created["public_key"].startswith("whpk_") and created.get("secret") is None
    code, out = cli("endpoints", "show", created["id"])
    assert code == 0 and created["public_key"] in out and "ed25519 current" in out
    code, out = cli("--json", "endpoints", "rotate-secret", created["id"], "--key-type", "hmac")
    assert code == 0 and json.loads(out)["secret"].startswith("whsec_")
    code, out = cli("endpoints", "rotate-secret", created["id"], "--key-type", "ed25519")
    assert code == 0 and "whpk_" in out and "whsk_" not in out
