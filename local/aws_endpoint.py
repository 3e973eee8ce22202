"""moto's servers on 127.0.0.1 as the AWS endpoints of every AWS call the local stack makes, each in its own process.

`start_aws_endpoints` runs `python -m local.aws_endpoint` twice: one server for DynamoDB, one for every other
service (SQS, Step Functions, SNS), with Step Functions executions switched on (moto's own interpreter runs the
retry workflow's ASL, whose tasks only send to SQS queues, and finds its server through `MOTO_PORT`). Each has
the local stack's fixes to moto installed (`moto_transactions`, `moto_sqs`, `moto_dynamodb`) and prints its
port. DynamoDB gets a process of its own because it is most of the stack's AWS work (seven of an event's ten
calls; its operations alone took about half of moto's busy time in a py-spy profile, before their share of the
per-request overhead): with one server, moto's one interpreter lock was the stack's
bottleneck on a 2-core machine; with two, the queue's and the tables' work run at once. moto keeps each
service's state in the process that serves it, so no state is shared between the two. Both keep their clients'
connections open (`local.moto_server.MotoServer`); DynamoDB's answers one request at a time (`--one-at-a-time`),
as moto's conditional writes need. Every boto3 client
made afterwards finds them through the standard `AWS_ENDPOINT_URL` and `AWS_ENDPOINT_URL_DYNAMODB` (the AWS
CLI reads the same two).
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import requests

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_SESSION_TOKEN": "local",
    "AWS_DEFAULT_REGION": "us-east-1",
}
# The stack's functions call moto unsigned (`LOCAL_MOTO_CALLS` in hookrelay/adapters/aws.py): moto finds a signed
# call's service in its signature's scope. The JSON protocols' calls go to their service by their target header
# (`local.moto_server.json_dispatchers`); SNS's, a query protocol, is found by its action, registered here.
UNSIGNED_ACTIONS = {"Publish": "sns"}
READY_TIMEOUT_SECONDS = 60
STOP_TIMEOUT_SECONDS = 10


def use_utc() -> None:
    """moto's Wait state compares `TimestampPath` against local time: make local time UTC, before anyone reads it."""
    os.environ["TZ"] = "UTC"
    time.tzset()


@dataclass
class AwsEndpoint:
    process: subprocess.Popen[str]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@dataclass
class AwsEndpoints:
    default: AwsEndpoint  # every service but DynamoDB; Step Functions' interpreter sends its tasks here
    dynamodb: AwsEndpoint

    @property
    def url(self) -> str:
        return self.default.url

    def environment(self) -> dict[str, str]:
        """The variables that point boto3 (and the AWS CLI) at these servers."""
        return {"AWS_ENDPOINT_URL": self.default.url, "AWS_ENDPOINT_URL_DYNAMODB": self.dynamodb.url}

    def stop(self) -> None:
        for endpoint in (self.default, self.dynamodb):
            endpoint.stop()


def _launch(*, one_at_a_time: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen(  # noqa: S603 - our own interpreter and module, fixed arguments
        [sys.executable, "-m", "local.aws_endpoint", "--port", "0", *(["--one-at-a-time"] if one_at_a_time else [])],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ | {"TZ": "UTC"},
    )


def _ready(process: subprocess.Popen[str]) -> AwsEndpoint:
    """The server once it has said its port; one that never does is ended."""
    assert process.stdout is not None
    ready = threading.Timer(READY_TIMEOUT_SECONDS, process.kill)
    ready.start()
    line = process.stdout.readline()
    ready.cancel()
    if not line.strip().isdigit():
        process.kill()
        raise OSError(f"moto's server did not start (exit {process.wait()})")
    return AwsEndpoint(process, int(line))


def start_aws_endpoints() -> AwsEndpoints:
    """Start moto's two server processes (at once), switch on state machine execution, and point this process's
    AWS clients at them."""
    launched = [_launch(), _launch(one_at_a_time=True)]
    started: list[AwsEndpoint] = []
    try:
        for process in launched:
            started.append(_ready(process))
    except BaseException:
        for endpoint in started:
            endpoint.stop()
        for process in launched[len(started) :]:
            process.kill()
            process.wait()
        raise
    endpoints = AwsEndpoints(default=started[0], dynamodb=started[1])
    os.environ.update(FAKE_CREDENTIALS)
    os.environ.update(endpoints.environment())
    response = requests.post(
        f"{endpoints.default.url}/moto-api/config", json={"stepfunctions": {"execute_state_machine": True}}, timeout=5
    )
    response.raise_for_status()
    return endpoints


def serve_requests_faster() -> None:
    """Costs of moto's server per request that a steady stream of AWS calls need not pay.

    It finds the service a request is for by listing moto's package directory, on every request; the list does
    not change. And it finds the action's method by listing the response class's methods (through `inspect`) and
    converting the action's name, on every request; neither changes while the server runs. (The server itself,
    kept-alive connections and the JSON protocols without Flask, is `local.moto_server`.)
    """
    from moto import backends
    from moto.core import responses

    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules
    responses.method_names_from_class = functools.cache(responses.method_names_from_class)
    responses.camelcase_to_underscores = functools.lru_cache(maxsize=4096)(responses.camelcase_to_underscores)


def route_unsigned_calls() -> None:
    from moto.moto_server import werkzeug_app

    region = FAKE_CREDENTIALS["AWS_DEFAULT_REGION"]
    werkzeug_app.UNSIGNED_ACTIONS.update({action: (service, region) for action, service in UNSIGNED_ACTIONS.items()})


def serve(port: int, *, one_at_a_time: bool = False) -> None:
    """The server process: moto's server until SIGTERM, or until the local stack that started it is gone."""
    from local import moto_dynamodb, moto_sqs, moto_stepfunctions, moto_transactions
    from local.moto_server import MotoServer
    from local.processes import (
        exit_with_parent,
        keep_what_survives,
        leave_interrupts_to_the_parent,
        name_this_process,
        wait_for_signal,
    )

    exit_with_parent()
    leave_interrupts_to_the_parent()
    name_this_process("moto-dynamodb" if one_at_a_time else "moto-aws")
    use_utc()
    moto_transactions.install()  # all-or-nothing transactions without copying whole tables (see the module)
    moto_stepfunctions.install()  # an execution stopped mid-state ends ABORTED, not FAILED (see the module)
    moto_sqs.install()  # long polls that wait instead of spinning, sends that do not count the queue
    moto_dynamodb.install()  # item operations' answers written as JSON, not walked member by member
    serve_requests_faster()
    route_unsigned_calls()
    server = MotoServer(port, one_at_a_time=one_at_a_time)
    server.start()
    bound = server.get_host_and_port()[1]
    os.environ.update(FAKE_CREDENTIALS)
    os.environ["MOTO_PORT"] = str(bound)  # where moto's Step Functions interpreter sends its own AWS calls
    keep_what_survives()
    print(bound, flush=True)
    wait_for_signal(signal.SIGTERM)
    server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m local.aws_endpoint")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--one-at-a-time", action="store_true", help="serve requests in turn, on one thread")
    arguments = parser.parse_args()
    serve(arguments.port, one_at_a_time=arguments.one_at_a_time)
