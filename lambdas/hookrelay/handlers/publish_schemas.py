"""The ingest function's request bodies, apart from the management API's (handlers/schemas.py), which import the
API's services for their limits: the ingest function's cold start loads only what publishing needs."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from hookrelay.domain.matching import EVENT_TYPE_PATTERN
from hookrelay.domain.platform_events import PREFIX as PLATFORM_PREFIX
from hookrelay.domain.platform_events import is_reserved


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _not_reserved(event_type: str) -> str:
    """The platform's own event types (operational webhooks) are not a producer's to publish."""
    if is_reserved(event_type):
        raise ValueError(f"event types starting with {PLATFORM_PREFIX!r} are reserved for the platform's own events")
    return event_type


# An event's fields, as one event and each item of a batch give them.
TenantId = Annotated[str, Field(min_length=1, max_length=64)]
EventTypeName = Annotated[str, Field(pattern=EVENT_TYPE_PATTERN.pattern), AfterValidator(_not_reserved)]
OrderingKey = Annotated[str | None, Field(min_length=1, max_length=256)]


class PublishEvent(Strict):
    tenant_id: TenantId
    type: EventTypeName
    data: dict[str, Any]
    ordering_key: OrderingKey = None


# A batch: up to this many events, each within the one-event limit (http.MAX_BODY_BYTES), all within this.
MAX_BATCH_EVENTS = 100
MAX_BATCH_BYTES = 1024 * 1024


class PublishBatch(Strict):
    """The batch as a whole; each item is validated on its own (`PublishBatchItem`), so one bad item is refused
    in its place while the others are published."""

    tenant_id: TenantId
    events: list[Any] = Field(min_length=1, max_length=MAX_BATCH_EVENTS)


class PublishBatchItem(Strict):
    type: EventTypeName
    data: dict[str, Any]
    ordering_key: OrderingKey = None
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=255)
    # The item's own W3C trace context, over the request's headers: a malformed one is ignored, never refused
    # (domain/trace_context.py), so these are any strings (the item's size bounds them).
    traceparent: str | None = None
    tracestate: str | None = None
