"""Cost per million events before and after: an earlier commit's cost benchmark and this checkout's, in one run.

    python bench/cost_before_after.py [--base COMMIT] [--scenario S ...] [--events N]

The base (by default e9cf777, main as issue 28 measured it) is checked out beside this one as a git worktree of
this repository (no network), and each checkout's own `bench/cost.py` runs in its own interpreter, one after the
other, on this machine: each prices its own code, with its own assumptions and targets. Both are given this
checkout's payload (`bench/payloads.py`), so that a change of payload between the two is not counted as a change of
cost. The figures compared are the lines each prints for the side-by-side summary (`issue 12: cost, …`).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import heading, machine, table

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BASE = "e9cf777"  # main as issue 28 measured it
LIMIT_SECONDS = 900
SUMMARY = re.compile(r"^issue 12: cost, (\w+): \$([\d.,]+) per million events")
UNITS = re.compile(r"^issue 12: DynamoDB write units per event, happy path: ([\d.]+)")
# Run in the checkout's interpreter: its own code first on the path, its cost benchmark's payload replaced by this
# checkout's (loaded by file: it imports nothing of either checkout).
RUNNER = """
import importlib.util, sys
checkout, payloads = sys.argv[1], sys.argv[2]
sys.path[:0] = [f"{checkout}/lambdas", checkout, f"{checkout}/client"]
spec = importlib.util.spec_from_file_location("current_payloads", payloads)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
import bench.cost as cost
cost.order = module.order
sys.exit(cost.main(sys.argv[3:]))
"""


def git(*args: str, check: bool = True) -> str:
    """A git command in this repository (its own history only: no remote is asked), its output."""
    executable = shutil.which("git")
    if executable is None:
        raise SystemExit("git is needed to check the base commit out beside this one")
    run = subprocess.run([executable, *args], cwd=ROOT, capture_output=True, text=True, check=check)  # noqa: S603
    return run.stdout.strip()


def figures(checkout: Path, args: list[str]) -> tuple[dict[str, float], float | None]:
    """The checkout's cost per million events by scenario, and its happy path's write units per event."""
    run = subprocess.run(  # noqa: S603 - this interpreter, a checkout of this repository
        [sys.executable, "-c", RUNNER, str(checkout), str(ROOT / "bench" / "payloads.py"), *args],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=LIMIT_SECONDS,
        check=False,
    )
    if run.returncode != 0:
        raise SystemExit(f"{checkout}: the cost benchmark failed\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
    costs: dict[str, float] = {}
    units = None
    for line in run.stdout.splitlines():
        if match := SUMMARY.match(line):
            costs[match.group(1)] = float(match.group(2).replace(",", ""))
        elif match := UNITS.match(line):
            units = float(match.group(1))
    return costs, units


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default=DEFAULT_BASE, help=f"the commit before (default {DEFAULT_BASE})")
    parser.add_argument("--scenario", action="append", help="only these (the cost benchmark's names)")
    parser.add_argument("--events", type=int, help="the cost benchmark's --events")
    args = parser.parse_args(argv)
    passed = [f"--scenario={s}" for s in args.scenario or ()]
    passed += [f"--events={args.events}"] if args.events else []
    try:
        base = git("rev-parse", "--short", f"{args.base}^{{commit}}")
    except subprocess.CalledProcessError:
        raise SystemExit(f"{args.base} is not a commit of this repository (a shallow clone lacks it)") from None
    with tempfile.TemporaryDirectory(prefix="hookrelay-base-") as scratch:
        worktree = Path(scratch) / "base"
        git("worktree", "add", "--detach", str(worktree), base)
        try:
            before, units_before = figures(worktree, passed)
        finally:
            git("worktree", "remove", "--force", str(worktree), check=False)
    after, units_after = figures(ROOT, passed)

    print(f"# Cost before and after ({machine()})")
    heading(f"Per million events, all in: {base} and this checkout, each its own cost benchmark, the same payload")
    rows = [
        [
            name,
            f"${before[name]:.2f}" if name in before else "-",
            f"${after[name]:.2f}",
            f"{after[name] / before[name]:.2f}" if name in before else "-",
        ]
        for name in after
    ]
    if units_after is not None:
        rows.append(
            [
                "DynamoDB write units per event, happy path",
                f"{units_before:g}" if units_before else "-",
                f"{units_after:g}",
                "-",
            ]
        )
    print(table(["scenario", f"before ({base})", "after (this checkout)", "after / before"], rows, align="lrrr"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
