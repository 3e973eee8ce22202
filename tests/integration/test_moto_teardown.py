"""The moto stack's teardown leaves no retry execution behind: moto runs each on a thread that outlives the mock, and
one still waiting would send its attempt into the next test's queue of the same name (a stray message that test
then counts)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import boto3
from moto.stepfunctions.parser.utils import TMP_THREADS

from hookrelay.adapters.schema import DELIVERY_QUEUE, RETRY_STATE_MACHINE_ARN, DeliveryQueueUrls
from hookrelay.adapters.stepfunctions import StepFunctionsRetryWorkflow
from hookrelay.domain.clock import utcnow
from hookrelay.services.ports import RetryTicket
from tests.support.aws import moto_stack
from tests.support.pump import wait_until


def _waiting(sfn: Any, arn: str) -> bool:
    """The execution has entered its Wait state (its thread is sleeping out the hour)."""
    events = sfn.get_execution_history(executionArn=arn)["events"]
    return any(event["type"] == "WaitStateEntered" for event in events)


def test_an_execution_waiting_out_its_retry_is_stopped_and_its_thread_ended_by_the_teardown() -> None:
    with moto_stack() as env:
        sfn = boto3.client("stepfunctions")
        queues = DeliveryQueueUrls.parse(env[DELIVERY_QUEUE.env_var])
        workflow = StepFunctionsRetryWorkflow(sfn, env[RETRY_STATE_MACHINE_ARN], queues)
        workflow.start(RetryTicket("dlv_teardown", "ten_teardown", "grp", 2, utcnow() + timedelta(hours=1)))
        [execution] = sfn.list_executions(stateMachineArn=env[RETRY_STATE_MACHINE_ARN])["executions"]
        wait_until(lambda: _waiting(sfn, execution["executionArn"]), "the execution to enter its Wait state")
        threads = [thread for thread in TMP_THREADS if thread.is_alive()]
        assert threads, "moto runs the execution on a thread of its own"
    assert not [thread for thread in threads if thread.is_alive()]
