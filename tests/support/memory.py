"""Small in-memory repositories for unit tests of the management services."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from hookrelay.domain.models import ApiKey


class MemoryApiKeys:
    def __init__(self) -> None:
        self.items: dict[str, ApiKey] = {}

    def put(self, key: ApiKey) -> None:
        self.items[key.key_id] = key

    def get(self, key_id: str) -> ApiKey | None:
        return self.items.get(key_id)

    def revoke(self, key_id: str, at: datetime) -> bool:
        key = self.items.get(key_id)
        if key is None:
            return False
        self.items[key_id] = replace(key, revoked_at=key.revoked_at or at)
        return True
