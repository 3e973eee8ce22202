from __future__ import annotations

from typing import Any

from tests.support.crash import matrix_lines


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The crash-point matrix (tests/integration/test_crash_points.py), when it ran."""
    lines = matrix_lines()
    if lines:
        terminalreporter.section("crash points")
        for line in lines:
            terminalreporter.write_line(line)
