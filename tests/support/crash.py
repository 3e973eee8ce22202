"""Crash injection: the process dies at one AWS call, as a Lambda invocation dies (a timeout, an out-of-memory).

`CrashInjector` sits on boto3's default session (every adapter's client comes from it) and sees each AWS call a
function makes inside an invocation (`local.lambda_runtime.RUNNING`). Armed at call number n of the named
functions, it raises `Crash` there, before the call reaches AWS. `Crash` is a BaseException, not an Exception: no
handler, no Powertools utility and no `except Exception` in the code under test can catch it and tidy up (Powertools
idempotency deletes its in-progress record on an Exception; a dead process deletes nothing).

The matrix of crash points and their outcomes is collected here and printed at the end of the run
(tests/integration/conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3

from hookrelay import wiring
from local.lambda_runtime import RUNNING


class Crash(BaseException):
    """The process died here."""


@dataclass
class CrashInjector:
    functions: frozenset[str] = frozenset()
    crash_at: int | None = None  # the call number (from 0) to die at, among the functions' calls
    calls: list[str] = field(default_factory=list)  # "function: Service.Operation" of each call seen
    crashed: str | None = None

    def __call__(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        function = RUNNING.get()
        if function is None or function not in self.functions:
            return
        label = f"{function}: {model.service_model.service_id}.{model.name}{_target(params)}"
        number = len(self.calls)
        self.calls.append(label)
        if self.crash_at == number and self.crashed is None:
            self.crashed = label
            raise Crash(label)

    def arm(self, functions: frozenset[str], crash_at: int | None) -> None:
        self.functions, self.crash_at, self.calls, self.crashed = functions, crash_at, [], None

    def disarm(self) -> None:
        self.functions, self.crash_at = frozenset(), None


def _target(params: dict[str, Any]) -> str:
    """Which table or queue the call is on, briefly: the matrix's rows name them."""
    name = params.get("TableName") or params.get("QueueUrl") or params.get("TopicArn") or ""
    if not name and "RequestItems" in params:
        name = ",".join(params["RequestItems"])
    if not name and "TransactItems" in params:
        name = "transaction"
    short = str(name).rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    for prefix in ("hookrelay-", "Hookrelay-"):
        short = short.removeprefix(prefix)
    return f" [{short}]" if short else ""


@contextmanager
def injector() -> Iterator[CrashInjector]:
    """Installed on the default session for the block; services are rebuilt so their clients carry it."""
    hook = CrashInjector()
    session = boto3._get_default_session()
    session.events.register("before-parameter-build", hook)
    wiring.reset()
    try:
        yield hook
    finally:
        session.events.unregister("before-parameter-build", hook)
        wiring.reset()


@dataclass(frozen=True)
class Row:
    path: str
    point: str  # where it died ("-" for the run with no crash)
    outcome: str


MATRIX: list[Row] = []


def matrix_lines() -> list[str]:
    if not MATRIX:
        return []
    width = max(len(f"{row.path}  {row.point}") for row in MATRIX)
    crashes = [row for row in MATRIX if row.point != "-"]
    lines = [f"crash-point matrix: {len(crashes)} crash points on {len({r.path for r in MATRIX})} paths"]
    lines += [f"  {f'{row.path}  {row.point}':<{width}}  ->  {row.outcome}" for row in MATRIX]
    return lines
