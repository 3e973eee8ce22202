"""DynamoDB transactions on moto, all-or-nothing without copying whole tables.

moto 5.2's `transact_write_items` deep-copies every table a transaction names before it starts, and on a
cancelled transaction puts those copies back. That is O(table) per transaction (the parked deliveries'
park and claim are transactions, so a bad night with thousands of deliveries crawls), and, with other
threads writing meanwhile (the local stack's concurrent invocations), the copy can fail ("dictionary
changed size during iteration") and the restore throws away every other write made since the copy.

DynamoDB checks every condition of a transaction before it writes anything. This does the same: check
them all against the current items, then, only if all hold, apply the writes, under one lock so that two
transactions never interleave. Installed by the local stack and the moto-backed tests (`install()`), the
only places moto runs; nothing deployed imports this.
"""

from __future__ import annotations

import threading
from typing import Any

from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend

MAX_ITEMS = 100  # DynamoDB's limit per transaction
_LOCK = threading.Lock()
_OPERATIONS = frozenset({"ConditionCheck", "Put", "Delete", "Update"})


def _key(backend: DynamoDBBackend, op_type: str, op: dict[str, Any]) -> dict[str, Any]:
    if op_type != "Put":
        return dict(op["Key"])
    table = backend.get_table(op["TableName"])
    key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
    if table.range_key_attr is not None:
        key[table.range_key_attr] = op["Item"][table.range_key_attr]
    return key


def _check(backend: DynamoDBBackend, op: dict[str, Any], key: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(None, None, None) when the item's condition holds, else DynamoDB's cancellation reason for it."""
    condition = op.get("ConditionExpression")
    if condition is None:
        return (None, None, None)
    current = backend.get_item(op["TableName"], key)
    expression = get_filter_expression(
        condition, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
    )
    if expression.expr(current):
        return (None, None, None)
    old = current.to_json()["Attributes"] if current and op.get("ReturnValuesOnConditionCheckFailure") else None
    return ("ConditionalCheckFailed", "The conditional request failed", old)


def _apply(backend: DynamoDBBackend, op_type: str, op: dict[str, Any], key: dict[str, Any]) -> None:
    names, values = op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
    if op_type == "Put":
        backend.put_item(op["TableName"], op["Item"])
    elif op_type == "Delete":
        backend.delete_item(op["TableName"], key)
    elif op_type == "Update":
        backend.update_item(
            op["TableName"],
            key,
            update_expression=op["UpdateExpression"],
            expression_attribute_names=names,
            expression_attribute_values=values,
        )


def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    if len(transact_items) > MAX_ITEMS:
        raise TooManyTransactionsException()
    with _LOCK:
        planned: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        seen: set[tuple[str, str]] = set()
        for item in transact_items:
            if len(item) != 1:
                raise TransactWriteSingleOpException
            op_type, op = next(iter(item.items()))
            if op_type not in _OPERATIONS:
                raise ValueError(f"unsupported transaction operation {op_type}")
            key = _key(self, op_type, op)
            identity = (str(op["TableName"]), str(dict(sorted(key.items()))))
            if identity in seen:
                raise MultipleTransactionsException()
            seen.add(identity)
            planned.append((op_type, op, key))
        reasons = [_check(self, op, key) for _, op, key in planned]
        if any(code is not None for code, _, _ in reasons):
            raise TransactionCanceledException(reasons)
        for op_type, op, key in planned:
            _apply(self, op_type, op, key)


def install() -> None:
    """Replace moto's transact_write_items (idempotent)."""
    DynamoDBBackend.transact_write_items = transact_write_items
