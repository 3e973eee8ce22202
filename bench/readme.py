"""Write bench/README.md from its introduction and the latest recorded run of each benchmark.

    python -m bench.readme            (make bench-readme; make bench does it after recording)
    python -m bench.readme --check    (exit 1 if bench/README.md is not what the records make)

`bench/run_all.py` records each benchmark that finishes: its output, as printed, in bench/results/<script>.txt,
the first line saying when and on what machine. The README shows those outputs verbatim, in the order `make bench`
runs them, so it holds today's figures and nothing older (git keeps the history).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
README = BENCH / "README.md"
INTRO = BENCH / "readme_intro.md"
RESULTS = BENCH / "results"


def scripts() -> tuple[str, ...]:
    """`make bench`'s benchmarks, in its order (run_all.SCRIPTS, read from its source: one list, no import)."""
    tree = ast.parse((BENCH / "run_all.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "SCRIPTS" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise RuntimeError("bench/run_all.py defines no SCRIPTS")


def summary(script: str) -> str:
    """The first line of the benchmark's docstring: what it measures."""
    docstring = ast.get_docstring(ast.parse((BENCH / script).read_text())) or ""
    return docstring.splitlines()[0] if docstring else ""


def section(script: str, results: Path) -> str:
    record = results / f"{Path(script).stem}.txt"
    head = f"### `{script}`\n\n{summary(script)}\n\n"
    if not record.exists():
        return head + f"Not recorded yet: `make bench` (or `python bench/run_all.py {script}`) records it.\n"
    recorded, _, output = record.read_text().partition("\n")
    return head + f"{recorded[:1].upper()}{recorded[1:]}, `python bench/{script}`:\n\n```text\n{output.strip()}\n```\n"


def generate(results: Path = RESULTS) -> str:
    parts = [INTRO.read_text().rstrip("\n"), "## The latest figures"]
    parts += [section(script, results).rstrip("\n") for script in scripts()]
    return "\n\n".join(parts) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if bench/README.md is out of date")
    args = parser.parse_args()
    text = generate()
    if args.check:
        if README.read_text() != text:
            print("bench/README.md is out of date: python -m bench.readme")
            return 1
        return 0
    README.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
