"""Write docs/signature-vectors.json: language-neutral test vectors of the webhook signatures we send.

    python scripts/signature_vectors.py          # rewrite the file
    python scripts/signature_vectors.py --check  # exit 1 if the file is not what this script makes

The vectors come from our own signer (hookrelay.domain.signing) on fixed keys, ids, times and bodies, so the
file changes only when the signing does. Ed25519 signatures are deterministic (RFC 8032): the `v1a` values
are as reproducible as the HMAC ones. tests/unit/test_signature_vectors.py checks that the file is current
and runs every case in Python (our signer, the `standardwebhooks` package, PyNaCl) and in Node.js
(tests/vectors/verify_vectors.mjs: the `standardwebhooks` npm package and Node's own Ed25519).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hookrelay.domain.envelope import envelope_body
from hookrelay.domain.signing import PRIVATE_KEY_PREFIX, SECRET_PREFIX, public_key, signed_headers

ROOT = Path(__file__).resolve().parents[1]
VECTORS_PATH = ROOT / "docs" / "signature-vectors.json"
TOLERANCE_SECONDS = 300  # the Standard Webhooks libraries' default: 5 minutes either way

# The Standard Webhooks libraries' own known-answer vector (their test suites sign exactly this).
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_TIMESTAMP = 1614265330
SPEC_BODY = '{"test": 2432232314}'

T0 = 1767225600  # 2026-01-01T00:00:00Z
EVENT_ID = "evt_2zRvZ8kq3mW9xT4bN7cJ1pLd"


def _fixed_bytes(label: str) -> bytes:
    """32 bytes that are the same on every run: the vectors' keys are published, never used for real."""
    return hashlib.sha256(f"hookrelay signature vectors: {label}".encode()).digest()


HMAC_1 = SECRET_PREFIX + base64.b64encode(_fixed_bytes("hmac 1")).decode()
HMAC_2 = SECRET_PREFIX + base64.b64encode(_fixed_bytes("hmac 2")).decode()
ED25519_1 = PRIVATE_KEY_PREFIX + base64.b64encode(_fixed_bytes("ed25519 1")).decode()
ED25519_2 = PRIVATE_KEY_PREFIX + base64.b64encode(_fixed_bytes("ed25519 2")).decode()


def _public(key: str) -> str:
    found = public_key(key)
    assert found is not None, "an Ed25519 key has a public key"
    return found


BODY = envelope_body(
    event_id=EVENT_ID,
    event_type="order.updated",
    timestamp=datetime.fromtimestamp(T0, UTC),
    data={"order_id": "o_42", "customer": "Zoë Ångström", "note": "✓ 出荷済み", "total": 12.5},
)
TAMPERED_BODY = BODY.replace("12.5", "125")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _signed(name: str, keys: list[str], msg_id: str, timestamp: int, body: str, about: str) -> dict[str, Any]:
    headers = signed_headers(keys, msg_id, datetime.fromtimestamp(timestamp, UTC), body)
    return {
        "name": name,
        "about": about,
        "signing_keys": keys,
        "public_keys": [_public(k) for k in keys if k.startswith(PRIVATE_KEY_PREFIX)],
        "id": msg_id,
        "timestamp": timestamp,
        "body_base64": _b64(body),
        "headers": headers,
    }


def _signing() -> list[dict[str, Any]]:
    return [
        _signed("hmac", [SPEC_SECRET], SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY, "the Standard Webhooks known answer"),
        _signed("hmac-utf8", [HMAC_1], EVENT_ID, T0, BODY, "an event envelope with non-ASCII UTF-8 bytes"),
        _signed("ed25519", [ED25519_1], EVENT_ID, T0, BODY, "v1a: verified with the public key alone"),
        _signed(
            "rotation-hmac-to-ed25519",
            [HMAC_2, ED25519_1],
            EVENT_ID,
            T0,
            BODY,
            "during a rotation between types: one signature per active key, oldest first",
        ),
        _signed(
            "rotation-ed25519",
            [ED25519_1, ED25519_2],
            EVENT_ID,
            T0,
            BODY,
            "during a rotation between two Ed25519 keys",
        ),
    ]


def _case(
    name: str, key: str, signed: dict[str, Any], *, valid: bool, why: str, now: int | None = None, **change: Any
) -> dict[str, Any]:
    """A verification case: what a consumer holding `key` receives, and whether it must accept it."""
    headers = dict(signed["headers"])
    for header in change.pop("without", ()):
        del headers[header]
    headers |= change.pop("headers", {})
    body = change.pop("body", None)
    assert not change, change
    return {
        "name": name,
        "key": key,
        "body_base64": _b64(body) if body is not None else signed["body_base64"],
        "headers": headers,
        "now": signed["timestamp"] if now is None else now,
        "valid": valid,
        "why": why,
    }


def _one_signature(signed: dict[str, Any], version: str) -> str:
    return next(s for s in signed["headers"]["webhook-signature"].split(" ") if s.startswith(f"{version},"))


