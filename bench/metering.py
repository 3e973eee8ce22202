"""Metering a run of the system on moto (in process) the way AWS bills it.

Every boto3 call in this process goes through `botocore.client.BaseClient._make_api_call`; the meter
wraps it to count and time each call, attributed to who made it:

- a Lambda function (the call happened inside one of its invocations; `local.lambda_runtime` is wrapped
  to know which, and to time every invocation),
- the SQS event source (receive and delete around the delivery function, as Lambda's poller does),
- Step Functions (untagged calls on other threads: moto's interpreter running the retry workflow's
  `sqs:sendMessage` tasks, which AWS bills as SQS requests),
- the benchmark itself (set-up and looking inside; never billed).

It also sizes what DynamoDB and SQS bill by. DynamoDB on-demand units come from item sizes read out of
moto's own backend before and after each write (an approximation: moto's `Item.size()` counts numbers as
their decimal digits and leaves out the few bytes of list/map overhead DynamoDB adds), including the
writes to every global secondary index the item is in, sized as the entry the index holds (its keys, the
table's key and its projected attributes): a write that changes none of an entry's projected attributes
does not write that index, one that moves the entry's key writes it twice (the old entry out, the new in).
A transaction (`TransactWriteItems`) bills two writes of every item it names, a ConditionCheck or a
cancelled transaction's items too, and its index updates once. SQS requests are
counted in 64 KiB chunks of payload.
"""

from __future__ import annotations

import contextvars
import logging
import math
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

import botocore.client
from boto3.dynamodb.types import TypeSerializer
from botocore.exceptions import ClientError

from local import lambda_runtime

STORAGE_OVERHEAD_BYTES = 100  # DynamoDB's per item (and per index entry) storage overhead
WORKFLOW = "step functions"
EVENT_SOURCE = "event source"
BENCH = "bench"
UNATTRIBUTED = "unattributed"

SQS_CHUNK_BYTES = 64 * 1024
WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
TRANSACTION_FACTOR = 2  # DynamoDB: a transactional write costs 2 WRU per KB of every item it names

_SERIALIZER = TypeSerializer()
_TYPE_TAGS = frozenset({"S", "N", "B", "BOOL", "NULL", "M", "L", "SS", "NS", "BS"})


@dataclass
class ApiCall:
    origin: str
    service: str
    operation: str
    seconds: float
    fifo: bool = False
    sqs_chunks: int = 0
    read_units: float = 0.0
    write_units: float = 0.0
    empty: bool = False  # a ReceiveMessage that returned nothing
    table: str = ""  # a DynamoDB request's table (one named by TableName)
    returned: int = 0  # a DynamoDB read's items (a Query's or Scan's Count, a BatchGetItem's responses)
    # DynamoDB writes by where they land: (table, index or "", partition key value, units)
    partitions: list[tuple[str, str, Any, float]] = field(default_factory=list)


@dataclass(frozen=True)
class Invocation:
    function: str
    seconds: float


@dataclass(frozen=True)
class IndexEntry:
    """An item as one index holds it: the entry's key, its projected values, and its size."""

    key: tuple[Any, ...]
    projected: dict[str, Any]
    size: int


@dataclass(frozen=True)
class Snapshot:
    """What a write's cost depends on: the item's size and its entry in each index it is in."""

    size: int
    entries: dict[str, IndexEntry]


def _typed(value: Any) -> dict[str, Any]:
    """A key value as DynamoDB JSON, whether it came from the resource API (plain) or the client (typed)."""
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in _TYPE_TAGS:
        return value
    return _SERIALIZER.serialize(value)


