"""The local stack's processes (moto's server, the functions' workers) never outlive it, even when it is killed.

SIGTERM and Ctrl-C are covered in test_local_stack.py; here the parent gets SIGKILL, which it cannot handle,
and every process it started must still go away on its own (each watches its parent: `local.processes`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.harness import LocalStack, eventually

pytestmark = pytest.mark.e2e

GONE_WITHIN_SECONDS = 15.0


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process on the machine."""
    listing = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,stat="], capture_output=True, text=True, check=True)  # noqa: S607
    table = {}
    for line in listing.stdout.splitlines():
        pid, ppid, state = line.split()[:3]
        table[int(pid)] = (int(ppid), state)
    return table


def descendants(root: int) -> set[int]:
    table = process_table()
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, (ppid, _) in table.items() if ppid in frontier} - found
        found |= frontier
    return found


def running(pids: set[int]) -> set[int]:
    """Those still running: a zombie (exited, not yet reaped by whoever adopted it) has stopped."""
    table = process_table()
    return {pid for pid in pids if pid in table and not table[pid][1].startswith("Z")}


def test_killing_the_local_stack_leaves_none_of_its_processes_behind(tmp_path: Path) -> None:
    stack = LocalStack(tmp_path)
    assert stack.call("GET", "/v1/endpoints", stack.tenant_key).status_code == 200
    children = descendants(stack.process.popen.pid)
    # moto's server, the workers' fork server and at least one worker of each function.
    assert len(children) >= 8, f"expected the local stack's processes, found {sorted(children)}"

    stack.process.kill()  # SIGKILL: no handler runs, nothing is stopped by the parent

    eventually(
        lambda: running(children),
        f"every process the local stack started exits after it is killed: {sorted(children)}",
        timeout=GONE_WITHIN_SECONDS,
        predicate=lambda left: not left,
    )
