"""moto's DynamoDB item operations answered as DynamoDB answers them (their result, written as JSON), and each
update expression parsed once.

moto 5.2 writes every answer through a generic serializer that walks the operation's output shape member by
member and, for each, tries the member's names in several spellings (PascalCase, snake_case, with and without
response transformers). For an item operation the result is already in DynamoDB's wire form (attribute values
such as `{"S": "…"}` under the output's own member names: `DynamoResult` made it so), and the walk only
rewrites it as it is, slowly: in the local stack's throughput run it was a fifth of moto's server time. Here
the item operations' results are written with `json.dumps` instead; anything that is not plain JSON (bytes,
timestamps) goes the generic way, as do errors and every other operation.

moto also parses an `UpdateItem`'s update expression twice per call (once to check the names and values it
uses, once to apply it), about a fifth of the call. The functions send a handful of expressions, each many
times; the parsed tree is kept per expression string. Nothing changes a kept tree: the validator works on its
own deep copy (`Validator.__init__`), and the other caller only reads it (`find_clauses`).

`tests/integration/test_moto_dynamodb.py` runs the same item operations (every attribute type, pages, batch
and transaction answers, refusals, an update expression used again with other values) with and without this
and compares what boto3 parsed.

Installed by moto's server process of the local stack (`local.aws_endpoint`); nothing deployed imports this.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from moto.core.responses import ActionContext
from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]
from moto.dynamodb.responses import DynamoResult

ITEM_OPERATIONS = frozenset(
    {
        "GetItem",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "Query",
        "Scan",
        "BatchGetItem",
        "BatchWriteItem",
        "TransactGetItems",
        "TransactWriteItems",
    }
)
CONTENT_TYPE = "application/x-amz-json-1.0"  # DynamoDB's JSON protocol version


class _NotPlainJson(Exception):
    pass


def _refuse(value: object) -> Any:
    raise _NotPlainJson(type(value).__name__)


def plain_json(result: dict[str, Any]) -> str | None:
    """The result as DynamoDB's JSON, or None when the generic serializer must write it (a value that JSON does
    not carry as it is). Top-level members without a value are left out, as the serializer leaves them."""
    try:
        return json.dumps({k: v for k, v in result.items() if v is not None}, default=_refuse)
    except _NotPlainJson:
        return None


_generic_execute_result = DynamoResult.execute_result


def _execute_result(self: DynamoResult, context: ActionContext) -> Any:
    result = self.result
    if isinstance(result, dict) and context.operation_model.name in ITEM_OPERATIONS:
        body = plain_json(result)
        if body is not None:
            return 200, {"Content-Type": CONTENT_TYPE}, body
    return _generic_execute_result(self, context)


_generic_make = UpdateExpressionParser.__dict__["make"]  # the classmethod itself, to put back


@functools.lru_cache(maxsize=1024)
def _parsed_once(expression: str) -> Any:
    return _generic_make.__get__(None, UpdateExpressionParser)(expression)


def install() -> None:
    DynamoResult.execute_result = _execute_result  # type: ignore[method-assign]
    UpdateExpressionParser.make = staticmethod(_parsed_once)


def uninstall() -> None:
    """For the comparison test: moto as it ships."""
    DynamoResult.execute_result = _generic_execute_result  # type: ignore[method-assign]
    UpdateExpressionParser.make = _generic_make
    _parsed_once.cache_clear()