def _verifying(signing: list[dict[str, Any]]) -> list[dict[str, Any]]:
    spec, hmac_utf8, ed25519, mixed, two_ed25519 = signing
    ed1, ed2 = _public(ED25519_1), _public(ED25519_2)
    v1a_bytes = _one_signature(ed25519, "v1a").split(",", 1)[1]
    cases = [
        _case("hmac/valid", SPEC_SECRET, spec, valid=True, why="the known answer"),
        _case("hmac/valid-utf8", HMAC_1, hmac_utf8, valid=True, why="the bytes as received, UTF-8 included"),
        _case("hmac/valid-a-minute-late", HMAC_1, hmac_utf8, now=T0 + 60, valid=True, why="within the tolerance"),
        _case("ed25519/valid", ed1, ed25519, valid=True, why="v1a with the public key"),
        _case("ed25519/valid-sender-clock-ahead", ed1, ed25519, now=T0 - 60, valid=True, why="within the tolerance"),
        _case("rotation/hmac-key-of-mixed", HMAC_2, mixed, valid=True, why="the v1 entry matches; v1a is skipped"),
        _case("rotation/ed25519-key-of-mixed", ed1, mixed, valid=True, why="the v1a entry matches; v1 is skipped"),
        _case("rotation/new-ed25519-key", ed2, two_ed25519, valid=True, why="the second v1a entry matches"),
        _case("rotation/old-ed25519-key", ed1, two_ed25519, valid=True, why="the first v1a entry matches"),
    ]
    for kind, key, wrong_key, signed in (
        ("hmac", HMAC_1, HMAC_2, hmac_utf8),
        ("ed25519", ed1, ed2, ed25519),
    ):
        cases += [
            _case(f"{kind}/wrong-key", wrong_key, signed, valid=False, why="signed with another key"),
            _case(f"{kind}/tampered-body", key, signed, body=TAMPERED_BODY, valid=False, why="one byte changed"),
            _case(
                f"{kind}/reserialised-body",
                key,
                signed,
                body=json.dumps(json.loads(BODY)),
                valid=False,
                why="the same JSON re-serialised: other bytes",
            ),
            _case(
                f"{kind}/timestamp-too-old",
                key,
                signed,
                now=T0 + TOLERANCE_SECONDS + 300,
                valid=False,
                why="received 10 minutes after signing: a replayed capture",
            ),
            _case(
                f"{kind}/timestamp-too-new",
                key,
                signed,
                now=T0 - TOLERANCE_SECONDS - 300,
                valid=False,
                why="signed 10 minutes in the verifier's future",
            ),
            _case(
                f"{kind}/timestamp-changed",
                key,
                signed,
                headers={"webhook-timestamp": str(T0 + 1)},
                now=T0 + 1,
                valid=False,
                why="the timestamp is signed",
            ),
            _case(
                f"{kind}/id-changed",
                key,
                signed,
                headers={"webhook-id": "evt_another"},
                valid=False,
                why="the id is signed",
            ),
        ]
        for header in ("webhook-id", "webhook-timestamp", "webhook-signature"):
            cases.append(_case(f"{kind}/missing-{header}", key, signed, without=[header], valid=False, why="missing"))
    cases += [
        _case(
            "hmac/only-a-v1a-signature",
            HMAC_1,
            ed25519,
            valid=False,
            why="an HMAC verifier accepts v1 entries only",
        ),
        _case(
            "ed25519/v1a-signature-labelled-v1",
            ed1,
            ed25519,
            headers={"webhook-signature": f"v1,{v1a_bytes}"},
            valid=False,
            why="a public key verifies v1a entries only",
        ),
        _case(
            "ed25519/old-key-after-rotation",
            ed1,
            _signed("after", [ED25519_2], EVENT_ID, T0, BODY, ""),
            valid=False,
            why="the retired key's signature is no longer sent",
        ),
    ]
    return cases


def build() -> dict[str, Any]:
    signing = _signing()
    return {
        "about": (
            "Standard Webhooks signature vectors from hookrelay's signer. `signing`: given the keys, id, timestamp "
            "(unix seconds) and body bytes (base64), a signer must produce exactly `headers` (v1: HMAC-SHA256 "
            "with a whsec_ secret; v1a: Ed25519 with a whsk_ key, whose whpk_ public key is in public_keys; "
            "both sign '{id}.{timestamp}.{body}'). `verifying`: a verifier holding `key` (whsec_ or whpk_) whose "
            "clock reads `now` must accept the request exactly when `valid` is true. These keys are published: "
            "never use them for real."
        ),
        "spec": "https://www.standardwebhooks.com/ (spec/standard-webhooks.md, Signature scheme)",
        "tolerance_seconds": TOLERANCE_SECONDS,
        "signing": signing,
        "verifying": _verifying(signing),
    }


def render() -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is not current")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = VECTORS_PATH.exists() and VECTORS_PATH.read_text() == text
        print(f"{VECTORS_PATH.relative_to(ROOT)} is {'current' if current else 'out of date: run this script'}")
        return 0 if current else 1
    VECTORS_PATH.write_text(text)
    print(f"wrote {VECTORS_PATH.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
