"""Step Functions on moto: an execution stopped mid-state ends ABORTED, as on AWS, not FAILED.

moto 5.2's interpreter skips a component's body once its execution is stopped (`EvalComponent.eval` checks
`is_running()`), but a Task state then pops the timeout it expected the skipped `Timeout` to push, and takes
the state's input (a dict) instead: "'>' not supported between instances of 'dict' and 'int'", and the
execution ends FAILED with States.Runtime. The circuit stops the retry executions of the failures that opened
it (StopExecution), so how such an execution ended depended on timing; on a loaded machine the tests that
look at it flaked. Here a stopped `Timeout` still pushes a number (never used: nothing runs after the stop).
Installed with `moto_transactions` by the local stack and the moto-backed tests; nothing deployed imports it.
"""

from __future__ import annotations

from typing import Any

from moto.stepfunctions.parser.asl.component.common.timeouts.timeout import Timeout, TimeoutSeconds

_original_eval = Timeout.eval


def _eval(self: Timeout, env: Any) -> None:
    depth = len(env.stack)
    _original_eval(self, env)
    if len(env.stack) == depth:  # stopped before its body ran: the caller pops a timeout all the same
        env.stack.append(TimeoutSeconds.DEFAULT_TIMEOUT_SECONDS)


def install() -> None:
    """Patch moto's Timeout component (idempotent)."""
    Timeout.eval = _eval  # type: ignore[method-assign]
