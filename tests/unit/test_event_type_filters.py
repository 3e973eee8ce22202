"""Event-type filters: the glob matcher keeps the meaning filters always had, in steps linear in the type's length,
and a tenant's filters stay within the published caps."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookrelay.domain.errors import InvalidRequest
from hookrelay.domain.matching import (
    MAX_FILTERS,
    MAX_LENGTH,
    MAX_STARS,
    filter_problem,
    match_steps,
    type_matches,
    validate_filters,
)

# A small alphabet makes near-misses (and so backtracking, for a regex) likely; the dot is one of its letters.
LETTERS = "ab."
event_types = st.text(alphabet=LETTERS, min_size=1, max_size=MAX_LENGTH)
patterns = st.text(alphabet=LETTERS + "*", min_size=1, max_size=MAX_LENGTH)


def regex_meaning(pattern: str, event_type: str) -> bool:
    """What a filter meant when filters were compiled to regular expressions (`*` became `.*`): the reference."""
    return re.fullmatch(".*".join(re.escape(part) for part in pattern.split("*")), event_type) is not None


@pytest.mark.parametrize(
    ("event_type", "filters", "expected"),
    [
        ("order.item.created", ["order.*"], True),  # a star spans dots, as it always has
        ("order.item.created", ["*.created"], True),
        ("order.item.created", ["order.*.created"], True),
        ("order.created", ["order.*.created"], False),
        ("order.", ["order.*"], True),  # a star may match nothing
        ("order", ["order*"], True),
        ("aab", ["a*ab"], True),  # the leftmost "a" of a middle part must not hide a later fit
        ("abcabd", ["*ab*d"], True),
        ("abcabd", ["*abd*c"], False),
    ],
)
def test_a_star_matches_any_run_of_characters_dots_included(
    event_type: str, filters: list[str], expected: bool
) -> None:
    assert type_matches(event_type, filters) is expected
    assert all(regex_meaning(p, event_type) is expected for p in filters)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(pattern=patterns, event_type=event_types)
def test_the_glob_means_what_the_regex_meant_in_steps_linear_in_the_type(pattern: str, event_type: str) -> None:
    stars = min(pattern.count("*"), MAX_STARS)
    pattern = pattern if pattern.count("*") <= MAX_STARS else pattern.replace("*", "", pattern.count("*") - stars)
    matched, steps = match_steps(pattern, event_type)
    assert matched is regex_meaning(pattern, event_type)
    assert steps <= len(event_type) + 2 * stars + 2


def test_the_worst_case_of_the_old_regex_is_a_few_hundred_steps() -> None:
    """22 stars took a backtracking regex 32 s on one event; the glob takes one pass over the type."""
    pattern = "*a" * 22 + "*b"
    event_type = "a" * (MAX_LENGTH - 1) + "c"
    matched, steps = match_steps(pattern, event_type)
    assert not matched
    assert steps <= len(event_type) + 2 * pattern.count("*") + 2


def test_filters_beyond_the_caps_are_refused_with_the_reason() -> None:
    assert filter_problem("order.*") is None
    assert filter_problem("*" * MAX_STARS) is None
    assert "at most 8" in (filter_problem("a*" * (MAX_STARS + 1)) or "")
    assert filter_problem("a" * (MAX_LENGTH + 1)) is not None
    assert filter_problem("") is not None
    assert filter_problem("order created") is not None
    assert filter_problem("order.*\n") is not None
    with pytest.raises(InvalidRequest, match="1 to 100"):
        validate_filters(["a"] * (MAX_FILTERS + 1))
    with pytest.raises(InvalidRequest, match=r"at most 8 '\*'"):
        validate_filters(["order.*", "*." * (MAX_STARS + 1)])
    assert validate_filters(["*"]) == ["*"]
