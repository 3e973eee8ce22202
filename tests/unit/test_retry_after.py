"""Retry-After: delta-seconds or an HTTP date; anything else is ignored rather than guessed at."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hookrelay.domain.schedule import parse_retry_after

NOW = datetime(2025, 3, 7, 18, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(("header", "seconds"), [("120", 120.0), (" 0 ", 0.0), ("86400", 86400.0)])
def test_delta_seconds(header: str, seconds: float) -> None:
    assert parse_retry_after(header, NOW) == seconds


def test_http_date_is_seconds_from_now() -> None:
    assert parse_retry_after("Fri, 07 Mar 2025 18:02:30 GMT", NOW) == 150.0


def test_http_date_in_the_past_means_no_extra_wait() -> None:
    assert parse_retry_after("Fri, 07 Mar 2025 17:00:00 GMT", NOW) == 0.0


@pytest.mark.parametrize("header", [None, "", "soon", "-5", "1.5", "١٢", "Fri, 99 Foo 2025"])
def test_invalid_values_are_ignored(header: str | None) -> None:
    assert parse_retry_after(header, NOW) is None
