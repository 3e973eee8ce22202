"""The system on moto, driven from a test the way API Gateway and the SQS event source drive it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import boto3

from local import gateway
from local.provision import delivery_queue_urls
from local.sqs_source import poll_once


@dataclass
class Platform:
    """The system on moto, driven the way API Gateway and the SQS event source drive it."""

    env: dict[str, str]
    admin_token: str

    def call(self, method: str, path: str, token: str | None, body: Any = None, headers: dict[str, str] | None = None):
        all_headers = dict(headers or {})
        if token:
            all_headers["authorization"] = f"Bearer {token}"
        raw = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else b"")
        if raw:
            all_headers.setdefault("content-type", "application/json")
        path, _, query = path.partition("?")
        return gateway.handle(method, path, query, all_headers, raw)

    @cached_property
    def sqs(self) -> Any:
        # One client for the platform's life (inside its moto_stack): making a client costs about 5 ms, and the
        # crash-point matrix asked for one some 8,000 times per path (a third of its time).
        return boto3.client("sqs")

    def forget_checkpoints(self) -> None:
        """As if the next run of each sweep were a new deployment's first. For tests whose cases each move the clock
        minutes on and then back: a sweep's checkpoint would otherwise be left ahead of the next case's time (clocks
        do not run back in a deployment)."""
        from hookrelay.adapters import schema

        table = boto3.resource("dynamodb").Table(self.env[schema.CHECKPOINTS.env_var])
        for item in table.scan()["Items"]:
            table.delete_item(Key={"name": item["name"]})

    def pump(self, max_batches: int = 20) -> int:
        """Feed the delivery handler until every delivery queue is empty; returns messages handled."""
        handled = 0
        for _ in range(max_batches):
            count = sum(poll_once(self.sqs, url) for url in delivery_queue_urls(self.env).all())
            if count == 0:
                break
            handled += count
        return handled

    def delivery_urls(self) -> list[str]:
        """Every delivery queue's URL (each shard's fast and slow lanes)."""
        return delivery_queue_urls(self.env).all()

    def queued_deliveries(self) -> int:
        """Messages waiting on every delivery queue (visible ones)."""
        return sum(
            int(
                self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])[
                    "Attributes"
                ]["ApproximateNumberOfMessages"]
            )
            for url in self.delivery_urls()
        )

    def receive_delivery(self, max_messages: int = 1) -> tuple[str, list[dict[str, Any]]] | None:
        """The URL of the first delivery queue that has messages, and its next messages (with their system
        attributes); None when every one is empty. The messages are in flight until deleted or made visible again."""
        for url in self.delivery_urls():
            messages = self.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=max_messages, MessageSystemAttributeNames=["All"]
            ).get("Messages", [])
            if messages:
                return url, messages
        return None

    def new_tenant(self, name: str = "acme") -> tuple[str, str]:
        created = self.call("POST", "/v1/tenants", self.admin_token, {"name": name})
        assert created.status == 201, created.body
        document = created.json()
        return document["tenant_id"], document["api_key"]["token"]

    def new_key(self, role: str) -> str:
        created = self.call("POST", "/v1/api-keys", self.admin_token, {"role": role})
        assert created.status == 201, created.body
        return created.json()["token"]

    def new_endpoint(
        self, tenant_token: str, url: str, event_types: list[str] | None = None, *, max_in_flight: int | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"url": url, "event_types": event_types or ["*"]}
        if max_in_flight is not None:
            body["max_in_flight"] = max_in_flight
        created = self.call("POST", "/v1/endpoints", tenant_token, body)
        assert created.status == 201, created.body
        return created.json()
