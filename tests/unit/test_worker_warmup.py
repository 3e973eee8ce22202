"""The functions' fork server (`local.worker_warmup`) makes the clients and tables every worker would make on its
first invocation, and calls nothing: each is imported in a process of its own, as the fork server imports it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from hookrelay.adapters import schema
from hookrelay.adapters.aws import LOCAL_MOTO_CALLS

ROOT = Path(__file__).resolve().parents[2]
# What the fork server's process holds once the module is imported: how many clients and tables are kept.
REPORT = """
import json, local.worker_warmup
from hookrelay.adapters import aws
held = {"tables": aws.table.cache_info().currsize, "clients": aws.client.cache_info().currsize}
if held["clients"]:
    held["endpoint"] = aws.client("dynamodb").meta.endpoint_url
print(json.dumps(held))
"""


def warmed_up(extra_env: dict[str, str]) -> dict[str, object]:
    names = [f"hookrelay-{table.logical_name}" for table in schema.ALL_TABLES]
    env = {key: value for key, value in os.environ.items() if key != "AWS_ENDPOINT_URL"}
    env.update({table.env_var: name for table, name in zip(schema.ALL_TABLES, names, strict=True)})
    env.update(AWS_DEFAULT_REGION="us-east-1", PYTHONPATH=f"{ROOT / 'lambdas'}:{ROOT}", **extra_env)
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed program
        [sys.executable, "-c", REPORT], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_table_and_client_is_made_before_the_workers_are_forked_and_nothing_is_called() -> None:
    with socket.socket() as closed:  # the endpoint: a port that refuses connections, so that any call fails
        closed.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{closed.getsockname()[1]}"
        held = warmed_up({"AWS_ENDPOINT_URL": endpoint, LOCAL_MOTO_CALLS: "true"})
    assert held == {"tables": len(schema.ALL_TABLES), "clients": 4, "endpoint": endpoint}  # dynamodb, sqs, sfn, sns


def test_without_the_stacks_endpoint_no_client_is_kept_for_the_workers() -> None:
    assert warmed_up({}) == {"tables": 0, "clients": 0}
