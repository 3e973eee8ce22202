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
And: a stop wakes a Wait state but not a task waiting for its token (`.waitForTaskToken`), whose thread sleeps out the
task's timeout (900 s). `end_stopped_waits` ends those waits, for the tests' teardown, where the next test's mock
would otherwise share the process with them (the local stack leaves them be: a sleeping thread there harms nothing).
Woken so, the task times out in moto's eyes and the execution ends FAILED, not ABORTED: only a teardown, when nothing
looks any more, calls it.
Installed with `moto_transactions` by the local stack and the moto-backed tests; nothing deployed imports it.
"""

from __future__ import annotations

import weakref
from typing import Any

from moto.stepfunctions.parser.asl.component.common.timeouts.timeout import Timeout, TimeoutSeconds
from moto.stepfunctions.parser.asl.eval.environment import Environment
from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

_original_eval = Timeout.eval
_original_start = ExecutionWorker.start
_original_environment = ExecutionWorker._get_evaluation_environment
_environments: weakref.WeakSet[Environment] = weakref.WeakSet()  # every execution's, while it is referenced


def _eval(self: Timeout, env: Any) -> None:
    depth = len(env.stack)
    _original_eval(self, env)
    if len(env.stack) == depth:  # stopped before its body ran: the caller pops a timeout all the same
        env.stack.append(TimeoutSeconds.DEFAULT_TIMEOUT_SECONDS)


def _start(self: ExecutionWorker) -> None:
    environment = _original_environment(self)
    self.env = environment
    _environments.add(environment)
    self._get_evaluation_environment = lambda: environment  # type: ignore[method-assign]  # the thread takes it
    _original_start(self)


def end_stopped_waits() -> None:
    """Ends every stopped execution's waits for a task token, so its thread ends now (see the module)."""
    for environment in list(_environments):
        if not environment.is_running():
            for endpoint in list(environment.callback_pool_manager._pool.values()):
                endpoint.interrupt_all()


def install() -> None:
    """Patch moto's Timeout component and its execution worker's start (idempotent)."""
    Timeout.eval = _eval  # type: ignore[method-assign]
    ExecutionWorker.start = _start  # type: ignore[method-assign]
