"""The local stack's processes keep what they load out of the collector's full walks (local/processes.py), and moto's
servers also what survives each full collection; garbage made since is still collected.

Each case runs in a fresh interpreter: freezing is for the whole process, and this one is pytest's."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(code: str) -> str:
    done = subprocess.run(  # noqa: S603 (this interpreter, running the code below)
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_what_is_loaded_is_frozen_and_later_garbage_is_still_collected() -> None:
    out = run(
        """
        import gc
        from local.processes import keep_what_is_loaded
        keep_what_is_loaded()
        frozen = gc.get_freeze_count()
        cycles = [[] for _ in range(1000)]
        for cycle in cycles:
            cycle.append(cycle)
        del cycles, cycle
        print(frozen > 1000, gc.collect() >= 1000)
        """
    )
    assert out == "True True"


def test_moto_s_servers_freeze_what_survives_each_full_collection_only() -> None:
    out = run(
        """
        import gc
        from local.processes import keep_what_survives
        keep_what_survives()
        before = gc.get_freeze_count()
        kept = [[] for _ in range(5000)]  # state the server keeps, as moto keeps its items
        gc.collect(1)  # a younger collection freezes nothing
        after_young = gc.get_freeze_count()
        gc.collect()
        after_full = gc.get_freeze_count()
        print(after_young == before, after_full - before >= 5000)
        """
    )
    assert out == "True True"
