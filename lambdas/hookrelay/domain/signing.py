"""Standard Webhooks signing: `webhook-id`, `webhook-timestamp`, `webhook-signature`.

The HMAC itself is the `standardwebhooks` library's; this module adds secret generation and one
`v1,` signature per active secret, so consumers can rotate without a flag day.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterable
from datetime import datetime

from standardwebhooks import Webhook

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32  # within the contract's 24-64


def generate_secret(num_bytes: int = SECRET_BYTES) -> str:
    if not 24 <= num_bytes <= 64:
        raise ValueError("signing secrets are 24 to 64 random bytes")
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(num_bytes)).decode()


def signature_header(secrets_: Iterable[str], msg_id: str, timestamp: datetime, body: str) -> str:
    signatures = [Webhook(secret).sign(msg_id=msg_id, timestamp=timestamp, data=body) for secret in secrets_]
    if not signatures:
        raise ValueError("an endpoint must have at least one active signing secret")
    return " ".join(signatures)


def signed_headers(secrets_: Iterable[str], msg_id: str, timestamp: datetime, body: str) -> dict[str, str]:
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(timestamp.timestamp())),
        "webhook-signature": signature_header(secrets_, msg_id, timestamp, body),
    }
