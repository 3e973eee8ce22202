"""The local seam for DynamoDB transactions on moto (local/moto_transactions.py): all-or-nothing, conditions
checked before any write, reasons per item, and no copy of whole tables (moto's own copies and restores them)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto.dynamodb.models.table import Table

from tests.support.aws import moto_stack


@pytest.fixture
def client() -> Iterator[Any]:
    with moto_stack():
        dynamodb = boto3.client("dynamodb")
        for name in ("a", "b"):
            dynamodb.create_table(
                TableName=name,
                KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
            dynamodb.put_item(TableName=name, Item={"id": {"S": "1"}, "n": {"N": "0"}})
        yield dynamodb


def add(table: str, condition: str | None = None) -> dict[str, Any]:
    update: dict[str, Any] = {
        "TableName": table,
        "Key": {"id": {"S": "1"}},
        "UpdateExpression": "ADD n :one",
        "ExpressionAttributeValues": {":one": {"N": "1"}},
    }
    if condition:
        update["ConditionExpression"] = condition
        update["ExpressionAttributeValues"][":zero"] = {"N": "0"}
    return {"Update": update}


def n(client: Any, table: str) -> int:
    return int(client.get_item(TableName=table, Key={"id": {"S": "1"}})["Item"]["n"]["N"])


def test_every_write_applies_when_every_condition_holds(client: Any) -> None:
    client.transact_write_items(TransactItems=[add("a", "n = :zero"), add("b", "n = :zero")])
    assert (n(client, "a"), n(client, "b")) == (1, 1)


def test_one_failed_condition_cancels_every_write_with_a_reason_per_item(client: Any) -> None:
    client.update_item(
        TableName="b",
        Key={"id": {"S": "1"}},
        UpdateExpression="SET n = :two",
        ExpressionAttributeValues={":two": {"N": "2"}},
    )
    with pytest.raises(ClientError) as raised:
        client.transact_write_items(TransactItems=[add("a", "n = :zero"), add("b", "n = :zero")])
    assert raised.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert [r["Code"] for r in raised.value.response["CancellationReasons"]] == ["None", "ConditionalCheckFailed"]
    assert (n(client, "a"), n(client, "b")) == (0, 2)  # nothing written, and the other write kept


def test_no_table_is_copied(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    deepcopy = copy.deepcopy

    def refuse_tables(value: Any, *args: Any, **kwargs: Any) -> Any:
        assert not isinstance(value, Table), "a whole table was copied"
        return deepcopy(value, *args, **kwargs)  # moto copies the one item it updates: that is fine

    monkeypatch.setattr(copy, "deepcopy", refuse_tables)
    client.transact_write_items(TransactItems=[add("a"), add("b")])
    with pytest.raises(ClientError):
        client.transact_write_items(TransactItems=[add("a", "n = :zero")])
    assert n(client, "a") == 1
