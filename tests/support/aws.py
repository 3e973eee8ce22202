"""The whole AWS side on moto, in process: tables, queues and the state machine from the real definitions."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from moto import mock_aws
from moto.stepfunctions.parser.utils import TMP_THREADS

from hookrelay import wiring
from hookrelay.adapters import aws, schema
from hookrelay.adapters.schema import RETRY_STATE_MACHINE_ARN
from hookrelay.adapters.telemetry import METRICS_NAMESPACE
from hookrelay.domain.addresses import DEFAULT_ENDPOINT_PORTS, EndpointPorts
from hookrelay.domain.limits import DEFAULT_LIMITS, TenantLimits
from hookrelay.domain.queues import DEFAULT_DELIVERY_SHARDS
from hookrelay.function_environment import SERVING_ROUTES
from hookrelay.functions import INGEST
from hookrelay.services.endpoint_lists import ENDPOINT_LIST_SECONDS, RecentEndpointLists
from local import function_scope, iam_check, moto_serial, moto_stepfunctions, moto_transactions
from local.as_deployed import TEST_API_URL, local_deployment, local_settings, queue_arn
from local.iam_check import IamCheck
from local.provision import DEFAULT_PREFIX, create_queue, provision, queue_urls

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


# The attempt timeout of the tests' deployment: a hanging scripted consumer costs each test seconds, not eight.
ATTEMPT_TIMEOUT_IN_TESTS = 2


@contextmanager
def moto_stack(
    *,
    retry_schedule: str = "default",
    execute_state_machine: bool = True,
    api_key_rate_per_second: int | None = None,
    enforce_event_catalogue: bool = False,
    endpoint_ports: EndpointPorts = DEFAULT_ENDPOINT_PORTS,
    allow_private_destinations: bool = True,
    revoke: tuple[tuple[str, str], ...] = (),
    limits: TenantLimits = DEFAULT_LIMITS,
    shards: int = DEFAULT_DELIVERY_SHARDS,
    attempt_timeout_seconds: int = ATTEMPT_TIMEOUT_IN_TESTS,
) -> Iterator[dict[str, Any]]:
    """The whole system on moto, each function run as deployed: its own environment, its role's statements enforced
    (local/as_deployed.py). Yields every resource's variable, for the tests (which are no function) to read.
    `allow_private_destinations`: local mode (the tests' consumers are on 127.0.0.1); False runs the deployed guard.
    `revoke`: (function, action) pairs taken out of those functions' statements, as if the template lacked them.
    `shards`: the delivery queues' shards (`grow_shards` redeploys with more). `attempt_timeout_seconds`: the tests'
    short one by default; a benchmark gives the deployed one."""
    moto_transactions.install()  # all-or-nothing transactions without copying whole tables (see the module)
    moto_serial.install()  # DynamoDB's requests one at a time, as the local stack's server answers (see the module)
    moto_stepfunctions.install()  # an execution stopped mid-state ends ABORTED, not FAILED (see the module)
    with patched_env(FAKE_ENV), mock_aws(config={"stepfunctions": {"execute_state_machine": execute_state_machine}}):
        aws.reset()
        if api_key_rate_per_second is None and os.environ.get(schema.API_KEY_RATE_PER_SECOND):
            # Deployed as a caller's environment says (the cost benchmark meters the deployed rate limit so).
            api_key_rate_per_second = int(os.environ[schema.API_KEY_RATE_PER_SECOND])
        settings = local_settings(
            retry_schedule,
            attempt_timeout_seconds=attempt_timeout_seconds,
            api_key_rate_per_second=api_key_rate_per_second,
            enforce_event_catalogue=enforce_event_catalogue,
            endpoint_ports=endpoint_ports,
            limits=limits,
        )
        resources = {**provision(retry_schedule=retry_schedule, shards=shards), schema.API_URL: TEST_API_URL}
        deployment = local_deployment(resources, settings)
        for function, action in revoke:
            deployment = deployment.without(function, action)
        private = "true" if allow_private_destinations else "false"
        env = {**deployment.every_variable(), schema.ALLOW_PRIVATE_DESTINATIONS: private}
        check = IamCheck(deployment.policies, FAKE_ENV["AWS_DEFAULT_REGION"])
        with patched_env(env):
            function_scope.use(deployment)
            iam_check.install(check)
            wiring.reset()
            try:
                yield env
            finally:
                iam_check.install(None)
                function_scope.use(None)
                stop_running_executions(env[RETRY_STATE_MACHINE_ARN])
                wiring.reset()


def grow_shards(env: dict[str, Any], shards: int, retry_schedule: str = "default") -> dict[str, Any]:
    """Inside `moto_stack`: redeploy with `shards` delivery shards, as `cdk deploy` with a larger delivery_shards does.
    The new shards' queues are made, every existing resource stays as it is (messages in flight included), and every
    function is deployed again with every delivery queue's URL. Returns the new variables (and sets them)."""
    urls = queue_urls(env)
    sqs = boto3.client("sqs")
    arns = {spec.logical_name: queue_arn(url, FAKE_ENV["AWS_DEFAULT_REGION"]) for spec, url in urls.items()}
    for spec in schema.delivery_queues(shards):
        if spec not in urls:
            urls[spec] = create_queue(sqs, spec, DEFAULT_PREFIX, arns)
    resources = {**env, schema.DELIVERY_QUEUE.env_var: schema.encode_delivery_queues(urls)}
    settings = local_settings(retry_schedule, attempt_timeout_seconds=ATTEMPT_TIMEOUT_IN_TESTS)
    deployment = local_deployment(resources, settings)
    grown = {**env, **deployment.every_variable()}
    os.environ.update(grown)
    function_scope.use(deployment)
    iam_check.install(IamCheck(deployment.policies, FAKE_ENV["AWS_DEFAULT_REGION"]))
    wiring.reset()
    return grown


def serving_routes() -> list[str]:
    """The functions that serve the API's routes (and count each key's requests)."""
    return sorted(SERVING_ROUTES)


@contextmanager
def as_function(name: str) -> Iterator[None]:
    """Inside: what `name`'s invocations see (its environment, and the services the wiring built for it), so a test
    can change a function's service (a clock, a page size) before invoking it."""
    with function_scope.entered(name):
        yield


def ingest_endpoint_lists() -> RecentEndpointLists:
    """The ingest function's kept endpoint lists (services/endpoint_lists.py), to set their clock."""
    with as_function(INGEST.name):
        lists = wiring.ingest_service().endpoints
    assert isinstance(lists, RecentEndpointLists)
    return lists


def ingest_reads_endpoints_again(seconds: float = ENDPOINT_LIST_SECONDS) -> None:
    """Ingest's kept endpoint lists as `seconds` later: what a test that changed a tenant's endpoints (or an
    endpoint's circuit) and then publishes would wait for in AWS before the change applies."""
    lists = ingest_endpoint_lists()
    before = lists.clock
    lists.clock = lambda: before() + seconds


# Bounds the wait for stopped executions' threads (they end at once, or when a Task's call returns).
EXECUTION_THREADS_JOIN_SECONDS = 30


def stop_running_executions(state_machine_arn: str) -> None:
    """moto runs executions on threads that outlive the mock: one still waiting would later send its
    retry into the next test's queue (same name, same URL), so none is left running, and their threads are waited
    for (a stop wakes a Wait state at once, `end_stopped_waits` a task waiting for its token, and a Task in flight
    finishes its call), so none is mid-call either."""
    sfn = boto3.client("stepfunctions")
    pages = sfn.get_paginator("list_executions").paginate(stateMachineArn=state_machine_arn, statusFilter="RUNNING")
    for execution in (execution for page in pages for execution in page["executions"]):
        sfn.stop_execution(executionArn=execution["executionArn"])
    moto_stepfunctions.end_stopped_waits()
    deadline = time.monotonic() + EXECUTION_THREADS_JOIN_SECONDS
    for thread in list(TMP_THREADS):
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    TMP_THREADS[:] = [thread for thread in TMP_THREADS if thread.is_alive()]
