"""Event-type filters: exact types, `*` for everything, and `*` wildcards within a type (`order.*`).

A `*` matches any run of characters, dots included and possibly empty: `order.*` matches `order.created` and
`order.item.created`, `*.created` matches both too. (It always has: this is the meaning filters were stored with.)

Matching is a glob, not a regular expression: the filter is cut at its stars into literal parts; the first must
start the type, the last must end it, and each part between is found at the leftmost position after the one
before. Leftmost is always right for a glob with only `*` (a later occurrence leaves less room for what follows),
so nothing is ever retried: the positions tried across all parts are at most the type's length plus the number
of parts, each one comparison of at most `MAX_LENGTH` characters. A tenant's filters can no longer make ingest
backtrack (a backtracking regex took 32 s on one event with 22 stars).

The caps below bound a tenant's filters once more, and are the API's published limits (`openapi/openapi.yaml`
states the same numbers and patterns; tests/unit/test_openapi.py holds them to these).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from hookrelay.domain.errors import InvalidRequest

MAX_LENGTH = 128  # of an event type and of a filter
MAX_FILTERS = 100  # per endpoint
MAX_STARS = 8  # per filter

_NAME = r"A-Za-z0-9_.:\-"
# An event type: 1 to MAX_LENGTH of these characters.
EVENT_TYPE_PATTERN = re.compile(rf"^[{_NAME}]{{1,{MAX_LENGTH}}}$")
# A filter: the same characters and at most MAX_STARS stars (its length, 1 to MAX_LENGTH, is checked apart, so
# that the OpenAPI document can say it with minLength/maxLength). Stars and name characters never overlap, so
# this pattern cannot backtrack either.
FILTER_PATTERN = re.compile(rf"^[{_NAME}]*(?:\*[{_NAME}]*){{0,{MAX_STARS}}}$")

WILDCARD = "*"


def filter_problem(pattern: str) -> str | None:
    """Why `pattern` is not a valid filter, or None when it is."""
    if not 1 <= len(pattern) <= MAX_LENGTH:
        return f"an event type filter is 1 to {MAX_LENGTH} characters long, not {len(pattern)}"
    if pattern.count(WILDCARD) > MAX_STARS:
        return f"an event type filter has at most {MAX_STARS} '{WILDCARD}', not {pattern.count(WILDCARD)}"
    if not FILTER_PATTERN.fullmatch(pattern):
        return f"invalid event type filter {pattern!r}: letters, digits, '_', '.', ':', '-' and '{WILDCARD}' only"
    return None


def validate_filters(filters: list[str]) -> list[str]:
    """The filters, if they are within the caps; else InvalidRequest (a 422 problem) naming the first fault."""
    if not 1 <= len(filters) <= MAX_FILTERS:
        raise InvalidRequest(f"give 1 to {MAX_FILTERS} event type filters, not {len(filters)}")
    for pattern in filters:
        problem = filter_problem(pattern)
        if problem:
            raise InvalidRequest(problem)
    return filters


def match_steps(pattern: str, event_type: str) -> tuple[bool, int]:
    """Whether `event_type` matches the filter `pattern`, and the steps it took: one per position at which a
    literal part was compared (each comparison at most `MAX_LENGTH` characters), and one per part. The steps never
    exceed `len(event_type) + 2 * pattern.count('*') + 2`, whatever the pattern."""
    parts = pattern.split(WILDCARD)
    if len(parts) == 1:
        return pattern == event_type, 1
    first, *middle, last = parts
    steps = 2
    if len(first) + len(last) > len(event_type) or not (event_type.startswith(first) and event_type.endswith(last)):
        return False, steps
    position, end = len(first), len(event_type) - len(last)
    for part in middle:
        steps += 1
        if not part:  # `**`: nothing to find
            continue
        found = -1
        for candidate in range(position, end - len(part) + 1):
            steps += 1
            if event_type.startswith(part, candidate):
                found = candidate
                break
        if found < 0:
            return False, steps
        position = found + len(part)
    return True, steps


def filter_matches(pattern: str, event_type: str) -> bool:
    return match_steps(pattern, event_type)[0]


def type_matches(event_type: str, filters: Iterable[str]) -> bool:
    return any(filter_matches(pattern, event_type) for pattern in filters)
