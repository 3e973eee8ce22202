"""The moto-backed tests' DynamoDB answers one request at a time (local/moto_serial.py), as the local stack's does:
threads updating one item (a batch's message groups counting one endpoint's failures) all apply, none raises."""

from __future__ import annotations

import threading

import boto3

from tests.support.aws import moto_stack

THREADS, UPDATES = 8, 40


def test_concurrent_updates_of_one_item_all_apply() -> None:
    with moto_stack() as env:
        table = boto3.resource("dynamodb").Table(env["ENDPOINTS_TABLE"])
        table.put_item(Item={"tenant_id": "ten_1", "id": "ep_1"})
        errors: list[BaseException] = []

        def update(n: int) -> None:
            try:
                for i in range(UPDATES):
                    table.update_item(
                        Key={"tenant_id": "ten_1", "id": "ep_1"},
                        UpdateExpression="ADD circuit_failures :one SET #a = :v",
                        ExpressionAttributeNames={"#a": f"attr_{n}_{i}"},
                        ExpressionAttributeValues={":one": 1, ":v": i},
                    )
            except BaseException as error:
                errors.append(error)

        threads = [threading.Thread(target=update, args=(n,)) for n in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        item = table.get_item(Key={"tenant_id": "ten_1", "id": "ep_1"})["Item"]
        assert item["circuit_failures"] == THREADS * UPDATES
