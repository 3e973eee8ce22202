"""moto's server on 127.0.0.1 as the AWS endpoint of every AWS call the local stack makes.

It runs in this process on a free port, with Step Functions executions switched on so moto's own
interpreter runs the retry workflow's ASL. Every boto3 client made afterwards finds it through the
standard `AWS_ENDPOINT_URL`; moto's interpreter finds it through `MOTO_PORT`.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

import requests
from moto.server import ThreadedMotoServer

from local import moto_transactions

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_SESSION_TOKEN": "local",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def use_utc() -> None:
    """moto's Wait state compares `TimestampPath` against local time: make local time UTC, before anyone reads it."""
    os.environ["TZ"] = "UTC"
    time.tzset()


@dataclass
class AwsEndpoint:
    server: ThreadedMotoServer
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.stop()


def start_aws_endpoint(port: int = 0) -> AwsEndpoint:
    """Start moto's server, switch on state machine execution, and point this process's AWS clients at it."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per AWS call is noise, not information
    moto_transactions.install()  # all-or-nothing transactions without copying whole tables (see the module)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = AwsEndpoint(server, server.get_host_and_port()[1])
    os.environ.update(FAKE_CREDENTIALS)
    os.environ.update({"AWS_ENDPOINT_URL": endpoint.url, "MOTO_PORT": str(endpoint.port)})
    response = requests.post(
        f"{endpoint.url}/moto-api/config", json={"stepfunctions": {"execute_state_machine": True}}, timeout=5
    )
    response.raise_for_status()
    return endpoint
