"""The local seam for Step Functions on moto (local/moto_stepfunctions.py): a stopped Task state's timeout."""

from __future__ import annotations

from typing import Any

from moto.stepfunctions.parser.asl.component.common.string.string_expression import StringJsonPath
from moto.stepfunctions.parser.asl.component.common.timeouts.timeout import TimeoutSecondsPath

from local import moto_stepfunctions


class StoppedEnvironment:
    """What a Task state's evaluation sees once StopExecution has landed: not running, its input on the stack."""

    def __init__(self, state_input: dict[str, Any]) -> None:
        self.stack: list[Any] = [state_input]

    def is_running(self) -> bool:
        return False


def test_a_stopped_task_state_pops_a_number_not_its_input() -> None:
    moto_stepfunctions.install()
    env = StoppedEnvironment({"ticket": {"delivery_id": "dlv_1"}, "task_timeout_seconds": 10})
    TimeoutSecondsPath(StringJsonPath("$.task_timeout_seconds")).eval(env)  # type: ignore[arg-type]
    timeout = env.stack.pop()  # what the Task state does next (state_task_service_callback)
    assert isinstance(timeout, int)
    assert env.stack == [{"ticket": {"delivery_id": "dlv_1"}, "task_timeout_seconds": 10}]  # its input untouched
