from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest
import svix.webhooks
from standardwebhooks import Webhook, WebhookVerificationError

from hookrelay.domain.signing import SECRET_PREFIX, generate_secret, signature_header, signed_headers

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
