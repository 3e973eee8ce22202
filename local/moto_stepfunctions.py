"""Step Functions on moto: an execution stopped mid-state ends ABORTED, as on AWS, not FAILED.

moto 5.2's interpreter skips a component's body once its execution is stopped (`EvalComponent.eval` checks
`is_running()`), but a Task state then pops the timeout it expected the skipped `Timeout` to push, and takes
the state's input (a dict) instead: "'>' not supported between instances of 'dict' and 'int'", and the
execution ends FAILED with States.Runtime. The circuit stops the retry executions of the failures that opened
it (StopExecution), so how such an execution ended depended on timing; on a loaded machine the tests that
look at it flaked. Here a stopped `Timeout` still pushes a number (never used: nothing runs after the stop).
Also: moto makes an execution's environment on the execution's own thread, so a StopExecution that comes between
StartExecution and that thread's first line found none ("'NoneType' object has no attribute 'set_stop'"), where
AWS stops the execution. Here the environment is made before the thread starts (`_start`), so a stop always finds it.
And: a stop woke a Wait state but not a task waiting for its token (`.waitForTaskToken`), whose thread slept out the
task's timeout. Here a stop interrupts those waits too (`_set_stop`): the thread ends at once, as the execution has.
Installed with `moto_transactions` by the local stack and the moto-backed tests; nothing deployed imports it.
"""

from __future__ import annotations

from typing import Any

from moto.stepfunctions.parser.asl.component.common.timeouts.timeout import Timeout, TimeoutSeconds
from moto.stepfunctions.parser.asl.eval.environment import Environment
from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

_original_eval = Timeout.eval
_original_start = ExecutionWorker.start
_original_environment = ExecutionWorker._get_evaluation_environment
_original_set_stop = Environment.set_stop


def _eval(self: Timeout, env: Any) -> None:
    depth = len(env.stack)
    _original_eval(self, env)
    if len(env.stack) == depth:  # stopped before its body ran: the caller pops a timeout all the same
        env.stack.append(TimeoutSeconds.DEFAULT_TIMEOUT_SECONDS)


def _start(self: ExecutionWorker) -> None:
    environment = _original_environment(self)
    self.env = environment
    self._get_evaluation_environment = lambda: environment  # type: ignore[method-assign]  # the thread takes it
    _original_start(self)


def _set_stop(self: Environment, stop_date: Any, cause: str | None, error: str | None) -> None:
    _original_set_stop(self, stop_date, cause, error)
    # The waits end with no outcome; the stopped execution runs nothing after them (`is_running()` is false).
    for endpoint in list(self.callback_pool_manager._pool.values()):
        endpoint.interrupt_all()


def install() -> None:
    """Patch moto's Timeout component, its execution worker's start and its environment's stop (idempotent)."""
    Timeout.eval = _eval  # type: ignore[method-assign]
    ExecutionWorker.start = _start  # type: ignore[method-assign]
    Environment.set_stop = _set_stop  # type: ignore[method-assign]
