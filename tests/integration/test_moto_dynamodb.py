"""The local stack's fast DynamoDB answers (local/moto_dynamodb.py) parse, in boto3, to what moto's own serializer
gives: the same item operations, every attribute type, pages, batch and transaction answers, refusals."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto.dynamodb.comparisons import ConditionExpressionParser
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.parsing import validators

from local import moto_dynamodb
from tests.support.aws import moto_stack

ITEM = {
    "pk": {"S": "tenant#1"},
    "sk": {"S": "0001"},
    "string": {"S": 'é ✓ "quoted" \\ back'},
    "number": {"N": "-12.5e3"},
    "binary": {"B": b"\x00\xffbytes"},
    "flag": {"BOOL": False},
    "nothing": {"NULL": True},
    "strings": {"SS": ["a", "b"]},
    "numbers": {"NS": ["1", "2.5"]},
    "binaries": {"BS": [b"\x01", b"\x02"]},
    "list": {"L": [{"S": "x"}, {"N": "1"}, {"M": {"deep": {"L": []}}}]},
    "map": {"M": {"a": {"S": "b"}, "empty": {"M": {}}}},
    "gsi": {"S": "g"},
}


# A condition with a value in every place one can be: a comparison, a function's argument, IN and BETWEEN.
CLAIM = (
    "attribute_exists(pk) AND #n > :low AND begins_with(#str, :s) AND attribute_type(strings, :t)"
    " AND flag IN (:a, :b) AND #n BETWEEN :low AND #n"
)
CLAIM_NAMES = {"#n": "number", "#str": "string"}
CLAIMS = ((False, "1"), (True, "-99999"), (False, "0"))  # (flag, low) for which CLAIM holds, in turn


def claimed(dynamodb: Any, key: Any, flag: bool, low: str, extra: dict[str, Any] | None = None, **more: Any) -> Any:
    """An update of `key` under CLAIM, with these values in it."""
    values = {":f": {"BOOL": flag}, ":low": {"N": low}, ":s": {"S": "é"}, ":t": {"S": "SS"}}
    values |= {":a": {"BOOL": flag}, ":b": {"BOOL": not flag}, **(extra or {})}
    return dynamodb.update_item(
        TableName="t",
        Key=key,
        UpdateExpression="SET flag = :f",
        ConditionExpression=CLAIM,
        ExpressionAttributeNames=CLAIM_NAMES,
        ExpressionAttributeValues=values,
        **more,
    )


def a_table(
    dynamodb: Any, name: str, key: tuple[str, ...], index: tuple[str, tuple[str, ...], dict[str, Any]] | None = None
) -> None:
    """A table keyed by `key` (partition, then sort), with at most one index (its name, key and projection); every
    key attribute a string."""

    def schema(attributes: tuple[str, ...]) -> list[dict[str, str]]:
        return [{"AttributeName": a, "KeyType": kind} for a, kind in zip(attributes, ("HASH", "RANGE"), strict=False)]

    attributes = dict.fromkeys([*key, *(index[1] if index else ())])
    indexes = {}
    if index is not None:
        index_name, index_key, projection = index
        indexes["GlobalSecondaryIndexes"] = [
            {"IndexName": index_name, "KeySchema": schema(index_key), "Projection": projection}
        ]
    dynamodb.create_table(
        TableName=name,
        KeySchema=schema(key),
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in attributes],
        BillingMode="PAY_PER_REQUEST",
        **indexes,
    )


def operations(dynamodb: Any) -> list[Any]:
    """Every item operation the functions make, and their answers as boto3 parsed them."""
    a_table(dynamodb, "t", ("pk", "sk"), ("by_gsi", ("gsi",), {"ProjectionType": "KEYS_ONLY"}))
    key = {"pk": ITEM["pk"], "sk": ITEM["sk"]}
    answers: list[Any] = [
        dynamodb.put_item(TableName="t", Item=ITEM, ReturnConsumedCapacity="TOTAL"),
        dynamodb.put_item(TableName="t", Item=ITEM | {"number": {"N": "1"}}, ReturnValues="ALL_OLD"),
        dynamodb.get_item(TableName="t", Key=key, ConsistentRead=True),
        dynamodb.get_item(TableName="t", Key={"pk": {"S": "none"}, "sk": {"S": "none"}}),
        dynamodb.get_item(
            TableName="t", Key=key, ProjectionExpression="#m.a, strings", ExpressionAttributeNames={"#m": "map"}
        ),
        dynamodb.update_item(
            TableName="t",
            Key=key,
            UpdateExpression="SET #n = #n + :one, added = :b REMOVE nothing",
            ExpressionAttributeNames={"#n": "number"},
            ExpressionAttributeValues={":one": {"N": "1"}, ":b": {"B": b"\x07"}},
            ReturnValues="ALL_NEW",
        ),
        dynamodb.update_item(
            TableName="t", Key=key, UpdateExpression="SET flag = :t", ExpressionAttributeValues={":t": {"BOOL": True}}
        ),
        dynamodb.update_item(  # the first update's expression again, other values: a kept parse must not carry them
            TableName="t",
            Key=key,
            UpdateExpression="SET #n = #n + :one, added = :b REMOVE nothing",
            ExpressionAttributeNames={"#n": "number"},
            ExpressionAttributeValues={":one": {"N": "5"}, ":b": {"S": "text"}},
            ReturnValues="ALL_NEW",
        ),
        *[  # an item that does not exist yet is validated twice by moto, each time from the expression
            dynamodb.update_item(
                TableName="t",
                Key={"pk": {"S": f"new#{n}"}, "sk": {"S": "1"}},
                UpdateExpression="SET #a = :x REMOVE spare",
                ExpressionAttributeNames={"#a": "fresh"},
                ExpressionAttributeValues={":x": {"N": str(n)}},
                ReturnValues="ALL_NEW",
            )
            for n in range(2)
        ],
        dynamodb.update_item(
            TableName="t",
            Key=key,
            UpdateExpression="ADD numbers :n",
            ExpressionAttributeValues={":n": {"NS": ["3"]}},
            ReturnValues="UPDATED_OLD",
        ),
    ]
    # One condition used again and again with other values: a kept parse must not carry them.
    answers += [claimed(dynamodb, key, flag, low, ReturnValues="ALL_NEW") for flag, low in CLAIMS]
    for n in range(5):
        dynamodb.put_item(TableName="t", Item={"pk": {"S": "tenant#1"}, "sk": {"S": f"1{n}"}, "gsi": {"S": "g"}})
    answers += [
        dynamodb.query(
            TableName="t",
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "tenant#1"}},
            Limit=2,
        ),
        dynamodb.query(
            TableName="t",
            KeyConditionExpression="pk = :p AND begins_with(sk, :s)",
            ExpressionAttributeValues={":p": {"S": "tenant#1"}, ":s": {"S": "1"}},
            ExclusiveStartKey={"pk": {"S": "tenant#1"}, "sk": {"S": "11"}},
            ScanIndexForward=False,
            Select="COUNT",
        ),
        dynamodb.query(
            TableName="t",
            KeyConditionExpression="pk = :p AND sk BETWEEN :a AND :b",
            ExpressionAttributeValues={":p": {"S": "tenant#1"}, ":a": {"S": "11"}, ":b": {"S": "13"}},
            ScanIndexForward=False,
            Limit=2,
        ),
        dynamodb.query(
            TableName="t",
            IndexName="by_gsi",
            KeyConditionExpression="gsi = :g",
            ExpressionAttributeValues={":g": {"S": "g"}},
        ),
        dynamodb.scan(TableName="t", Limit=3),
        dynamodb.batch_get_item(RequestItems={"t": {"Keys": [key, {"pk": {"S": "tenant#1"}, "sk": {"S": "12"}}]}}),
        dynamodb.batch_write_item(
            RequestItems={
                "t": [{"PutRequest": {"Item": {"pk": {"S": "b"}, "sk": {"S": "1"}}}}, {"DeleteRequest": {"Key": key}}]
            }
        ),
        dynamodb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": "t", "Item": {"pk": {"S": "c"}, "sk": {"S": "1"}}}},
                {
                    "Update": {
                        "TableName": "t",
                        "Key": {"pk": {"S": "b"}, "sk": {"S": "1"}},
                        "UpdateExpression": "SET x = :x",
                        "ExpressionAttributeValues": {":x": {"N": "1"}},
                    }
                },
            ]
        ),
        dynamodb.transact_get_items(
            TransactItems=[{"Get": {"TableName": "t", "Key": {"pk": {"S": "b"}, "sk": {"S": "1"}}}}]
        ),
        dynamodb.delete_item(TableName="t", Key={"pk": {"S": "c"}, "sk": {"S": "1"}}, ReturnValues="ALL_OLD"),
    ]
    for refused in (
        lambda: dynamodb.put_item(
            TableName="t",
            Item={"pk": {"S": "b"}, "sk": {"S": "1"}},
            ConditionExpression="attribute_not_exists(pk)",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        ),
        lambda: dynamodb.get_item(TableName="missing", Key=key),
        # The condition above with values it does not hold for; then with a value it does not use.
        lambda: claimed(dynamodb, key, True, "1e9"),
        lambda: claimed(dynamodb, key, True, "1", {":unused": {"N": "1"}}),
        # Refused by the checks that read only the expression: each refused again when used again.
        *[
            lambda names=names: dynamodb.update_item(  # type: ignore[misc]
                TableName="t",
                Key={"pk": {"S": "b"}, "sk": {"S": "1"}},
                UpdateExpression="SET #a = :x REMOVE spare",
                ExpressionAttributeNames={"#a": names},
                ExpressionAttributeValues={":x": {"N": "1"}},
            )
            for names in ("pk", "spare", "pk", "spare")  # a key attribute; a path set and removed
        ],
        lambda: dynamodb.transact_write_items(
            TransactItems=[
                {
                    "ConditionCheck": {
                        "TableName": "t",
                        "Key": {"pk": {"S": "b"}, "sk": {"S": "1"}},
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
            ]
        ),
    ):
        with pytest.raises(ClientError) as error:
            refused()
        answers.append({k: v for k, v in error.value.response.items() if k != "ResponseMetadata"})
    answers += queries(dynamodb)
    return [{k: v for k, v in answer.items() if k != "ResponseMetadata"} for answer in answers]


_OWNER = {"ExpressionAttributeNames": {"#o": "owner"}}


def queries(dynamodb: Any) -> list[Any]:
    """Queries of a table keyed by its partition alone and of its index, over partitions written out of key order:
    pages both ways, a range condition, items outside the index; then again after items moved between the index's
    partitions, left it, were deleted and written again."""
    included = {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["n"]}
    a_table(dynamodb, "h", ("id",), ("by_owner", ("owner", "at"), included))
    for n in (7, 3, 9, 1, 5, 8, 2, 6, 4, 0):
        item = {"id": {"S": f"d{n}"}, "at": {"S": f"2026-0{n % 3 + 1}"}, "n": {"N": str(n)}}
        if n != 4:  # one item outside the index
            item["owner"] = {"S": f"o{n % 2}"}
        dynamodb.put_item(TableName="h", Item=item)
    owner = {"KeyConditionExpression": "#o = :o", **_OWNER}
    before = dynamodb.query(TableName="h", IndexName="by_owner", ExpressionAttributeValues={":o": {"S": "o1"}}, **owner)
    # Items that leave a partition, join one, go and come back, by every write the functions make.
    dynamodb.update_item(
        TableName="h",
        Key={"id": {"S": "d3"}},
        UpdateExpression="SET #o = :o",
        ExpressionAttributeNames={"#o": "owner"},
        ExpressionAttributeValues={":o": {"S": "o0"}},
    )
    dynamodb.update_item(TableName="h", Key={"id": {"S": "d5"}}, UpdateExpression="REMOVE #o", **_OWNER)
    dynamodb.delete_item(TableName="h", Key={"id": {"S": "d7"}})
    dynamodb.batch_write_item(
        RequestItems={
            "h": [{"PutRequest": {"Item": {"id": {"S": "d7"}, "owner": {"S": "o0"}, "at": {"S": "2026-09"}}}}]
        }
    )
    dynamodb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": "h", "Item": {"id": {"S": "d4"}, "owner": {"S": "o1"}, "at": {"S": "2026-08"}}}},
            {
                "Update": {
                    "TableName": "h",
                    "Key": {"id": {"S": "d9"}},
                    "UpdateExpression": "SET #o = :o",
                    "ExpressionAttributeNames": {"#o": "owner"},
                    "ExpressionAttributeValues": {":o": {"S": "o2"}},
                }
            },
        ]
    )
    dynamodb.update_item(  # an item made by an update, straight into a partition
        TableName="h",
        Key={"id": {"S": "d10"}},
        UpdateExpression="SET #o = :o, #a = :a",
        ExpressionAttributeNames={"#o": "owner", "#a": "at"},
        ExpressionAttributeValues={":o": {"S": "o1"}, ":a": {"S": "2026-07"}},
    )
    return [
        before,
        dynamodb.query(TableName="h", IndexName="by_owner", ExpressionAttributeValues={":o": {"S": "o2"}}, **owner),
        dynamodb.query(TableName="h", KeyConditionExpression="id = :i", ExpressionAttributeValues={":i": {"S": "d3"}}),
        dynamodb.query(TableName="h", KeyConditionExpression="id = :i", ExpressionAttributeValues={":i": {"S": "no"}}),
        dynamodb.query(TableName="h", IndexName="by_owner", ExpressionAttributeValues={":o": {"S": "o1"}}, **owner),
        dynamodb.query(
            TableName="h",
            IndexName="by_owner",
            ExpressionAttributeValues={":o": {"S": "o0"}},
            ScanIndexForward=False,
            Limit=2,
            **owner,
        ),
        dynamodb.query(
            TableName="h",
            IndexName="by_owner",
            KeyConditionExpression="#o = :o AND #a > :a",
            ExpressionAttributeNames={"#o": "owner", "#a": "at"},
            ExpressionAttributeValues={":o": {"S": "o1"}, ":a": {"S": "2026-01"}},
            ExclusiveStartKey={"id": {"S": "d7"}, "owner": {"S": "o1"}, "at": {"S": "2026-02"}},
        ),
        # The reconciler's shape: a window of the sort key, newest first, a page at a time, filtered.
        *(
            dynamodb.query(
                TableName="h",
                IndexName="by_owner",
                KeyConditionExpression="#o = :o AND #a BETWEEN :from AND :to",
                FilterExpression="#n < :n",
                ExpressionAttributeNames={"#o": "owner", "#a": "at", "#n": "n"},
                ExpressionAttributeValues={
                    ":o": {"S": owner},
                    ":from": {"S": "2026-02"},
                    ":to": {"S": "2026-08"},
                    ":n": {"N": "8"},
                },
                ScanIndexForward=False,
                Limit=1,
                **page,
            )
            for owner, page in [
                ("o1", {}),
                ("o0", {}),
                ("o1", {"ExclusiveStartKey": {"id": {"S": "d4"}, "owner": {"S": "o1"}, "at": {"S": "2026-08"}}}),
            ]
        ),
        dynamodb.scan(TableName="h"),
    ]


@contextmanager
def dynamodb_on_moto(fast: bool) -> Iterator[Any]:
    """A DynamoDB client on moto, with the local stack's changes (`fast`) or as moto ships."""
    (moto_dynamodb.install if fast else moto_dynamodb.uninstall)()
    try:
        with moto_stack():
            yield boto3.client("dynamodb")
    finally:
        moto_dynamodb.uninstall()


