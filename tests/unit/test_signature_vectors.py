"""docs/signature-vectors.json: current, reproduced by our signer, and every case decided as the file says by
independent verifiers: the `standardwebhooks` package (v1) and PyNaCl/libsodium (v1a) in Python, and in
Node.js the `standardwebhooks` npm package (v1) and Node's crypto (v1a) via tests/vectors/verify_vectors.mjs."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import types
from datetime import UTC, datetime
from typing import Any

import nacl.exceptions
import nacl.signing
import pytest
import standardwebhooks.webhooks
from standardwebhooks import Webhook, WebhookVerificationError

from examples import consumer_app
from hookrelay.domain.signing import PRIVATE_KEY_PREFIX, PUBLIC_KEY_PREFIX, signed_headers
from scripts.signature_vectors import ROOT, VECTORS_PATH, render

NODE_SCRIPT = ROOT / "tests" / "vectors" / "verify_vectors.mjs"
VECTORS: dict[str, Any] = json.loads(VECTORS_PATH.read_text())
SIGNING = VECTORS["signing"]
VERIFYING = VECTORS["verifying"]


def test_the_file_is_what_the_generator_makes_now() -> None:
    assert VECTORS_PATH.read_text() == render(), "run: python scripts/signature_vectors.py"


def test_the_cases_cover_what_a_verifier_must_refuse_for_both_key_types() -> None:
    names = {case["name"] for case in VERIFYING}
    for kind in ("hmac", "ed25519"):
        assert {f"{kind}/{what}" for what in ("wrong-key", "tampered-body", "timestamp-too-old")} <= names
        assert {f"{kind}/missing-{header}" for header in ("webhook-id", "webhook-timestamp", "webhook-signature")} <= (
            names
        )
    assert {case["valid"] for case in VERIFYING} == {True, False}
    assert {case["key"][:5] for case in VERIFYING} == {"whsec", PUBLIC_KEY_PREFIX}


@pytest.mark.parametrize("vector", SIGNING, ids=[v["name"] for v in SIGNING])
def test_our_signer_produces_each_signing_vector(vector: dict[str, Any]) -> None:
    body = base64.b64decode(vector["body_base64"]).decode()
    at = datetime.fromtimestamp(vector["timestamp"], UTC)
    assert signed_headers(vector["signing_keys"], vector["id"], at, body) == vector["headers"]


@pytest.mark.parametrize("vector", SIGNING, ids=[v["name"] for v in SIGNING])
def test_libsodium_signs_each_v1a_vector_identically(vector: dict[str, Any]) -> None:
    """Ed25519 is deterministic: an independent implementation given the same seed signs the same bytes."""
    body = base64.b64decode(vector["body_base64"])
    signed = f"{vector['id']}.{vector['timestamp']}.".encode() + body
    entries = vector["headers"]["webhook-signature"].split(" ")
    seeds = [base64.b64decode(k.removeprefix(PRIVATE_KEY_PREFIX)) for k in vector["signing_keys"] if k[:5] == "whsk_"]
    ours = [e.removeprefix("v1a,") for e in entries if e.startswith("v1a,")]
    theirs = [base64.b64encode(nacl.signing.SigningKey(seed).sign(signed).signature).decode() for seed in seeds]
    assert ours == theirs
    public = [
        PUBLIC_KEY_PREFIX + base64.b64encode(bytes(nacl.signing.SigningKey(s).verify_key)).decode() for s in seeds
    ]
    assert vector["public_keys"] == public


def verify_v1a(whpk: str, body: bytes, headers: dict[str, str], now: int, tolerance: int) -> None:
    """A consumer's v1a verifier on libsodium: the checks `standardwebhooks` makes for v1, with Ed25519."""
    msg_id, timestamp, signatures = (headers.get(h) for h in ("webhook-id", "webhook-timestamp", "webhook-signature"))
    if not (msg_id and timestamp and signatures):
        raise WebhookVerificationError("Missing required headers")
    if abs(now - int(timestamp)) > tolerance:
        raise WebhookVerificationError("Message timestamp outside the tolerance")
    key = nacl.signing.VerifyKey(base64.b64decode(whpk.removeprefix(PUBLIC_KEY_PREFIX)))
    for entry in signatures.split(" "):
        version, _, signature = entry.partition(",")
        if version == "v1a":
            try:
                key.verify(f"{msg_id}.{timestamp}.".encode() + body, base64.b64decode(signature))
                return
            except nacl.exceptions.BadSignatureError:
                continue
    raise WebhookVerificationError("No matching signature found")


def set_clocks(monkeypatch: pytest.MonkeyPatch, now: int) -> None:
    """The verifiers' clocks read the case's `now`: the `standardwebhooks` package's and the example's."""

    class CaseClock(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> CaseClock:
            return cls.fromtimestamp(now, tz)

    monkeypatch.setattr(standardwebhooks.webhooks, "datetime", CaseClock)
    monkeypatch.setattr(consumer_app, "time", types.SimpleNamespace(time=lambda: float(now)))


@pytest.mark.parametrize("case", VERIFYING, ids=[c["name"] for c in VERIFYING])
def test_python_verifiers_decide_each_case_as_the_file_says(
    case: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    body = base64.b64decode(case["body_base64"])
    set_clocks(monkeypatch, case["now"])
    try:
        if case["key"].startswith(PUBLIC_KEY_PREFIX):
            verify_v1a(case["key"], body, case["headers"], case["now"], VECTORS["tolerance_seconds"])
        else:
            Webhook(case["key"]).verify(body, case["headers"])  # the package's own v1 verifier
        verified = True
    except WebhookVerificationError:
        verified = False
    assert verified is case["valid"], case["why"]


@pytest.mark.parametrize("case", VERIFYING, ids=[c["name"] for c in VERIFYING])
def test_the_consumer_guides_verifier_decides_each_case_as_the_file_says(
    case: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """examples/consumer_app.py's `verify` (quoted by the guide), with a whsec_ secret or a whpk_ key alike."""
    set_clocks(monkeypatch, case["now"])
    try:
        consumer_app.verify([case["key"]], base64.b64decode(case["body_base64"]), case["headers"])
        verified = True
    except WebhookVerificationError:
        verified = False
    assert verified is case["valid"], case["why"]
    assert VECTORS["tolerance_seconds"] == consumer_app.TOLERANCE_SECONDS


def test_node_verifiers_decide_every_case_as_the_file_says() -> None:
    node = shutil.which("node")
    assert node, "Node.js is needed for this test (make install runs npm ci)"
    run = subprocess.run(  # noqa: S603 - our own script on our own file
        [node, str(NODE_SCRIPT), str(VECTORS_PATH), "--json"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert run.stdout, run.stderr
    results = json.loads(run.stdout)
    assert [r["name"] for r in results["signing"]] == [v["name"] for v in SIGNING]
    assert [r["name"] for r in results["verifying"]] == [c["name"] for c in VERIFYING]
    wrong = [r for r in results["signing"] + results["verifying"] if not r["ok"]]
    assert not wrong and run.returncode == 0, wrong
    for result, case in zip(results["verifying"], VERIFYING, strict=True):
        assert result["verified"] is case["valid"], case["name"]