class DynamoDbSizer:
    """Request units of one call, from the items in moto's in-process backend."""

    def __init__(self, region: str) -> None:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.dynamodb.models import dynamodb_backends

        self.backend = dynamodb_backends[DEFAULT_ACCOUNT_ID][region]

    def _table(self, name: str) -> Any:
        return self.backend.get_table(name)

    def _key(self, table: Any, item: dict[str, Any]) -> dict[str, Any]:
        names = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
        return {name: _typed(item[name]) for name in names}

    def partition_of(self, table_name: str, key: dict[str, Any]) -> Any:
        """The partition key value a write names."""
        table = self._table(table_name)
        return next(iter(_typed(key[table.hash_key_attr]).values()))

    def _entry(self, table: Any, index: Any, item: Any) -> IndexEntry | None:
        key_names = [key["AttributeName"] for key in index.schema]
        if any(name not in item.attrs for name in key_names):
            return None  # a sparse index: the item is not in it
        projection = index.projection
        kind = projection.get("ProjectionType", "ALL")
        table_keys = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
        if kind == "ALL":
            names = set(item.attrs)
        else:
            names = {*key_names, *table_keys, *(projection.get("NonKeyAttributes", []) if kind == "INCLUDE" else [])}
        projected = {name: item.attrs[name] for name in names if name in item.attrs}
        size = sum(len(name.encode()) + value.size() for name, value in projected.items())
        return IndexEntry(tuple(item.attrs[name].value for name in key_names), projected, size)

    def stored_bytes(self) -> Counter[str]:
        """Billed storage by table: each item and each of its index entries, with DynamoDB's 100 bytes of overhead
        per item and per index entry (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/
        CapacityUnitCalculations.html)."""
        stored: Counter[str] = Counter()
        for name, table in self.backend.tables.items():
            for item in table.all_items():
                stored[name] += item.size() + STORAGE_OVERHEAD_BYTES
                for index in table.global_indexes:
                    entry = self._entry(table, index, item)
                    if entry is not None:
                        stored[name] += entry.size + STORAGE_OVERHEAD_BYTES
        return stored

    def snapshot(self, table_name: str, key: dict[str, Any]) -> Snapshot | None:
        table = self._table(table_name)
        item = self.backend.get_item(table_name, self._key(table, key))
        if item is None:
            return None
        entries = {index.name: self._entry(table, index, item) for index in table.global_indexes}
        entries_in = {name: entry for name, entry in entries.items() if entry is not None}
        return Snapshot(item.size(), entries_in)

    def writes_of(self, operation: str, params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """(table, key) of every item a write call touches."""
        if operation == "PutItem":
            return [(params["TableName"], params["Item"])]
        if operation in ("UpdateItem", "DeleteItem"):
            return [(params["TableName"], params["Key"])]
        if operation == "TransactWriteItems":
            return [
                (request["TableName"], request.get("Key") or request["Item"])
                for item in params["TransactItems"]
                for kind, request in item.items()
                if kind in ("Put", "Update", "Delete")
            ]
        if operation == "BatchWriteItem":
            touched = []
            for table_name, requests in params["RequestItems"].items():
                for request in requests:
                    if "PutRequest" in request:
                        touched.append((table_name, request["PutRequest"]["Item"]))
                    else:
                        touched.append((table_name, request["DeleteRequest"]["Key"]))
            return touched
        return []

    def condition_checks(self, operation: str, params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """(table, key) of every item a transaction only checks: billed as a write of the item, no index."""
        if operation != "TransactWriteItems":
            return []
        return [
            (i["ConditionCheck"]["TableName"], i["ConditionCheck"]["Key"])
            for i in params["TransactItems"]
            if "ConditionCheck" in i
        ]

    def partition_writes(
        self,
        table_name: str,
        key: dict[str, Any],
        before: Snapshot | None,
        after: Snapshot | None,
        item_factor: int = 1,
    ) -> list[tuple[str, Any, float]]:
        """The write units of one item's write, by where they land: (index name, or "" for the table itself;
        the partition key value written, the key's even when no item is there, as for a delete of none; units).
        What the capacity model reads hot partitions from."""

        def units(size: int) -> int:
            return max(1, math.ceil(size / WRITE_UNIT_BYTES))

        table_units = item_factor * max(units(before.size) if before else 0, units(after.size) if after else 0, 1)
        landed: list[tuple[str, Any, float]] = [("", self.partition_of(table_name, key), table_units)]
        for index in self._table(table_name).global_indexes:
            old = before.entries.get(index.name) if before else None
            new = after.entries.get(index.name) if after else None
            if old and new and old.key == new.key:
                if old.projected != new.projected:
                    landed.append((index.name, new.key[0], units(new.size)))
            else:  # an entry leaves the index, arrives, or both (its key moved)
                if old:
                    landed.append((index.name, old.key[0], units(old.size)))
                if new:
                    landed.append((index.name, new.key[0], units(new.size)))
        return landed

    def read_units(self, operation: str, params: dict[str, Any], result: dict[str, Any]) -> float:
        if operation == "BatchGetItem":  # each item read is rounded up on its own
            total = 0.0
            for table_name, request in params["RequestItems"].items():
                consistent = 1.0 if request.get("ConsistentRead") else 0.5
                for key in request["Keys"]:
                    found = self.snapshot(table_name, key)
                    total += consistent * max(1, math.ceil((found.size if found else 0) / READ_UNIT_BYTES))
            return total
        if "TableName" not in params:
            return 0.0
        table_name = params["TableName"]
        consistent = 1.0 if params.get("ConsistentRead") else 0.5
        if operation == "GetItem":
            found = self.snapshot(table_name, params["Key"])
            return consistent * max(1, math.ceil((found.size if found else 0) / READ_UNIT_BYTES))
        if operation == "Query":
            sizes = [self.snapshot(table_name, item) for item in result.get("Items", [])]
            total = sum(s.size for s in sizes if s)
            return consistent * max(1, math.ceil(total / READ_UNIT_BYTES))
        return 0.0


def _returned(result: dict[str, Any]) -> int:
    """The items a DynamoDB read returned: a Query's or Scan's `Count` (so with Select COUNT too), a BatchGetItem's."""
    if "Count" in result:
        return int(result["Count"])
    return sum(len(items) for items in result.get("Responses", {}).values())


def _sqs_chunks(operation: str, params: dict[str, Any], result: dict[str, Any] | None) -> int:
    if operation == "SendMessage":
        payload = len(params["MessageBody"].encode())
    elif operation == "SendMessageBatch":
        payload = sum(len(entry["MessageBody"].encode()) for entry in params["Entries"])
    elif operation == "ReceiveMessage" and result:
        payload = sum(len(message["Body"].encode()) for message in result.get("Messages", []))
    else:
        payload = 0
    return max(1, math.ceil(payload / SQS_CHUNK_BYTES))


class CountingStream:
    """Stands in for stdout: counts the bytes each origin writes (what CloudWatch Logs would ingest)."""

    def __init__(self, meter: Meter, sink: TextIO) -> None:
        self.meter = meter
        self.sink = sink

    def write(self, text: str) -> int:
        if self.meter.recording:
            with self.meter.lock:
                origin = self.meter.current_origin()
                self.meter.log_bytes[origin] += len(text.encode())
                self.meter.log_lines[origin] += text.count("\n")
        return len(text)  # the functions' output is counted, not shown

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _stdout_handlers(stdout: Any) -> list[logging.StreamHandler[Any]]:
    """Every logging handler that writes to stdout (`stdout`, the real one or a meter's), on every logger."""
    loggers = [logging.getLogger()] + [
        logger for logger in logging.Logger.manager.loggerDict.values() if isinstance(logger, logging.Logger)
    ]
    return [
        handler
        for logger in loggers
        for handler in logger.handlers
        if type(handler) is logging.StreamHandler
        and (handler.stream in (stdout, sys.__stdout__) or isinstance(handler.stream, CountingStream))
    ]


def _rebind_stdout_handlers(stream: Any, stdout: Any) -> None:
    """Point every logging handler writing to stdout (see `_stdout_handlers`) at `stream`.

    Powertools' Logger binds its handler to `sys.stdout` as it is when the logger is made, i.e. when a
    handler module is first imported: inside the first meter's `installed()`, so every later meter would see
    none of the functions' log lines unless the handlers follow the meter.
    """
    for handler in _stdout_handlers(stdout):
        if handler.stream is not stream:
            handler.setStream(stream)


# Who is making the AWS calls now (the innermost `Meter.origin`), in this context.
_ORIGINS: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("origins", default=())


class Meter:
    """Counts and times AWS calls and Lambda invocations while `recording`; see the module docstring."""

    def __init__(self, *, size_dynamodb: bool = True) -> None:
        self.size_dynamodb = size_dynamodb
        self.calls: list[ApiCall] = []
        self.invocations: list[Invocation] = []
        self.log_bytes: Counter[str] = Counter()
        self.log_lines: Counter[str] = Counter()  # CloudWatch bills 26 bytes more per log event (line)
        self.recording = False
        self.lock = threading.Lock()
        self._sizer: DynamoDbSizer | None = None

    # -- attribution -------------------------------------------------------------------------------
    @contextmanager
    def origin(self, name: str) -> Iterator[None]:
        # A context variable, not a thread's: it follows an invocation onto the threads its context is copied to (the
        # delivery function's batch runs each message group on one of its own: handlers/sqs_batch.py).
        token = _ORIGINS.set((*_ORIGINS.get(), name))
        try:
            yield
        finally:
            _ORIGINS.reset(token)

    def current_origin(self) -> str:
        stack = _ORIGINS.get()
        if stack:
            return stack[-1]
        return UNATTRIBUTED if threading.current_thread() is threading.main_thread() else WORKFLOW

    @contextmanager
    def recorded(self) -> Iterator[None]:
        """Count what happens inside; `reset` first to count only that."""
        self.recording = True
        try:
            yield
        finally:
            self.recording = False

    def reset(self) -> None:
        with self.lock:
            self.calls.clear()
            self.invocations.clear()
            self.log_bytes.clear()
            self.log_lines.clear()

    # -- installation -------------------------------------------------------------------------------
    @contextmanager
    def installed(self, *, capture_stdout: bool = True) -> Iterator[None]:
        """Wrap botocore and the local Lambda runtime (and stdout) for the duration."""
        original_call = botocore.client.BaseClient._make_api_call
        original_load = lambda_runtime.load_handler
        original_stdout = sys.stdout
        meter = self

        def make_api_call(client: Any, operation: str, params: dict[str, Any]) -> Any:
            if not meter.recording:
                return original_call(client, operation, params)
            return meter._metered_call(original_call, client, operation, params)

        def load_handler(function: str) -> Callable[[dict[str, Any], Any], Any]:
            return meter._timed_handler(function, original_load(function))

        botocore.client.BaseClient._make_api_call = make_api_call  # type: ignore[method-assign]
        lambda_runtime.load_handler = load_handler  # type: ignore[assignment]
        if capture_stdout:
            counting = CountingStream(self, original_stdout)
            sys.stdout = counting  # type: ignore[assignment]
            _rebind_stdout_handlers(counting, original_stdout)
        try:
            yield
        finally:
            if capture_stdout:
                _rebind_stdout_handlers(original_stdout, original_stdout)
            sys.stdout = original_stdout
            lambda_runtime.load_handler = original_load  # type: ignore[assignment]
            botocore.client.BaseClient._make_api_call = original_call  # type: ignore[method-assign]

    def _timed_handler(
        self, function: str, handler: Callable[[dict[str, Any], Any], Any]
    ) -> Callable[[dict[str, Any], Any], Any]:
        def timed(event: dict[str, Any], context: Any) -> Any:
            started = time.perf_counter()
            with self.origin(function):
                try:
                    return handler(event, context)
                finally:
                    if self.recording:
                        with self.lock:
                            self.invocations.append(Invocation(function, time.perf_counter() - started))

        return timed

    def _metered_call(self, original: Any, client: Any, operation: str, params: dict[str, Any]) -> Any:
        service = client.meta.service_model.service_name
        origin = self.current_origin()
        sizing = self.size_dynamodb and service == "dynamodb" and origin != BENCH
        before: list[tuple[str, dict[str, Any], Snapshot | None]] = []
        if sizing:
            sizer = self._dynamodb_sizer(client.meta.region_name)
            before = [(t, key, sizer.snapshot(t, key)) for t, key in sizer.writes_of(operation, params)]
        started = time.perf_counter()
        result: Any = None
        failed = False
        try:
            result = original(client, operation, params)
            return result
        except ClientError:
            failed = True
            raise
        finally:
            seconds = time.perf_counter() - started
            call = ApiCall(origin, service, operation, seconds)
            if service == "sqs":
                call.fifo = str(params.get("QueueUrl", "")).endswith(".fifo")
                call.sqs_chunks = _sqs_chunks(operation, params, result)
                call.empty = operation == "ReceiveMessage" and not (result or {}).get("Messages")
            if service == "dynamodb":
                call.table = str(params.get("TableName", ""))
                call.returned = _returned(result or {})
            if sizing:
                sizer = self._dynamodb_sizer(client.meta.region_name)
                # A transaction does two underlying writes (prepare, commit) of every item it names
                # (TRANSACTION_FACTOR): its ConditionChecks and a cancelled transaction's items too. The
                # indexes are maintained after the commit, at the standard rate.
                factor = TRANSACTION_FACTOR if operation == "TransactWriteItems" else 1
                for table_name, key, old in before:
                    if failed:  # a refused conditional write is billed too, for the item as it stands
                        call.write_units += factor * max(1, math.ceil((old.size if old else 0) / WRITE_UNIT_BYTES))
                    else:
                        after = sizer.snapshot(table_name, key)
                        for index, partition, units in sizer.partition_writes(table_name, key, old, after, factor):
                            call.write_units += units
                            call.partitions.append((table_name, index, partition, units))
                for table_name, key in sizer.condition_checks(operation, params):
                    checked = sizer.snapshot(table_name, key)
                    call.write_units += factor * max(1, math.ceil((checked.size if checked else 0) / WRITE_UNIT_BYTES))
                if not before and result is not None:
                    call.read_units = sizer.read_units(operation, params, result)
            with self.lock:
                self.calls.append(call)

    def stored_bytes(self, region: str) -> Counter[str]:
        return self._dynamodb_sizer(region).stored_bytes()

    def _dynamodb_sizer(self, region: str) -> DynamoDbSizer:
        if self._sizer is None:
            self._sizer = DynamoDbSizer(region)
        return self._sizer

    # -- summaries ----------------------------------------------------------------------------------
    def billed_calls(self) -> list[ApiCall]:
        return [c for c in self.calls if c.origin != BENCH]

    def seconds_by(self, key: Callable[[ApiCall], str]) -> Counter[str]:
        totals: Counter[str] = Counter()
        for call in self.calls:
            totals[key(call)] += call.seconds
        return totals

    def counts_by(self, key: Callable[[ApiCall], str]) -> Counter[str]:
        return Counter(key(call) for call in self.calls)