def counting(monkeypatch: pytest.MonkeyPatch, owner: type, name: str) -> list[None]:
    """The calls of `owner.name` from now on, one entry each."""
    calls: list[None] = []
    original = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(None)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def answers_with(fast: bool) -> list[Any]:
    with dynamodb_on_moto(fast) as dynamodb:
        return operations(dynamodb)


@pytest.fixture
def fast_answers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The bodies the fast path wrote, so the comparison cannot pass with the fast path unused."""
    written: list[str] = []
    plain_json = moto_dynamodb.plain_json

    def recording(result: dict[str, Any]) -> str | None:
        body = plain_json(result)
        if body is not None:
            written.append(body)
        return body

    monkeypatch.setattr(moto_dynamodb, "plain_json", recording)
    yield written


def test_the_checks_of_an_expression_alone_run_once_per_expression_names_and_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checks = counting(monkeypatch, validators.ActionCountValidator, "traverse")  # one pass per validation
    with dynamodb_on_moto(fast=True) as dynamodb:
        a_table(dynamodb, "t", ("pk",))
        for n in range(3):
            dynamodb.put_item(TableName="t", Item={"pk": {"S": "a"}})
            dynamodb.update_item(
                TableName="t",
                Key={"pk": {"S": "a"}},
                UpdateExpression="SET #v = :v",
                ExpressionAttributeNames={"#v": "value"},
                ExpressionAttributeValues={":v": {"N": str(n)}},
            )
        item = dynamodb.get_item(TableName="t", Key={"pk": {"S": "a"}})["Item"]
    assert item["value"] == {"N": "2"}
    assert len(checks) == 1


def test_a_condition_is_parsed_once_per_expression_names_and_value_names(monkeypatch: pytest.MonkeyPatch) -> None:
    lexed: list[str] = []
    lex = ConditionExpressionParser._lex_condition_expression  # the parse's first step

    def recording(self: ConditionExpressionParser) -> Any:
        lexed.append(str(self.condition_expression))
        return lex(self)

    def versions(fast: bool) -> tuple[list[Any], list[str]]:
        lexed.clear()
        with dynamodb_on_moto(fast) as dynamodb:
            a_table(dynamodb, "t", ("pk",))
            dynamodb.put_item(TableName="t", Item={"pk": {"S": "a"}, "v": {"N": "0"}})
            written = []
            for n in (1, 2, 2, 3):  # each write holds only if it raises the version: the second 2 does not
                try:
                    dynamodb.update_item(
                        TableName="t",
                        Key={"pk": {"S": "a"}},
                        UpdateExpression="SET v = :v",
                        ConditionExpression="v < :v",
                        ExpressionAttributeValues={":v": {"N": str(n)}},
                    )
                    written.append(n)
                except ClientError as error:
                    written.append(error.response["Error"]["Code"])
        return written, list(lexed)

    monkeypatch.setattr(ConditionExpressionParser, "_lex_condition_expression", recording)
    generic, generic_lexed = versions(fast=False)
    fast, fast_lexed = versions(fast=True)
    assert generic == fast == [1, 2, "ConditionalCheckFailedException", 3]
    assert len(generic_lexed) == 8  # the control: moto parses each update's condition twice
    assert fast_lexed == ["v < :v"]


def test_a_query_sorts_what_it_matches_not_the_whole_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto sorts every item of the table for each query; the local stack's sorts the partition it reads (a table
    query) or the index's matches. Counted as key comparisons, with moto as it ships as the control."""
    compared = counting(monkeypatch, DynamoType, "__lt__")

    def comparisons(fast: bool) -> int:
        with dynamodb_on_moto(fast) as dynamodb:
            a_table(dynamodb, "t", ("pk", "sk"))
            for n in range(300):
                dynamodb.put_item(TableName="t", Item={"pk": {"S": f"p{n % 100}"}, "sk": {"S": f"{n}"}})
            compared.clear()
            found = dynamodb.query(
                TableName="t", KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "p7"}}
            )
        assert [item["sk"]["S"] for item in found["Items"]] == ["107", "207", "7"]
        return len(compared)

    assert comparisons(fast=False) > 300  # the control: the whole table sorted
    assert comparisons(fast=True) < 10


