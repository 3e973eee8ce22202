"""The whole AWS side on moto, in process: tables, queues and the state machine from the real definitions."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from moto import mock_aws

from hookrelay import wiring
from hookrelay.adapters import aws
from hookrelay.adapters.schema import RETRY_STATE_MACHINE_ARN
from hookrelay.adapters.telemetry import METRICS_NAMESPACE
from local import moto_stepfunctions, moto_transactions
from local.provision import provision

FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "TZ": "UTC",  # moto's Wait/TimestampPath compares against local time
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
    "POWERTOOLS_DEV": "false",
}


@contextmanager
def patched_env(values: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def moto_stack(
    *, retry_schedule: str = "default", execute_state_machine: bool = True, **extra: str
) -> Iterator[dict[str, Any]]:
    moto_transactions.install()  # all-or-nothing transactions without copying whole tables (see the module)
    moto_stepfunctions.install()  # an execution stopped mid-state ends ABORTED, not FAILED (see the module)
    with patched_env(FAKE_ENV), mock_aws(config={"stepfunctions": {"execute_state_machine": execute_state_machine}}):
        aws.reset()
        env = provision(retry_schedule=retry_schedule)
        env.update({"ALLOW_PRIVATE_DESTINATIONS": "true", "ATTEMPT_TIMEOUT_SECONDS": "2"}, **extra)
        with patched_env(env):
            wiring.reset()
            try:
                yield env
            finally:
                stop_running_executions(env[RETRY_STATE_MACHINE_ARN])
                wiring.reset()


def stop_running_executions(state_machine_arn: str) -> None:
    """moto runs executions on threads that outlive the mock: one still waiting would later send its
    retry into the next test's queue (same name, same URL), so none is left running."""
    sfn = boto3.client("stepfunctions")
    for execution in sfn.list_executions(stateMachineArn=state_machine_arn, statusFilter="RUNNING")["executions"]:
        sfn.stop_execution(executionArn=execution["executionArn"])
