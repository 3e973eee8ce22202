"""The authorizer's one use case: a bearer token in, the key's principal (or nothing) out.

Apart from `KeyService` (services/api_keys.py), which manages keys through the `ApiKey` record, so that the
authorizer, which runs before every uncached request, imports neither the records nor the other functions' code:
its port is declared here, not in services/ports.py (which imports every record).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from hookrelay.domain import api_keys
from hookrelay.domain.api_keys import Credential, Principal


class Credentials(Protocol):
    def credential(self, key_id: str) -> Credential | None:
        """The stored key's role, hash and revocation, or None when there is no such key."""


@dataclass
class Authenticator:
    credentials: Credentials

    def authenticate(self, token: str) -> Principal | None:
        return api_keys.authenticated(token, self.credentials.credential)
