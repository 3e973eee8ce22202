"""Human-readable output: aligned tables, key-value blocks, and a text progress bar."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TextIO


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    if isinstance(value, list | tuple):
        return ",".join(cell(item) for item in value)
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[cell(value) for value in row] for row in rows]
    widths = [max([len(header), *(len(row[i]) for row in cells)]) for i, header in enumerate(headers)]
    lines = [headers, *cells]
    return "\n".join(
        "  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def fields(pairs: Sequence[tuple[str, Any]]) -> str:
    width = max(len(name) for name, _ in pairs)
    return "\n".join(f"{name.ljust(width)}  {cell(value)}" for name, value in pairs)


class ProgressBar:
    """`[########........] 120/400 replayed`: redrawn in place on a terminal, one line per change otherwise."""

    def __init__(self, stream: TextIO, width: int = 30) -> None:
        self.stream, self.width = stream, width
        self.in_place = stream.isatty()
        self.last = ""

    def update(self, done: int, total: int, label: str = "") -> None:
        filled = self.width if total <= 0 else min(self.width, self.width * done // total)
        line = f"[{'#' * filled}{'.' * (self.width - filled)}] {done}/{total} {label}".rstrip()
        if line == self.last:
            return
        self.last = line
        self.stream.write(f"\r{line}\033[K" if self.in_place else line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.in_place and self.last:
            self.stream.write("\n")
            self.stream.flush()
