"""Request and response bodies of the API (validated with pydantic)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hookrelay.domain.clock import to_rfc3339
from hookrelay.domain.matching import EVENT_TYPE_PATTERN, FILTER_PATTERN
from hookrelay.domain.models import Endpoint


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PublishEvent(Strict):
    tenant_id: str = Field(min_length=1, max_length=64)
    type: str = Field(pattern=EVENT_TYPE_PATTERN.pattern)
    data: dict[str, Any]
    ordering_key: str | None = Field(default=None, min_length=1, max_length=256)


class CreateTenant(Strict):
    name: str = Field(min_length=1, max_length=200)


class CreateApiKey(Strict):
    role: str = Field(min_length=1, max_length=64)
    description: str | None = Field(default=None, max_length=500)


class CreateEndpoint(Strict):
    url: str = Field(min_length=1, max_length=2048)
    event_types: list[str] = Field(default_factory=lambda: ["*"], min_length=1, max_length=100)
    description: str | None = Field(default=None, max_length=500)
    max_in_flight: int | None = Field(default=None, ge=1, le=50)

    @field_validator("event_types")
    @classmethod
    def _filters(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not FILTER_PATTERN.match(pattern):
                raise ValueError(f"invalid event type filter {pattern!r}")
        return value


def _time(moment: datetime | None) -> str | None:
    return to_rfc3339(moment) if moment else None


def endpoint_view(endpoint: Endpoint, *, with_secret: bool = False) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": endpoint.id,
        "url": endpoint.url,
        "event_types": endpoint.event_types,
        "description": endpoint.description,
        "state": endpoint.state.value,
        "max_in_flight": endpoint.max_in_flight,
        "created_at": _time(endpoint.created_at),
        "updated_at": _time(endpoint.updated_at),
    }
    if with_secret:  # only in the response that created the secret
        view["secret"] = endpoint.secrets[-1].secret
    return view
