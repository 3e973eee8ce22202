"""Event-type filters: exact types, `*` for everything, and `*` wildcards within a type (`order.*`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

EVENT_TYPE_PATTERN = re.compile(r"^[A-Za-z0-9_.:\-]{1,128}$")
FILTER_PATTERN = re.compile(r"^[A-Za-z0-9_.:\-*]{1,128}$")


@lru_cache(maxsize=1024)
def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile("^" + ".*".join(re.escape(part) for part in pattern.split("*")) + "$")


def type_matches(event_type: str, filters: Iterable[str]) -> bool:
    return any(_compile(pattern).match(event_type) for pattern in filters)
