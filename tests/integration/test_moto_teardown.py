"""The moto stack's teardown leaves no retry execution behind: moto runs each on a thread that outlives the mock, and
one still waiting would send its attempt into the next test's queue of the same name (a stray message that test
then counts)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import boto3
import pytest
from moto.stepfunctions.parser.utils import TMP_THREADS

from hookrelay.adapters.schema import DELIVERY_QUEUE, RETRY_STATE_MACHINE_ARN, DeliveryQueueUrls
from hookrelay.adapters.stepfunctions import StepFunctionsRetryWorkflow
from hookrelay.domain.clock import utcnow
from hookrelay.services.ports import RetryTicket
from tests.support import aws as support_aws
from tests.support.aws import moto_stack
from tests.support.pump import wait_until


def _entered(sfn: Any, arn: str, event_type: str) -> bool:
    events = sfn.get_execution_history(executionArn=arn)["events"]
    return any(event["type"] == event_type for event in events)


@pytest.mark.parametrize(
    ("next_attempt_in", "waiting"),
    [
        pytest.param(timedelta(hours=1), "WaitStateEntered", id="sleeping-out-its-wait"),
        # The attempt sent, its task waits for the delivery function's callback (900 s, the deployed timeout).
        pytest.param(timedelta(0), "TaskSubmitted", id="waiting-for-its-task-token"),
    ],
)
def test_an_execution_left_waiting_is_stopped_and_its_thread_ended_by_the_teardown(
    monkeypatch: pytest.MonkeyPatch, next_attempt_in: timedelta, waiting: str
) -> None:
    # Far below either wait: the threads end because the stop ends them, not because their time ran out.
    monkeypatch.setattr(support_aws, "EXECUTION_THREADS_JOIN_SECONDS", 10)
    with moto_stack() as env:
        sfn = boto3.client("stepfunctions")
        queues = DeliveryQueueUrls.parse(env[DELIVERY_QUEUE.env_var])
        workflow = StepFunctionsRetryWorkflow(sfn, env[RETRY_STATE_MACHINE_ARN], queues)
        workflow.start(RetryTicket("dlv_teardown", "ten_teardown", "grp", 2, utcnow() + next_attempt_in))
        [execution] = sfn.list_executions(stateMachineArn=env[RETRY_STATE_MACHINE_ARN])["executions"]
        wait_until(lambda: _entered(sfn, execution["executionArn"], waiting), f"the execution's {waiting}")
        threads = [thread for thread in TMP_THREADS if thread.is_alive()]
        assert threads, "moto runs the execution on a thread of its own"
    assert not [thread for thread in threads if thread.is_alive()]