def test_an_index_query_reads_the_items_with_its_partition_value_not_the_whole_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """moto compares every item of the table with an index query's partition value; the local stack's looks at the
    items that have had it. Counted as value comparisons, with moto as it ships as the control."""
    compared = counting(monkeypatch, DynamoType, "__ne__")

    def comparisons(fast: bool) -> int:
        with dynamodb_on_moto(fast) as dynamodb:
            a_table(dynamodb, "t", ("pk",), ("by_owner", ("owner",), {"ProjectionType": "ALL"}))
            for n in range(300):
                dynamodb.put_item(TableName="t", Item={"pk": {"S": f"{n:03}"}, "owner": {"S": f"o{n % 100}"}})
            by_owner = {"IndexName": "by_owner", "KeyConditionExpression": "#o = :o", **_OWNER}
            dynamodb.query(TableName="t", **by_owner, ExpressionAttributeValues={":o": {"S": "o1"}})  # notes the keys
            compared.clear()
            found = dynamodb.query(TableName="t", **by_owner, ExpressionAttributeValues={":o": {"S": "o7"}})
        assert sorted(item["pk"]["S"] for item in found["Items"]) == ["007", "107", "207"]
        return len(compared)

    assert comparisons(fast=False) >= 300  # the control: every item compared
    assert comparisons(fast=True) < 10


