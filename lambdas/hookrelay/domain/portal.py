"""Portal sessions: the short-lived bearer token of a tenant's consumer portal link.

Why an opaque token looked up in a table, not a signed (HMAC) token:
- a signed token needs a platform signing key: a Secrets Manager secret the stack creates, read by the
  authorizer and the API, rotated by someone; nothing in the stack holds such a secret today (endpoint
  secrets and API keys live hashed or encrypted in DynamoDB), and a leaked key would forge any tenant's link;
- a stored session can be ended early (the record deleted or past `expires_at`) and audited (who opened it);
- the cost is the one GetItem the authorizer already pays for an API key (and, like a key's, the answer is
  cached by API Gateway for `Api.AUTHORIZER_CACHE_TTL`: a session ended early stops within that delay).
So the token is `hrp_<session id>_<secret>`: 256 random bits, stored as a SHA-256 (as API keys are, see
domain/api_keys.py), its session id naming the one record to read. The record carries the tenant and the
expiry; the authorizer refuses it once expired, whether or not DynamoDB's TTL has removed it yet.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

from hookrelay.domain import ids
from hookrelay.domain.api_keys import hash_token

TOKEN_PREFIX = "hrp"
_TOKEN = re.compile(r"^hrp_(ps_[0-9A-Z]{26})_([A-Za-z0-9_-]{43})$")

DEFAULT_LIFETIME = timedelta(minutes=15)
MIN_LIFETIME = timedelta(minutes=1)
MAX_LIFETIME = timedelta(hours=1)  # short-lived: a link forwarded or left in a chat stops working soon

# Where the portal page is served (functions.PORTAL's routes) and how its link carries the token: in the
# fragment, which a browser never sends to a server nor puts in a Referer, so it reaches no access log.
PAGE_PATH = "/portal"

# The authorizer's context entry that marks a portal session's requests (handlers/http.py reads it back).
SCOPE = "scope"
PORTAL_SCOPE = "portal"
# The authorizer's context key naming the API key a portal session's requests count against (its opener).
COUNTED_AS = "counted_as"


def portal_link(api_url: str, token: str) -> str:
    return f"{api_url.rstrip('/')}{PAGE_PATH}#token={token}"


@dataclass(frozen=True)
class NewSession:
    session_id: str
    token: str  # shown once, never stored
    secret_hash: str


def mint_session() -> NewSession:
    session_id = ids.new_id("ps")
    token = f"{TOKEN_PREFIX}_{session_id}_{secrets.token_urlsafe(32)}"
    return NewSession(session_id=session_id, token=token, secret_hash=hash_token(token))


def session_id_of(token: str) -> str | None:
    match = _TOKEN.match(token)
    return match.group(1) if match else None
