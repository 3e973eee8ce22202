"""Run every benchmark, one after another, each in its own interpreter; stops at nothing, reports failures.

python bench/run_all.py                 (make bench)
python bench/run_all.py cost.py ...     (only these)

Each benchmark that finishes is recorded: its output, as printed, goes to bench/results/<script>.txt, with the
date and the machine on its first line. `python -m bench.readme` (make bench-readme) writes bench/README.md from
those records, so the README shows the figures of the latest run and nothing older.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
SCRIPTS = (
    "delivery_overhead.py",
    "isolation.py",
    "local_throughput.py",
    "cost.py",
    "cost_before_after.py",
    "e2e_before_after.py",
    "storage.py",
    "cold_start.py",
    "schema_validation.py",
    "filter_limits.py",
    "content_filters.py",
    "parked_count.py",
    "lot_shards.py",
    "redrive_count.py",
    "bad_night.py",
)
LIMIT_SECONDS = 900  # each benchmark finishes well within this on a 2-core machine, even one shared and loaded
# ... but the bad night, which publishes 2,000 and then 4,000 events through the real handlers on moto, and the
# local stack's throughput, 2,600 events end to end (about 2.5 minutes here; each phase gives up after 15), and the
# isolation benchmark's sixteen rounds of two phases on the local stack (about 21 minutes here), and the e2e tier run
# four times, twice on an earlier commit (about 13 minutes here).
LIMITS = {"bad_night.py": 1800, "local_throughput.py": 2100, "isolation.py": 2700, "e2e_before_after.py": 2700}


SUMMARY = "issue 12:"  # lines the cost, cold-start and delivery benchmarks print for the side-by-side summary


def record(script: str, lines: list[str]) -> None:
    """Keep a finished benchmark's output for bench/README.md (a failed or timed-out one keeps the last record)."""
    RESULTS.mkdir(exist_ok=True)
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    header = f"recorded {datetime.datetime.now(datetime.UTC):%Y-%m-%d} on {machine}\n"
    (RESULTS / f"{Path(script).stem}.txt").write_text(header + "".join(figures(lines)))


def figures(lines: list[str]) -> list[str]:
    """What the benchmark printed, less the log records of the handlers it runs in process (Powertools' JSON lines
    and metrics records, thousands in the bad night): they are the functions' output, not the figures."""
    return [line for line in lines if not _log_record(line)]


def _log_record(line: str) -> bool:
    if not line.startswith("{"):
        return False
    try:
        document = json.loads(line)
    except ValueError:
        return False
    return isinstance(document, dict) and ("level" in document or "_aws" in document)


def run(script: str, limit: float, summary: list[str]) -> int:
    """Run one benchmark, its output shown as it comes and recorded when it succeeds; its summary lines kept."""
    lines: list[str] = []
    with subprocess.Popen(  # noqa: S603 - this interpreter, our own script
        [sys.executable, str(BENCH / script)], stdout=subprocess.PIPE, text=True, bufsize=1
    ) as process:
        assert process.stdout is not None
        started = time.monotonic()
        for line in process.stdout:
            print(line, end="", flush=True)
            lines.append(line)
            if line.startswith(SUMMARY):
                summary.append(line.rstrip())
            if time.monotonic() - started > limit:
                process.kill()
                raise subprocess.TimeoutExpired(script, limit)
        code = process.wait()
    if code == 0:
        record(script, lines)
    return code


def main() -> int:
    failed = []
    summary: list[str] = []
    for script in sys.argv[1:] or SCRIPTS:
        started = time.monotonic()
        print(f"\n===== bench/{script}", flush=True)
        try:
            limit = LIMITS.get(script, LIMIT_SECONDS)
            code = run(script, limit, summary)
        except subprocess.TimeoutExpired:
            code = "timed out"
        print(
            f"===== bench/{script}: {'ok' if code == 0 else f'FAILED ({code})'} in {time.monotonic() - started:.0f} s"
        )
        if code != 0:
            failed.append(script)
    print("\n===== issue 12, side by side (from the runs above)")
    print("\n".join(summary) or "(none printed)")
    write_readme()
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


def write_readme() -> None:
    """bench/README.md from the records, the new ones included (bench/readme.py)."""
    sys.path.insert(0, str(BENCH.parent))
    from bench import readme

    readme.README.write_text(readme.generate())
    print(f"\n{readme.README.relative_to(BENCH.parent)} rewritten from bench/results/")


if __name__ == "__main__":
    sys.exit(main())
