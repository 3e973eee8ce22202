"""boto3 clients, made once per process on first use.

Lazily, so that importing a handler costs nothing until it runs and tests can start moto first; the
endpoint comes from the standard `AWS_ENDPOINT_URL` variable, which is how the local stack points
every client at moto's server without the handlers knowing.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import boto3
from botocore.config import Config

_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5}, connect_timeout=3, read_timeout=10)


@cache
def client(service: str) -> Any:
    return boto3.client(service, config=_CONFIG)


@cache
def table(name: str) -> Any:
    return boto3.resource("dynamodb", config=_CONFIG).Table(name)


def reset() -> None:
    """Forget every client (tests and the local stack call this when the AWS endpoint changes)."""
    client.cache_clear()
    table.cache_clear()
