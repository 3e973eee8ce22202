"""Standard Webhooks signing: `webhook-id`, `webhook-timestamp`, `webhook-signature`.

Two kinds of signing key, told apart by their Standard Webhooks prefix (so a stored key says how it signs):

- `hmac`: a shared `whsec_` secret; `v1,` signatures (HMAC-SHA256, the `standardwebhooks` library's).
- `ed25519`: a `whsk_` private key that never leaves the platform; `v1a,` signatures that consumers verify
  with the `whpk_` public key alone (`cryptography`'s Ed25519, RFC 8032: deterministic signatures).

Both sign `{id}.{timestamp}.{body}`. The header carries one signature per active key, space-separated, so
consumers can rotate (between kinds too) without a flag day.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterable
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from standardwebhooks import Webhook

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32  # within the contract's 24-64
PRIVATE_KEY_PREFIX = "whsk_"  # base64 of the 32-byte Ed25519 seed (RFC 8032's private key)
PUBLIC_KEY_PREFIX = "whpk_"  # base64 of the 32-byte Ed25519 public key
ED25519_KEY_BYTES = 32
ED25519_SIGNATURE = "v1a"


class KeyType(StrEnum):
    """How an endpoint's deliveries are signed with one of its keys."""

    HMAC = "hmac"  # whsec_: shared with the consumer
    ED25519 = "ed25519"  # whsk_ kept by the platform, whpk_ given to the consumer


def generate_secret(num_bytes: int = SECRET_BYTES) -> str:
    if not 24 <= num_bytes <= 64:
        raise ValueError("signing secrets are 24 to 64 random bytes")
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(num_bytes)).decode()


def generate_private_key() -> str:
    return PRIVATE_KEY_PREFIX + base64.b64encode(secrets.token_bytes(ED25519_KEY_BYTES)).decode()


def generate_key(key_type: KeyType) -> str:
    """A new signing key of that type, as stored: `whsec_…` or `whsk_…`."""
    return generate_secret() if key_type is KeyType.HMAC else generate_private_key()


def key_type_of(key: str) -> KeyType:
    if key.startswith(PRIVATE_KEY_PREFIX):
        return KeyType.ED25519
    if key.startswith(SECRET_PREFIX):
        return KeyType.HMAC
    raise ValueError("not a signing key: expected whsec_… or whsk_…")


def _ed25519(private_key: str) -> Ed25519PrivateKey:
    # Imported here: cryptography costs a cold start about 40 ms, and only Ed25519 keys need it (every function
    # imports this module through the models; most endpoints sign with HMAC).
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    seed = base64.b64decode(private_key.removeprefix(PRIVATE_KEY_PREFIX), validate=True)
    if len(seed) != ED25519_KEY_BYTES:
        raise ValueError("an Ed25519 signing key is 32 bytes")
    return Ed25519PrivateKey.from_private_bytes(seed)


def public_key(key: str) -> str | None:
    """The `whpk_` key consumers verify `v1a` signatures with; None for an HMAC secret (it has none)."""
    if key_type_of(key) is KeyType.HMAC:
        return None
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    raw = _ed25519(key).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return PUBLIC_KEY_PREFIX + base64.b64encode(raw).decode()


def unix_seconds(timestamp: datetime) -> int:
    """The `webhook-timestamp` value: what is signed and what is sent must be the same number."""
    return int(timestamp.timestamp())


def signature(key: str, msg_id: str, timestamp: datetime, body: str) -> str:
    """One `webhook-signature` entry: `v1,<base64>` for a whsec_ secret, `v1a,<base64>` for a whsk_ key."""
    if key_type_of(key) is KeyType.HMAC:
        return Webhook(key).sign(msg_id=msg_id, timestamp=timestamp, data=body)
    signed = _ed25519(key).sign(f"{msg_id}.{unix_seconds(timestamp)}.{body}".encode())
    return f"{ED25519_SIGNATURE},{base64.b64encode(signed).decode()}"


def signature_header(secrets_: Iterable[str], msg_id: str, timestamp: datetime, body: str) -> str:
    signatures = [signature(key, msg_id, timestamp, body) for key in secrets_]
    if not signatures:
        raise ValueError("an endpoint must have at least one active signing secret")
    return " ".join(signatures)


def signed_headers(secrets_: Iterable[str], msg_id: str, timestamp: datetime, body: str) -> dict[str, str]:
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(unix_seconds(timestamp)),
        "webhook-signature": signature_header(secrets_, msg_id, timestamp, body),
    }
