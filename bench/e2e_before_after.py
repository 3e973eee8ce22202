"""The e2e tier before and after: the same tests on an earlier commit and on this checkout, alternated, timed.

    python bench/e2e_before_after.py [--base COMMIT] [--rounds N]

Issue 28 asks that the e2e suite be no slower. The base (by default e9cf777, main as issue 28 measured it) is
checked out beside this one as a git worktree of this repository (no network). The tests compared are the ones the
base has (collected there): a test added since is no slowdown of the suite. Each round runs them on the base, then
on this checkout, each in its own pytest process with this interpreter, so that the machine's noise (it is shared)
falls on both sides alike; the figure is after / before, per round and over all rounds.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import heading, machine, table
from bench.cost_before_after import DEFAULT_BASE, ROOT, git

LIMIT_SECONDS = 1200  # one run of the tier: about 3 minutes here
TOOK = re.compile(r" in ([\d.]+)s")
SETTLED = re.compile(r"(\d+) (passed|skipped)")


def pytest(checkout: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """This interpreter's pytest in the checkout, its own code first on the path (the environment's editable
    install names this checkout's), for the local stack's processes the tests start too."""
    path = os.pathsep.join(str(checkout / part) for part in ("lambdas", ".", "client"))
    return subprocess.run(  # noqa: S603 - this interpreter's pytest, in a checkout of this repository
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=checkout,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=LIMIT_SECONDS,
        check=False,
    )


def collected(checkout: Path) -> list[str]:
    """The e2e tests the checkout has, by id."""
    run = pytest(checkout, "tests/e2e", "--collect-only", "-q")
    return [line for line in run.stdout.splitlines() if "::" in line]


def timed(checkout: Path, tests: list[str]) -> float:
    """The seconds pytest reports for the tests, each passed or skipped (the portal's browser tests skip where no
    Chromium is installed: on both sides alike)."""
    run = pytest(checkout, "-q", *tests)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    took = TOOK.search(summary)
    settled = sum(int(count) for count, _ in SETTLED.findall(summary))
    if run.returncode != 0 or took is None or settled != len(tests):
        raise SystemExit(f"{checkout}: the e2e tests did not all pass\n{run.stdout[-3000:]}\n{run.stderr[-2000:]}")
    return float(took.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default=DEFAULT_BASE, help=f"the commit before (default {DEFAULT_BASE})")
    parser.add_argument("--rounds", type=int, default=2, help="base then this checkout, this many times")
    args = parser.parse_args(argv)
    base = git("rev-parse", "--short", f"{args.base}^{{commit}}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="hookrelay-base-") as scratch:
        worktree = Path(scratch) / "base"
        git("worktree", "add", "--detach", str(worktree), base)
        try:
            tests = collected(worktree)
            missing = set(tests) - set(collected(ROOT))
            if missing:
                raise SystemExit(f"this checkout lacks {len(missing)} of the base's e2e tests: {sorted(missing)[:5]}")
            for number in range(1, args.rounds + 1):
                before, after = timed(worktree, tests), timed(ROOT, tests)
                rows.append((number, before, after))
        finally:
            git("worktree", "remove", "--force", str(worktree), check=False)
    total_before, total_after = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"# The e2e tier before and after ({machine()})")
    heading(f"The {len(tests)} e2e tests {base} has, on {base} and on this checkout, alternated")
    lines = [[f"{n}", f"{b:.1f}", f"{a:.1f}", f"{a / b:.2f}"] for n, b, a in rows]
    lines.append(["all", f"{total_before:.1f}", f"{total_after:.1f}", f"{total_after / total_before:.2f}"])
    print(table(["round", f"before ({base}), s", "after (this checkout), s", "after / before"], lines, align="rrrr"))
    print(f"\nissue 28: e2e tier, the base's {len(tests)} tests, after / before: {total_after / total_before:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
