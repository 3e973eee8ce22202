"""A small client for the hookrelay API, and a CLI on it (`python -m hookrelay_client --help`)."""

from hookrelay_client.client import HookrelayClient, __version__
from hookrelay_client.errors import HookrelayError, Problem
from hookrelay_client.models import (
    Attempt,
    CreatedEndpoint,
    CreatedTenant,
    Delivery,
    DeliveryPage,
    DeliverySummary,
    Endpoint,
    EndpointTestSent,
    Event,
    IssuedApiKey,
    PublishedEvent,
    Redrive,
    RedriveAccepted,
    Replay,
)

__all__ = [
    "Attempt",
    "CreatedEndpoint",
    "CreatedTenant",
    "Delivery",
    "DeliveryPage",
    "DeliverySummary",
    "Endpoint",
    "EndpointTestSent",
    "Event",
    "HookrelayClient",
    "HookrelayError",
    "IssuedApiKey",
    "Problem",
    "PublishedEvent",
    "Redrive",
    "RedriveAccepted",
    "Replay",
    "__version__",
]
