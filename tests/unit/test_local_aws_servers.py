"""DynamoDB's local server answers one request at a time, and none of the local stack's callers waits for a place.

`local.aws_endpoint.OneAtATimeMotoServer` serves moto's app on one thread. Every worker process of the
local stack may call it at once; each connection waits in the listen queue until its turn. A full queue drops
the next connection's SYN and its client retries after a second, so the queue must hold them all.
"""

from __future__ import annotations

import socketserver
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import pytest

from local.aws_endpoint import ONE_AT_A_TIME_BACKLOG, OneAtATimeMotoServer
from local.stack import DEFAULT_DELIVERY_CONCURRENCY, concurrency_limits


@pytest.fixture
def dynamodb() -> Iterator[tuple[OneAtATimeMotoServer, Any]]:
    server = OneAtATimeMotoServer(0)
    server.start()
    client = boto3.client(
        "dynamodb",
        endpoint_url=f"http://127.0.0.1:{server.get_host_and_port()[1]}",
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    client.create_table(
        TableName="counters",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    yield server, client
    server.stop()


def test_the_listen_queue_holds_every_worker_of_the_local_stack() -> None:
    workers = sum(concurrency_limits(DEFAULT_DELIVERY_CONCURRENCY).values())
    assert workers <= ONE_AT_A_TIME_BACKLOG, f"{workers} workers may call DynamoDB at once"


def test_requests_from_many_clients_are_answered_in_turn_on_one_thread(
    dynamodb: tuple[OneAtATimeMotoServer, Any],
) -> None:
    server, client = dynamodb
    assert not isinstance(server.server, socketserver.ThreadingMixIn)

    def add_one(_: int) -> None:
        client.update_item(
            TableName="counters",
            Key={"pk": {"S": "n"}},
            UpdateExpression="ADD v :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
        )

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(add_one, range(200)))
    item = client.get_item(TableName="counters", Key={"pk": {"S": "n"}})["Item"]
    assert item["v"] == {"N": "200"}
