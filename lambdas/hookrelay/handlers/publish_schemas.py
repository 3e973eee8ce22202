"""The ingest function's request bodies, apart from the management API's (handlers/schemas.py), which import the
API's services for their limits: the ingest function's cold start loads only what publishing needs."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from hookrelay.domain.matching import EVENT_TYPE_PATTERN


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PublishEvent(Strict):
    tenant_id: str = Field(min_length=1, max_length=64)
    type: str = Field(pattern=EVENT_TYPE_PATTERN.pattern)
    data: dict[str, Any]
    ordering_key: str | None = Field(default=None, min_length=1, max_length=256)
