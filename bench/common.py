"""What every benchmark shares: the import path, summary statistics and plain-text tables.

Each benchmark is a script (`python bench/<name>.py`); it puts the repository root on `sys.path` and
imports this module, which adds the client, as pytest's `pythonpath` does (`hookrelay` is installed).
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECONDS_PER_MONTH = 30 * 24 * 3600  # a month, for monthly figures: 30 days


def stack_constant(pattern: str, path: str = "stacks/constructs/api.py") -> str:
    """A constant the CDK stack sets, read from its source (the first group of `pattern`): importing the construct
    would load aws_cdk, seconds of import for one number."""
    import re

    match = re.search(pattern, (ROOT / path).read_text())
    if match is None:
        raise RuntimeError(f"{path} no longer matches {pattern!r}")
    return match.group(1)


for extra in (ROOT / "client",):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile: a value that was actually measured."""
    ordered = sorted(values)
    rank = max(1, round(fraction * len(ordered) + 0.5 - 1e-9))
    return ordered[min(rank, len(ordered)) - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, align: str | None = None) -> str:
    """A Markdown table (so a run's output can be pasted into bench/README.md as it is).

    `align` has one letter per column, `l` or `r`; by default the first column is left-aligned, the rest right.
    """
    align = align or "l" + "r" * (len(headers) - 1)
    cells = [[str(cell) for cell in row] for row in rows]
    widths = [max(len(str(h)), *(len(row[i]) for row in cells)) if cells else len(h) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        padded = [v.ljust(w) if a == "l" else v.rjust(w) for v, w, a in zip(values, widths, align, strict=True)]
        return "| " + " | ".join(padded) + " |"

    rule = (
        "|"
        + "|".join(("-" * (w + 1) + ":") if a == "r" else ("-" * (w + 2)) for w, a in zip(widths, align, strict=True))
        + "|"
    )
    return "\n".join([line(list(headers)), rule, *(line(row) for row in cells)])


def machine() -> str:
    return (
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}"
    )


def heading(title: str) -> None:
    print(f"\n## {title}\n", flush=True)