def test_a_query_sizes_only_the_items_within_its_sort_key_condition(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto sizes (and sorts) every item of the partition before it compares an item's sort key with the query's
    condition; the local stack's hands it only the items that meet the condition (the reconciler's window of a
    tenant's log shard). Counted as item sizes, with moto as it ships as the control."""
    sized = counting(monkeypatch, Item, "size")

    def sizes(fast: bool) -> int:
        with dynamodb_on_moto(fast) as dynamodb:
            a_table(dynamodb, "t", ("pk",), ("by_owner", ("owner", "at"), {"ProjectionType": "ALL"}))
            for n in range(300):
                dynamodb.put_item(
                    TableName="t", Item={"pk": {"S": f"{n:03}"}, "owner": {"S": "o"}, "at": {"S": f"{n:03}"}}
                )
            sized.clear()
            found = dynamodb.query(
                TableName="t",
                IndexName="by_owner",
                KeyConditionExpression="#o = :o AND #a BETWEEN :from AND :to",
                ExpressionAttributeNames={"#o": "owner", "#a": "at"},
                ExpressionAttributeValues={":o": {"S": "o"}, ":from": {"S": "020"}, ":to": {"S": "022"}},
                ScanIndexForward=False,
            )
        assert [item["pk"]["S"] for item in found["Items"]] == ["022", "021", "020"]
        return len(sized)

    assert sizes(fast=False) >= 300  # the control: every item of the partition sized
    assert sizes(fast=True) < 10


def test_the_fast_answers_parse_as_motos_own(fast_answers: list[str]) -> None:
    generic = answers_with(fast=False)
    assert fast_answers == []
    fast = answers_with(fast=True)
    assert len(fast_answers) >= 12  # most answers took the fast path (binary values take the generic one)
    assert fast == generic
