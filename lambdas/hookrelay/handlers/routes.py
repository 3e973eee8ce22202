"""Which function serves which route, and each function's handler: read by the CDK stack and the local stack."""

from __future__ import annotations

from dataclasses import dataclass

HANDLERS = {
    "authorizer": "hookrelay.handlers.authorizer.handler",
    "ingest": "hookrelay.handlers.ingest.handler",
    "api": "hookrelay.handlers.api.handler",
    "delivery": "hookrelay.handlers.delivery.handler",
    "redrive": "hookrelay.handlers.redrive.handler",
    "sweeper": "hookrelay.handlers.sweeper.handler",  # on a schedule: endpoint health notices and auto-disable
}


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # API Gateway syntax: /v1/endpoints/{endpoint_id}
    function: str

    @property
    def route_key(self) -> str:
        return f"{self.method} {self.path}"


ROUTES: tuple[Route, ...] = (
    Route("POST", "/v1/events", "ingest"),
    Route("POST", "/v1/tenants", "api"),
    Route("POST", "/v1/api-keys", "api"),
    Route("DELETE", "/v1/api-keys/{key_id}", "api"),
    Route("POST", "/v1/endpoints", "api"),
    Route("GET", "/v1/endpoints", "api"),
    Route("GET", "/v1/endpoints/{endpoint_id}", "api"),
    Route("PATCH", "/v1/endpoints/{endpoint_id}", "api"),
    Route("DELETE", "/v1/endpoints/{endpoint_id}", "api"),
    Route("POST", "/v1/endpoints/{endpoint_id}/disable", "api"),
    Route("POST", "/v1/endpoints/{endpoint_id}/enable", "api"),
    Route("POST", "/v1/endpoints/{endpoint_id}/rotate-secret", "api"),
    Route("GET", "/v1/endpoints/{endpoint_id}/health", "api"),
    Route("POST", "/v1/endpoints/{endpoint_id}/test", "api"),
    Route("POST", "/v1/endpoints/{endpoint_id}/redrive", "api"),
    Route("GET", "/v1/deliveries", "api"),
    Route("GET", "/v1/deliveries/{delivery_id}", "api"),
    Route("POST", "/v1/deliveries/{delivery_id}/replay", "api"),
    Route("GET", "/v1/events/{event_id}", "api"),
    Route("GET", "/v1/redrives/{redrive_id}", "api"),
)
