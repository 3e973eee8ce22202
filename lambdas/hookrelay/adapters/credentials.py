"""The API keys table as the authorizer reads it: one GetItem of the few attributes a token check needs.

A low-level client and plain attribute values (no boto3 resource, no pydantic model): the authorizer's cold start
pays for `import boto3` and little else.
"""

from __future__ import annotations

from typing import Any

from hookrelay.domain.api_keys import Credential


class DynamoCredentials:
    def __init__(self, client: Any, table_name: str) -> None:
        self.client = client
        self.table_name = table_name

    def credential(self, key_id: str) -> Credential | None:
        item = self.client.get_item(
            TableName=self.table_name,
            Key={"key_id": {"S": key_id}},
            ProjectionExpression="key_id, #role, secret_hash, revoked_at",
            ExpressionAttributeNames={"#role": "role"},
        ).get("Item")
        if item is None:
            return None
        revoked = item.get("revoked_at", {"NULL": True})
        return Credential(
            key_id=item["key_id"]["S"],
            role=item["role"]["S"],
            secret_hash=item["secret_hash"]["S"],
            revoked="NULL" not in revoked,
        )
