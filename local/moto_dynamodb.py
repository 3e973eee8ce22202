"""moto's DynamoDB item operations answered as DynamoDB answers them (their result, written as JSON), and each
update and condition expression parsed once.

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

With the local stack's throughput benchmark running, `UpdateItem` was half of this server's CPU, and two of its
costs repeat the same work for the same expression: the validator's deep copy of the tree (a tenth), and three
of its ten passes over the tree (ActionCount, OverlappingPaths, UpdateHashRangeKey), which read only the
expression, its attribute names and the table's keys. The copy is made from the kept tree's pickle (a quarter
of the time), and those three passes run once per expression, names and table: a refusal raises before the
expression is remembered as passed, so a bad expression is refused every time.

A condition expression (a conditional write's, a query's filter) is parsed in full on every call, and twice for
an `UpdateItem` (once to check the names and values it uses, once to apply it): 19% of this server's CPU late in
a throughput run, every one of them a handful of expressions sent again and again. Only the last step of the
parse, which makes the operators, puts the values in; the tree before it depends on the expression, its names
and which value names there are. That tree is kept per (expression, names, value names), and the operators are
made from it with this call's values, each looked up by its name. A refusal raises before anything is kept, so a
bad expression is refused every time.

moto's `Table.query` starts from every item of the table, sorted by key (`all_items`), and then keeps the
partition asked for; a query of an index filters the same sorted list by the index's key. Both sort the matches
again afterwards, so the first sort only costs: a few thousand deliveries into a run, the sweeper's and the
reconciler's index queries (every few seconds with `--fast`) were about a tenth of this server's CPU, growing
with the table. Here a query of the table starts from its one partition, and a query of an index from the
table's items unsorted; the answers are the same (the matches are sorted by their full key either way).

moto also finds an index query's partition by comparing every item of the table with the key asked for: each
query costs the whole table. The reconciler and the sweepers query indexes every few seconds with `--fast`
(the reconciler once per tenant and log shard), so late in a throughput run `Query` was 30% of this server's
CPU, growing with the table. Here each table keeps, per index with one partition key attribute, the keys of the
items that have had each partition value (noted whenever an item is put or updated: the only ways an item
changes), and an index query starts from those items. An item whose value has since changed, or which is gone,
is dropped from its entry when a query meets it; moto's own filter then runs as before on what is left, so the
answer is what moto's would be. A table replaced whole (a restore) is noted again from scratch.

Then moto sorts the partition's items and sizes each one before it compares its sort key with the query's
condition. The reconciler reads a few seconds of each tenant's log shard from a minute ago (`BETWEEN`, newest
first): 28 ms a call late in a throughput run, a quarter of the time this server spent answering requests beside
a hanging endpoint, with every other call waiting behind it. Here the items whose sort key does not meet the
condition are left out first, compared as moto compares them (moto compares the rest again).

`tests/integration/test_moto_dynamodb.py` runs the same item operations (every attribute type, pages, batch
and transaction answers, refusals, an update expression used again with other values) with and without this
and compares what boto3 parsed.

Installed by moto's server process of the local stack (`local.aws_endpoint`); nothing deployed imports this.
"""

from __future__ import annotations

import copy
import functools
import json
import pickle
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from moto.core.responses import ActionContext
from moto.dynamodb.comparisons import AttributeValue, ConditionExpressionParser
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table
from moto.dynamodb.parsing import validators
from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]
from moto.dynamodb.parsing.validators import (
    ActionCountValidator,
    OverlappingPathsValidator,
    UpdateExpressionValidator,
    UpdateHashRangeKeyValidator,
)
from moto.dynamodb.responses import DynamoResult

from local.moto_patches import Patches

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


_generic_make = UpdateExpressionParser.__dict__["make"]  # the classmethod itself: what the kept trees are parsed by
_generic_validate = UpdateExpressionValidator.validate
_SOURCE = "hookrelay_expression"  # set on each kept tree's root: the expression it was parsed from


@functools.lru_cache(maxsize=1024)
def _parsed_once(expression: str) -> tuple[Any, bytes]:
    """The expression's tree, kept, and its pickle: unpickling is a deep copy at a quarter of `deepcopy`'s cost."""
    tree = _generic_make.__get__(None, UpdateExpressionParser)(expression)
    setattr(tree, _SOURCE, expression)
    return tree, pickle.dumps(tree, pickle.HIGHEST_PROTOCOL)


def _kept_tree(expression: str) -> Any:
    return _parsed_once(expression)[0]


def _copy(value: Any) -> Any:
    """`deepcopy` for the validators' module: a kept tree is copied from its pickle, anything else deep-copied."""
    source = getattr(value, _SOURCE, None)
    # The pickle is our own, made in this process from a parse of the expression (never read from outside).
    return pickle.loads(_parsed_once(source)[1]) if isinstance(source, str) else copy.deepcopy(value)  # noqa: S301


