"""The domain's records (dataclasses) as plain data and back: DynamoDB items and the queues' JSON.

Conversion follows each field's type, read once per record class:
- a time is RFC 3339 UTC at fixed millisecond width, so stored strings sort as the times do (the indexes sort on
  them) and compare with the values conditions are written with;
- an enum is its value, a nested record a map, a list element by element, a dict entry by entry;
- a frozenset of strings is a DynamoDB string set (a sorted list in JSON), left out when empty, as DynamoDB has no
  empty set;
- an absent optional field is left out (DynamoDB has no null worth storing), and attributes a record does not
  know (the tables' own keys, an index's key) are ignored when reading.
Numbers come back from DynamoDB as `Decimal`: a field's type says whether it is an int or a float.
(`dataclasses.asdict` would write a record too, but deep-copies every value: six times as slow on a delivery.)

Data that does not fit its record raises `UnreadableRecord`: the records read here were written by this code, so
that is a version skew or a corrupt item, which the caller decides about (a queue message's event is then read
from the table instead).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from enum import Enum
from typing import Any, TypeVar

from hookrelay.domain.clock import from_rfc3339, to_rfc3339

R = TypeVar("R")

Converter = Callable[[Any], Any]


class UnreadableRecord(ValueError):
    """Data that does not make the record it was read as."""


def to_data(record: Any, *, decimals: bool = False) -> dict[str, Any]:
    """The record as JSON-ready data, its None fields left out; `decimals`: floats as `Decimal` (DynamoDB's)."""
    data: dict[str, Any] = {}
    for name in field_names(type(record)):
        value = getattr(record, name)
        if value is not None and not (isinstance(value, frozenset) and not value):  # DynamoDB has no empty set
            data[name] = _plain(value, decimals)
    return data


def from_data(record_type: type[R], data: Any) -> R:
    """The record that `data` (from `to_data`, or a DynamoDB item) describes; unknown attributes are ignored."""
    if not isinstance(data, dict):
        raise UnreadableRecord(f"{record_type.__name__}: expected a map, got {type(data).__name__}")
    try:
        return record_type(**{name: read(data[name]) for name, read in _readers(record_type).items() if name in data})
    except (TypeError, ValueError, KeyError, ArithmeticError) as error:  # a missing field is a TypeError here
        raise UnreadableRecord(f"{record_type.__name__}: {error}") from error


def _plain(value: Any, decimals: bool) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return to_rfc3339(value)
    if isinstance(value, list):
        return [_plain(item, decimals) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item, decimals) for key, item in value.items()}
    if isinstance(value, float):
        return Decimal(repr(value)) if decimals else value
    if isinstance(value, frozenset):
        return set(value) if decimals else sorted(value)
    if dataclasses.is_dataclass(value):
        return to_data(value, decimals=decimals)
    return value


# Each record class's fields and their readers, worked out on its first conversion (type hints are slow to read).
_FIELDS: dict[type, tuple[str, ...]] = {}
_READERS: dict[type, dict[str, Converter]] = {}


def field_names(record_type: type) -> tuple[str, ...]:
    """The record's fields, in order."""
    names = _FIELDS.get(record_type)
    if names is None:
        names = _FIELDS[record_type] = tuple(f.name for f in dataclasses.fields(record_type))
    return names


def _readers(record_type: type) -> dict[str, Converter]:
    readers = _READERS.get(record_type)
    if readers is None:
        hints = typing.get_type_hints(record_type)
        readers = _READERS[record_type] = {name: _reader(hints[name]) for name in field_names(record_type)}
    return readers


def _reader(hint: Any) -> Converter:
    """How a stored value becomes a value of type `hint`."""
    if typing.get_origin(hint) in (types.UnionType, typing.Union):  # `X | None`: the only unions records use
        (inner,) = [arm for arm in typing.get_args(hint) if arm is not type(None)]
        read = _reader(inner)
        return lambda value: None if value is None else read(value)
    if typing.get_origin(hint) is dict:  # a map of strings (DynamoDB's M, JSON's object)
        key_type, value_type = typing.get_args(hint)
        read_key, read_value = _reader(key_type), _reader(value_type)
        return lambda value: {read_key(k): read_value(v) for k, v in _map(value).items()}
    if typing.get_origin(hint) is list:
        (element,) = typing.get_args(hint)
        read_element = _reader(element)
        return lambda value: [read_element(item) for item in _list(value)]
    if typing.get_origin(hint) is frozenset:  # a DynamoDB set, or its JSON list
        (member,) = typing.get_args(hint)
        read_member = _reader(member)
        return lambda value: frozenset(read_member(item) for item in _collection(value))
    if isinstance(hint, typing.NewType):
        return _reader(hint.__supertype__)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        record_type: type = hint
        return lambda value: from_data(record_type, value)
    return _SCALARS.get(hint) or _enum_reader(hint)


def _enum_reader(hint: Any) -> Converter:
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint
    raise TypeError(f"a record field of type {hint!r} has no reader")  # a new field type: add its reader here


def _map(value: Any) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"expected a map, got {type(value).__name__}")
    return value


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    return value


def _collection(value: Any) -> set[Any] | list[Any]:
    if not isinstance(value, set | list):
        raise TypeError(f"expected a set, got {type(value).__name__}")
    return value


def _int(value: Any) -> int:
    if isinstance(value, bool) or int(value) != value:
        raise ValueError(f"expected an integer, got {value!r}")
    return int(value)


def _typed(kind: type) -> Converter:
    def read(value: Any) -> Any:
        if not isinstance(value, kind):
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
        return value

    return read


_string = _typed(str)


def _datetime(value: Any) -> datetime:
    return from_rfc3339(_string(value))


_SCALARS: dict[Any, Converter] = {
    str: _string,
    bool: _typed(bool),
    int: _int,
    float: float,
    datetime: _datetime,
}
