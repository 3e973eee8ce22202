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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from hookrelay.domain.errors import InvalidRequest

MAX_LENGTH = 128  # of an event type and of a filter
# Per endpoint, the most any deployment may allow (the schema's cap); a deployment allows fewer
# (`domain/limits.py`: `max_filters_per_endpoint`, 20 by default).
MAX_FILTERS = 100
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


def validate_filters(filters: list[str], max_filters: int = MAX_FILTERS) -> list[str]:
    """The filters, if they are within the caps (at most `max_filters`, the deployment's limit); else InvalidRequest
    (a 422 problem) naming the first fault."""
    if not 1 <= len(filters) <= max_filters:
        raise InvalidRequest(
            f"give 1 to {max_filters} event type filters, not {len(filters)}"
            f" (the limit max_filters_per_endpoint is {max_filters})"
        )
    for pattern in filters:
        problem = filter_problem(pattern)
        if problem:
            raise InvalidRequest(problem)
    return filters


def match_steps(pattern: str, event_type: str) -> tuple[bool, int]:
    """Whether `event_type` matches the filter `pattern`, and the steps it took: one per position at which a
    literal part was compared (each comparison at most `MAX_LENGTH` characters), and one per part. The steps never
    exceed `len(event_type) + 2 * pattern.count('*') + 2`, whatever the pattern."""
    return _walk(glob_parts(pattern), event_type)


def glob_parts(pattern: str) -> tuple[str, ...]:
    """The filter cut at its stars: one part for an exact type, `len(parts) - 1` stars otherwise."""
    return tuple(pattern.split(WILDCARD))


def parts_match(parts: tuple[str, ...], event_type: str) -> bool:
    """Whether `event_type` matches the filter cut into `parts` (`glob_parts`)."""
    return _walk(parts, event_type)[0]


def _walk(parts: tuple[str, ...], event_type: str) -> tuple[bool, int]:
    """The greedy leftmost match, and its steps (`match_steps`): each middle part found with `str.find` from where
    the one before ended (compared in C, never retried), its steps the positions that find passed over."""
    if len(parts) == 1:
        return parts[0] == event_type, 1
    first, last = parts[0], parts[-1]
    steps = 2
    if len(first) + len(last) > len(event_type) or not (event_type.startswith(first) and event_type.endswith(last)):
        return False, steps
    position, end = len(first), len(event_type) - len(last)
    for part in parts[1:-1]:
        steps += 1
        if not part:  # `**`: nothing to find
            continue
        found = event_type.find(part, position, end)
        if found < 0:
            return False, steps + max(0, end - len(part) + 1 - position)
        steps += found - position + 1
        position = found + len(part)
    return True, steps


def filter_matches(pattern: str, event_type: str) -> bool:
    return parts_match(glob_parts(pattern), event_type)


def type_matches(event_type: str, filters: Iterable[str]) -> bool:
    return any(filter_matches(pattern, event_type) for pattern in filters)


T = TypeVar("T")


@dataclass
class FilterIndex(Generic[T]):
    """Who of many subscribers (endpoints) an event type reaches, each subscriber with its own filters.

    Built once per request from the tenant's endpoints: exact filters go in a dict (type -> subscribers), `*` in a
    list of subscribers to everything, and the wildcard patterns are kept once each however many subscribers share
    them (pattern -> subscribers). `matching(event_type)` then costs one dict lookup for the exact filters and one
    `parts_match` per distinct wildcard pattern, never one per subscriber and filter; and callers ask once per
    distinct event type of a request (ingest remembers the answer for the rest of the batch: `matching` memoizes).

    The bound, for the worst tenant the limits allow (`domain/limits.py`: E endpoints, F filters each, every one a
    distinct wildcard pattern of MAX_LENGTH characters and MAX_STARS stars, none matching): building is
    O(E * F * MAX_LENGTH); each distinct event type then costs at most E * F pattern evaluations, each at most
    MAX_STARS + 2 `str.find`/`startswith`/`endswith` calls over at most MAX_LENGTH characters, i.e.
    O(E * F * MAX_STARS * MAX_LENGTH) character comparisons done in C, with E * F * (MAX_STARS + 2) Python-level
    steps. A request costs that once per distinct type it carries (a batch of 100 events of 3 types: 3 matchings).
    With the default limits (E = 1,000, F = 20) that is 20,000 pattern evaluations per distinct type; bench/
    filter_limits.py measures it against a tenant with no endpoints. Exact filters cost O(1) per type whatever
    their number."""

    subscribers: Sequence[tuple[T, Sequence[str]]]
    _exact: dict[str, list[int]] = field(default_factory=dict, init=False, repr=False)
    _everything: list[int] = field(default_factory=list, init=False, repr=False)
    _wildcards: dict[tuple[str, ...], list[int]] = field(default_factory=dict, init=False, repr=False)
    _answers: dict[str, list[T]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        for position, (_, filters) in enumerate(self.subscribers):
            for pattern in dict.fromkeys(filters):  # a subscriber's repeated filter counts once
                if pattern == WILDCARD:
                    self._everything.append(position)
                elif WILDCARD in pattern:
                    self._wildcards.setdefault(glob_parts(pattern), []).append(position)
                else:
                    self._exact.setdefault(pattern, []).append(position)

    def matching(self, event_type: str) -> list[T]:
        """The subscribers `event_type` reaches, in the order they were given; computed once per distinct type."""
        answer = self._answers.get(event_type)
        if answer is None:
            answer = self._answers[event_type] = self._match(event_type)
        return answer

    def _match(self, event_type: str) -> list[T]:
        reached = set(self._everything)
        reached.update(self._exact.get(event_type, ()))
        for parts, positions in self._wildcards.items():
            if not reached.issuperset(positions) and parts_match(parts, event_type):
                reached.update(positions)
        return [self.subscribers[position][0] for position in sorted(reached)]