# The validators that read only the expression, its attribute names and the table's keys, never a value or the
# item: once they have passed for an (expression, names, table), they pass again.
_EXPRESSION_ONLY = (ActionCountValidator, OverlappingPathsValidator, UpdateHashRangeKeyValidator)
_passed: set[tuple[str, frozenset[tuple[str, str]], str]] = set()


def _validate(self: UpdateExpressionValidator) -> Any:
    source = getattr(self.node_to_validate, _SOURCE, None)
    if not isinstance(source, str):
        return _generic_validate(self)
    key = (source, frozenset((self.expression_attribute_names or {}).items()), self.table.name)
    if key in _passed:
        self.processors = [p for p in self.processors if not isinstance(p, _EXPRESSION_ONLY)]
    validated = _generic_validate(self)
    _passed.add(key)  # every check passed (a refusal raises)
    return validated


_generic_parse_condition = ConditionExpressionParser.parse
_generic_make_operand = ConditionExpressionParser._make_operand
_VALUE = ConditionExpressionParser.Kind.EXPRESSION_ATTRIBUTE_VALUE
_NO_VALUE = {"NULL": True}  # what the kept tree's values are parsed with: the operators get the call's own


class _TreeOnly(ConditionExpressionParser):
    """moto's parse, stopped before the operators are made: the tree, and the names and values it found."""

    def _make_op_condition(self, node: Any) -> Any:
        return node


@functools.lru_cache(maxsize=1024)
def _condition_tree(
    expression: str, names: tuple[tuple[str, str], ...], value_names: frozenset[str]
) -> tuple[Any, tuple[str, ...], tuple[str, ...]]:
    parser = _TreeOnly(expression, dict(names), dict.fromkeys(value_names, _NO_VALUE))
    tree = parser.parse()
    return tree, tuple(parser.expr_attr_names_found), tuple(parser.expr_attr_values_found)


def _parse_condition(self: ConditionExpressionParser) -> Any:
    if not self.condition_expression or isinstance(self, _TreeOnly):
        return _generic_parse_condition(self)
    names = tuple(sorted((self.expression_attribute_names or {}).items()))
    tree, names_found, values_found = _condition_tree(
        self.condition_expression, names, frozenset(self.expression_attribute_values or ())
    )
    self.expr_attr_names_found.extend(names_found)
    self.expr_attr_values_found.extend(values_found)
    return self._make_op_condition(tree)


def _make_operand(self: ConditionExpressionParser, node: Any) -> Any:
    """A value operand from this call's values, by its name (`node.text`): the same value a fresh parse puts in
    `node.value`."""
    if node.kind == _VALUE:
        return AttributeValue(self._lookup_expression_attribute_value(node.text))
    return _generic_make_operand(self, node)


_generic_query = Table.query
_generic_all_items = Table.all_items
_generic_put_item = Table.put_item
_generic_update_item = DynamoDBBackend.update_item


@dataclass
class _Query:
    """The query running on this thread: its table, the partition's key, the index asked for (None: the table),
    for an index its partition key conditions [(attribute, value)], and its sort key condition (a comparison such
    as "BETWEEN" and its values; None: none) with moto's conditions on several sort key attributes."""

    table: Table
    hash_key: Any
    index_name: str | None
    hash_key_conditions: list[tuple[str, Any]] | None
    range_comparison: str | None
    range_objs: list[Any]
    range_key_conditions: list[Any] | None

    def sort_key(self) -> str | None:
        """The one attribute the sort key condition compares (moto's choice for it), or None when it is not one
        attribute's: then every candidate goes to moto."""
        if not self.range_comparison or len(self.range_key_conditions or ()) > 1:
            return None
        if self.index_name is None:
            return self.table.range_key_attr
        index = self.table.get_index(self.index_name)  # one the table has: moto refused any other before this
        ranges = [key["AttributeName"] for key in index.schema if key["KeyType"] == "RANGE"]
        return ranges[0] if len(ranges) == 1 else None


_querying: ContextVar[_Query | None] = ContextVar("querying", default=None)
# `Table.query`'s positional arguments after `hash_key`: range_comparison, range_objs, ..., index_name seventh
_QUERY_RANGE_COMPARISON, _QUERY_RANGE_OBJS, _QUERY_INDEX_NAME = 0, 1, 6


class _IndexKeys:
    """A table's items by their value of each index's partition key attribute (indexes with one such attribute):
    {index name: {value: {(hash key, range key)}}}; a superset of the items that have the value now."""

    def __init__(self, table: Table) -> None:
        self.items_of = id(table.items)  # the table's item store these keys were taken from
        self.attributes = {
            index.name: hashes[0]["AttributeName"]
            for index in table.all_indexes()
            if len(hashes := [key for key in index.schema if key["KeyType"] == "HASH"]) == 1
        }
        self.keys: dict[str, dict[Any, set[tuple[Any, Any]]]] = {name: {} for name in self.attributes}
        for item in _every_item(table):
            self.note(item)

    def note(self, item: Any) -> None:
        for name, attribute in self.attributes.items():
            value = item.attrs.get(attribute)
            if value is not None and not isinstance(value.value, (list, dict)):  # a key is a string, number or binary
                self.keys[name].setdefault(value, set()).add((item.hash_key, item.range_key))

    def items(self, table: Table, index_name: str, value: Any) -> list[Any]:
        """The items that have `value` now; the entry's other keys (gone, or changed since) are dropped."""
        keys = self.keys[index_name].get(value)
        if not keys:
            return []
        attribute, found, stale = self.attributes[index_name], [], []
        for hash_key, range_key in keys:
            partition = table.items.get(hash_key)
            item = partition.get(range_key) if partition is not None and table.range_key_attr else partition
            current = None if item is None else item.attrs.get(attribute)
            if current is not None and current == value:  # None first: DynamoType cannot compare with None
                found.append(item)
            else:
                stale.append((hash_key, range_key))
        keys.difference_update(stale)
        return found


