from __future__ import annotations

import base64
from datetime import UTC, datetime

import nacl.exceptions
import nacl.signing
import pytest
import svix.webhooks
from standardwebhooks import Webhook, WebhookVerificationError

from hookrelay.domain.signing import (
    PRIVATE_KEY_PREFIX,
    PUBLIC_KEY_PREFIX,
    SECRET_PREFIX,
    KeyType,
    generate_key,
    generate_secret,
    key_type_of,
    public_key,
    signature_header,
    signed_headers,
)

# The Standard Webhooks specification's known-answer vector.
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TIMESTAMP = datetime.fromtimestamp(1614265330, UTC)
VECTOR_BODY = '{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_known_answer_vector() -> None:
    assert signature_header([VECTOR_SECRET], VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY) == VECTOR_SIGNATURE


def test_headers_carry_id_timestamp_and_signature() -> None:
    headers = signed_headers([VECTOR_SECRET], VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY)
    assert headers == {
        "webhook-id": VECTOR_ID,
        "webhook-timestamp": "1614265330",
        "webhook-signature": VECTOR_SIGNATURE,
    }


def test_one_signature_per_active_secret_and_either_verifies() -> None:
    old, new = generate_secret(), generate_secret()
    now = datetime.now(UTC)
    body = '{"id":"evt_1","type":"order.updated"}'
    headers = signed_headers([old, new], "evt_1", now, body)
    assert len(headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        assert Webhook(secret).verify(body, headers) == {"id": "evt_1", "type": "order.updated"}


def test_a_changed_body_does_not_verify() -> None:
    secret = generate_secret()
    headers = signed_headers([secret], "evt_1", datetime.now(UTC), '{"a":1}')
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify('{"a": 1}', headers)  # re-serialised: different bytes


def test_svix_verifier_accepts_our_signatures() -> None:
    secret = generate_secret()
    body = '{"id":"evt_2","data":{}}'
    headers = signed_headers([secret], "evt_2", datetime.now(UTC), body)
    svix_webhook = svix.webhooks.Webhook(secret)
    svix_webhook.verify(body, headers)  # raises unless a signature matches
    with pytest.raises(svix.webhooks.WebhookVerificationError):
        svix_webhook.verify(body.replace("evt_2", "evt_3"), headers)


@pytest.mark.parametrize("num_bytes", [24, 32, 64])
def test_secrets_are_whsec_prefixed_random_bytes(num_bytes: int) -> None:
    secret = generate_secret(num_bytes)
    assert secret.startswith(SECRET_PREFIX)
    assert len(base64.b64decode(secret.removeprefix(SECRET_PREFIX))) == num_bytes
    assert generate_secret(num_bytes) != secret


@pytest.mark.parametrize("num_bytes", [16, 65])
def test_secret_sizes_outside_the_contract_are_refused(num_bytes: int) -> None:
    with pytest.raises(ValueError):
        generate_secret(num_bytes)


def test_signing_without_a_secret_is_refused() -> None:
    with pytest.raises(ValueError):
        signature_header([], "evt", datetime.now(UTC), "{}")


# --- Ed25519 (`v1a`): verified with PyNaCl (libsodium), an implementation independent of the signer's ---


def nacl_verifies(whpk: str, headers: dict[str, str], body: bytes) -> bool:
    """A consumer's v1a check, with the public key alone: any `v1a,` entry that libsodium accepts."""
    key = nacl.signing.VerifyKey(base64.b64decode(whpk.removeprefix(PUBLIC_KEY_PREFIX)))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    for entry in headers["webhook-signature"].split(" "):
        version, _, encoded = entry.partition(",")
        if version != "v1a":
            continue
        try:
            key.verify(signed, base64.b64decode(encoded))
            return True
        except nacl.exceptions.BadSignatureError:
            continue
    return False


def test_ed25519_keys_are_whsk_seeds_with_a_whpk_public_key() -> None:
    private = generate_key(KeyType.ED25519)
    assert private.startswith(PRIVATE_KEY_PREFIX) and key_type_of(private) is KeyType.ED25519
    seed = base64.b64decode(private.removeprefix(PRIVATE_KEY_PREFIX))
    assert len(seed) == 32
    # libsodium derives the same public key from the seed: the whpk_ shown is the one that verifies.
    expected = bytes(nacl.signing.SigningKey(seed).verify_key)
    shown = public_key(private)
    assert shown is not None and shown.startswith(PUBLIC_KEY_PREFIX)
    assert base64.b64decode(shown.removeprefix(PUBLIC_KEY_PREFIX)) == expected
    assert public_key(generate_key(KeyType.HMAC)) is None  # a shared secret has no public half


def test_v1a_signatures_verify_with_the_public_key_in_an_independent_implementation() -> None:
    private = generate_key(KeyType.ED25519)
    body = '{"id":"evt_1","data":{"name":"Zoë ✓"}}'
    headers = signed_headers([private], "evt_1", datetime.now(UTC), body)
    assert headers["webhook-signature"].startswith("v1a,")
    whpk = public_key(private)
    assert whpk is not None
    assert nacl_verifies(whpk, headers, body.encode())
    assert not nacl_verifies(whpk, headers, body.replace("evt_1", "evt_2").encode())
    other = public_key(generate_key(KeyType.ED25519))
    assert other is not None and not nacl_verifies(other, headers, body.encode())


def test_v1a_signatures_are_deterministic_and_sign_the_id_and_timestamp() -> None:
    private = generate_key(KeyType.ED25519)
    at = datetime.fromtimestamp(1614265330, UTC)
    assert signature_header([private], "evt_1", at, "{}") == signature_header([private], "evt_1", at, "{}")
    headers = signed_headers([private], "evt_1", at, "{}")
    whpk = public_key(private)
    assert whpk is not None
    assert not nacl_verifies(whpk, headers | {"webhook-id": "evt_2"}, b"{}")
    assert not nacl_verifies(whpk, headers | {"webhook-timestamp": "1614265331"}, b"{}")


def test_mixed_rotation_signs_once_per_key_and_each_kind_verifies_its_own() -> None:
    hmac_secret, private = generate_key(KeyType.HMAC), generate_key(KeyType.ED25519)
    body = '{"id":"evt_3","data":{}}'
    headers = signed_headers([hmac_secret, private], "evt_3", datetime.now(UTC), body)
    assert [e.split(",")[0] for e in headers["webhook-signature"].split(" ")] == ["v1", "v1a"]
    assert Webhook(hmac_secret).verify(body, headers) == {"id": "evt_3", "data": {}}  # skips the v1a entry
    whpk = public_key(private)
    assert whpk is not None and nacl_verifies(whpk, headers, body.encode())


@pytest.mark.parametrize("key", ["whsk_" + base64.b64encode(b"short").decode(), "whsk_not base64", "sk_other"])
def test_malformed_keys_are_refused(key: str) -> None:
    with pytest.raises(ValueError):
        signature_header([key], "evt", datetime.now(UTC), "{}")
