"""Run every benchmark, one after another, each in its own interpreter; stops at nothing, reports failures.

python bench/run_all.py        (make bench)
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
SCRIPTS = (
    "delivery_overhead.py",
    "isolation.py",
    "local_throughput.py",
    "cost.py",
    "storage.py",
    "cold_start.py",
    "schema_validation.py",
    "bad_night.py",
)
LIMIT_SECONDS = 300  # each benchmark finishes well within this on a 2-core machine
# ... but the bad night, which publishes 2,000 and then 4,000 events through the real handlers on moto, and the
# local stack's throughput, 2,600 events end to end (about 2.5 minutes here; each phase gives up after 15).
LIMITS = {"bad_night.py": 1800, "local_throughput.py": 2100}


def main() -> int:
    failed = []
    for script in SCRIPTS:
        started = time.monotonic()
        print(f"\n===== bench/{script}", flush=True)
        try:
            limit = LIMITS.get(script, LIMIT_SECONDS)
            code = subprocess.run([sys.executable, str(BENCH / script)], timeout=limit, check=False).returncode  # noqa: S603
        except subprocess.TimeoutExpired:
            code = "timed out"
        print(
            f"===== bench/{script}: {'ok' if code == 0 else f'FAILED ({code})'} in {time.monotonic() - started:.0f} s"
        )
        if code != 0:
            failed.append(script)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