def _every_item(table: Table) -> list[Any]:
    if table.range_key_attr:
        return [item for partition in table.items.values() for item in partition.values()]
    return list(table.items.values())


def _index_keys(table: Table) -> _IndexKeys:
    kept: _IndexKeys | None = getattr(table, "_hookrelay_index_keys", None)
    if kept is None or kept.items_of != id(table.items):
        kept = _IndexKeys(table)
        table._hookrelay_index_keys = kept  # type: ignore[attr-defined]
    return kept


def _noted(table: Table, item: Any) -> None:
    kept: _IndexKeys | None = getattr(table, "_hookrelay_index_keys", None)
    if kept is not None and kept.items_of == id(table.items) and item is not None:
        kept.note(item)


def _put_item(self: Table, *args: Any, **kwargs: Any) -> Any:
    item = _generic_put_item(self, *args, **kwargs)
    _noted(self, item)
    return item


def _update_item(self: DynamoDBBackend, table_name: str, *args: Any, **kwargs: Any) -> Any:
    item = _generic_update_item(self, table_name, *args, **kwargs)
    _noted(self.get_table(table_name), item)  # updated in place: it may have a new value of an index's key
    return item


def _query(self: Table, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
    def argument(name: str, position: int) -> Any:
        return kwargs.get(name, args[position] if len(args) > position else None)

    query = _Query(
        self,
        hash_key,
        argument("index_name", _QUERY_INDEX_NAME),
        kwargs.get("hash_key_conditions"),
        argument("range_comparison", _QUERY_RANGE_COMPARISON),
        argument("range_objs", _QUERY_RANGE_OBJS) or [],
        kwargs.get("range_key_conditions"),
    )
    token = _querying.set(query)
    try:
        return _generic_query(self, hash_key, *args, **kwargs)
    finally:
        _querying.reset(token)


def _all_items(self: Table) -> list[Any]:
    """For a query: the items it may match, unsorted, then filtered and sorted by moto. Anything else (a scan, an
    export) gets moto's sorted list."""
    query = _querying.get()
    if query is None or query.table is not self:
        return _generic_all_items(self)
    return _within_sort_key_condition(query, _in_partition(self, query))


def _in_partition(table: Table, query: _Query) -> list[Any]:
    """The partition asked for (a table query), or the items that have the index's partition value asked for (an
    index query, by `_IndexKeys`; every item for an index keyed by several attributes)."""
    if query.index_name is None:
        partition = table.items.get(query.hash_key)  # `get`: the table's defaultdict would add an empty partition
        if partition is None:
            return []
        return list(partition.values()) if table.range_key_attr else [partition]
    index_keys = _index_keys(table)
    conditions = query.hash_key_conditions or []
    if len(conditions) == 1 and index_keys.attributes.get(query.index_name) == conditions[0][0]:
        return index_keys.items(table, query.index_name, conditions[0][1])
    return _every_item(table)


def _within_sort_key_condition(query: _Query, items: list[Any]) -> list[Any]:
    """The items whose sort key meets the query's condition, compared as moto compares it: moto sorts and sizes what
    it is given before it compares (see the module's docstring), then compares them again. An item without the
    attribute is not in the index: moto skips it too."""
    attribute = query.sort_key()
    if attribute is None:
        return items
    return [
        item
        for item in items
        if (value := item.attrs.get(attribute)) is not None and value.compare(query.range_comparison, query.range_objs)
    ]


_PATCHES = Patches(
    (DynamoResult, "execute_result", _execute_result),
    (UpdateExpressionParser, "make", staticmethod(_kept_tree)),
    (validators, "deepcopy", _copy),
    (UpdateExpressionValidator, "validate", _validate),
    (Table, "query", _query),
    (Table, "all_items", _all_items),
    (Table, "put_item", _put_item),
    (DynamoDBBackend, "update_item", _update_item),
    (ConditionExpressionParser, "parse", _parse_condition),
    (ConditionExpressionParser, "_make_operand", _make_operand),
)


def install() -> None:
    _PATCHES.install()


def uninstall() -> None:
    """For the comparison test: moto as it ships."""
    _PATCHES.uninstall()
    _parsed_once.cache_clear()
    _condition_tree.cache_clear()
    _passed.clear()
