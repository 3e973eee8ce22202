"""A poll endpoint's mailbox in DynamoDB (domain/mailbox.py): one small item per posted delivery, under the
endpoint, sorted by its sequence number; read strongly consistently, so a message posted before a read is in it."""

from __future__ import annotations

from typing import Any

from boto3.dynamodb.conditions import Key

from hookrelay.domain.clock import from_rfc3339, to_rfc3339
from hookrelay.domain.mailbox import MailboxEntry, seq_key


class DynamoMailbox:
    def __init__(self, table: Any) -> None:
        self.table = table

    def post(self, entry: MailboxEntry, expires_at: int) -> None:
        self.table.put_item(
            Item={
                "endpoint_id": entry.endpoint_id,
                "seq": seq_key(entry.seq),
                "delivery_id": entry.delivery_id,
                "event_id": entry.event_id,
                "posted_at": to_rfc3339(entry.posted_at),
                "expires_at": expires_at,
                **({"replay_of": entry.replay_of} if entry.replay_of else {}),
            }
        )

    def after(self, endpoint_id: str, after: int, limit: int) -> list[MailboxEntry]:
        condition = Key("endpoint_id").eq(endpoint_id) & Key("seq").gt(seq_key(after))
        return self._query(condition, limit)

    def through(self, endpoint_id: str, through: int, limit: int) -> list[MailboxEntry]:
        condition = Key("endpoint_id").eq(endpoint_id) & Key("seq").lte(seq_key(through))
        return self._query(condition, limit)

    def remove(self, endpoint_id: str, seq: int) -> None:
        self.table.delete_item(Key={"endpoint_id": endpoint_id, "seq": seq_key(seq)})

    def _query(self, condition: Any, limit: int) -> list[MailboxEntry]:
        items = self.table.query(KeyConditionExpression=condition, Limit=limit, ConsistentRead=True)["Items"]
        return [
            MailboxEntry(
                endpoint_id=item["endpoint_id"],
                seq=int(item["seq"]),
                delivery_id=item["delivery_id"],
                event_id=item["event_id"],
                posted_at=from_rfc3339(item["posted_at"]),
                replay_of=item.get("replay_of"),
            )
            for item in items
        ]
