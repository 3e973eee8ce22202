"""moto's local servers (`local.moto_server.MotoServer`): DynamoDB's answers one request at a time, every client keeps
its connection for its next call, and none of the local stack's callers waits for a place in the listen queue.

A full listen queue drops the next connection's SYN and its client retries after a second, so the queue must hold
every worker of the local stack connecting at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from local.moto_server import LISTEN_BACKLOG, MotoServer
from local.stack import DEFAULT_DELIVERY_CONCURRENCY, concurrency_limits

HOLD_SECONDS = 0.005  # each DynamoDB answer is held this long, so that requests at once would overlap


def dynamodb_client(server: MotoServer, attempts: int = 3) -> Any:
    return boto3.client(
        "dynamodb",
        config=Config(retries={"mode": "standard", "max_attempts": attempts}),
        endpoint_url=f"http://127.0.0.1:{server.get_host_and_port()[1]}",
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


def a_counter_table(client: Any, name: str) -> None:
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


class Overlap:
    """Wraps the server's DynamoDB dispatch: the most requests it was ever in at once."""

    def __init__(self, server: MotoServer) -> None:
        self.inside = self.most = 0
        self.lock = threading.Lock()
        dispatch = server.server.dispatchers["DynamoDB_20120810"]

        def counted(*args: Any, **kwargs: Any) -> Any:
            with self.lock:
                self.inside += 1
                self.most = max(self.most, self.inside)
            try:
                time.sleep(HOLD_SECONDS)
                return dispatch(*args, **kwargs)
            finally:
                with self.lock:
                    self.inside -= 1

        server.server.dispatchers["DynamoDB_20120810"] = counted


@pytest.fixture
def servers() -> Iterator[dict[bool, MotoServer]]:
    started = {one_at_a_time: MotoServer(0, one_at_a_time=one_at_a_time) for one_at_a_time in (True, False)}
    for server in started.values():
        server.start()
    yield started
    for server in started.values():
        server.stop()


def add_ones(client: Any, table: str, times: int) -> None:
    def add_one(_: int) -> None:
        client.update_item(
            TableName=table,
            Key={"pk": {"S": "n"}},
            UpdateExpression="ADD v :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
        )

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(add_one, range(times)))


def test_the_listen_queue_holds_every_worker_of_the_local_stack() -> None:
    workers = sum(concurrency_limits(DEFAULT_DELIVERY_CONCURRENCY).values())
    assert workers <= LISTEN_BACKLOG, f"{workers} workers may call DynamoDB at once"


def test_requests_from_many_clients_are_answered_in_turn(servers: dict[bool, MotoServer]) -> None:
    overlap = {one_at_a_time: Overlap(server) for one_at_a_time, server in servers.items()}
    for one_at_a_time, server in servers.items():
        client = dynamodb_client(server)
        a_counter_table(client, f"counters-{one_at_a_time}")
        add_ones(client, f"counters-{one_at_a_time}", 100)
        item = client.get_item(TableName=f"counters-{one_at_a_time}", Key={"pk": {"S": "n"}})["Item"]
        assert item["v"] == {"N": "100"}
    assert overlap[True].most == 1
    assert overlap[False].most > 1  # the control: without its turns, the same server answers requests at once


def test_a_client_keeps_its_connection_for_its_next_calls(servers: dict[bool, MotoServer]) -> None:
    server = servers[True]
    accepted: list[object] = []
    accept = server.server.get_request

    def counted() -> Any:
        connection = accept()
        accepted.append(connection)
        return connection

    server.server.get_request = counted  # type: ignore[method-assign]
    client = dynamodb_client(server)
    a_counter_table(client, "kept")
    for _ in range(20):
        client.get_item(TableName="kept", Key={"pk": {"S": "n"}})
    assert len(accepted) == 1  # werkzeug's server, moto's own, accepts one connection per call


def test_a_fault_of_motos_is_answered_not_a_dropped_connection(servers: dict[bool, MotoServer]) -> None:
    server = servers[True]

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise KeyError(":missing")  # what moto raises for a condition naming a value it was not given

    client = dynamodb_client(server, attempts=1)  # a 500 is retried otherwise
    a_counter_table(client, "faulty")
    server.server.dispatchers["DynamoDB_20120810"] = failing
    with pytest.raises(ClientError) as error:
        client.get_item(TableName="faulty", Key={"pk": {"S": "n"}})
    assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    assert "KeyError" in error.value.response["Error"]["Message"]
