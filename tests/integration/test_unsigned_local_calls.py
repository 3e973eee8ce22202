"""The local stack's functions call moto unsigned (signing was about 15% of their CPU samples), and moto's server still
finds each call's service: DynamoDB, SQS and Step Functions by their JSON target (`local.moto_server`), SNS by its
action. Nor does botocore check their calls against the service model before sending them.

`LOCAL_MOTO_CALLS` (hookrelay/adapters/aws.py) is set by the local stack only; `local.aws_endpoint.route_unsigned_calls`
teaches moto's dispatcher the action. Deployed functions never have the variable (tests/infrastructure).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore import UNSIGNED
from botocore.exceptions import ClientError, ParamValidationError
from moto.moto_server import werkzeug_app

from hookrelay.adapters import aws
from local.aws_endpoint import FAKE_CREDENTIALS, route_unsigned_calls
from local.moto_server import MotoServer

ROLE = "arn:aws:iam::123456789012:role/r"  # moto checks no role
SIGNED = {"region_name": "us-east-1", "aws_access_key_id": "local", "aws_secret_access_key": "local"}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    # moto's routing tables, copied: what this test teaches them is undone after it.
    monkeypatch.setattr(werkzeug_app, "UNSIGNED_REQUESTS", dict(werkzeug_app.UNSIGNED_REQUESTS))
    monkeypatch.setattr(werkzeug_app, "UNSIGNED_ACTIONS", dict(werkzeug_app.UNSIGNED_ACTIONS))
    for name, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    moto = MotoServer(0)
    moto.start()
    url = f"http://127.0.0.1:{moto.get_host_and_port()[1]}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    aws.reset()
    yield url
    aws.reset()
    moto.stop()


def unsigned(monkeypatch: pytest.MonkeyPatch, service: str) -> Any:
    """The functions' own client, as the local stack makes it; it fails the test if a call carries a signature."""
    monkeypatch.setenv(aws.LOCAL_MOTO_CALLS, "true")
    aws.reset()
    client = aws.client(service)

    def no_signature(request: Any, **_: Any) -> None:
        assert "Authorization" not in request.headers

    client.meta.events.register("before-send", no_signature)
    return client


def a_signed_item(server: str, table: str) -> None:
    """An item in a new table (moto's state outlives its server in this process: each test names its own)."""
    dynamodb = boto3.client("dynamodb", endpoint_url=server, **SIGNED)
    dynamodb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.put_item(TableName=table, Item={"pk": {"S": "a"}})


def test_each_service_the_functions_call_answers_their_unsigned_calls(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    route_unsigned_calls()
    a_signed_item(server, "routed")
    queue_url = boto3.client("sqs", endpoint_url=server, **SIGNED).create_queue(QueueName="q")["QueueUrl"]
    topic = boto3.client("sns", endpoint_url=server, **SIGNED).create_topic(Name="n")["TopicArn"]
    machine = boto3.client("stepfunctions", endpoint_url=server, **SIGNED).create_state_machine(
        name="m", definition='{"StartAt": "S", "States": {"S": {"Type": "Pass", "End": true}}}', roleArn=ROLE
    )["stateMachineArn"]

    # What the signed calls made, the unsigned ones find: the same services, account and region.
    assert unsigned(monkeypatch, "dynamodb").get_item(TableName="routed", Key={"pk": {"S": "a"}})["Item"]
    sqs = unsigned(monkeypatch, "sqs")
    sqs.send_message(QueueUrl=queue_url, MessageBody="m")
    assert [m["Body"] for m in sqs.receive_message(QueueUrl=queue_url)["Messages"]] == ["m"]
    assert unsigned(monkeypatch, "sns").publish(TopicArn=topic, Message="m")["MessageId"]
    started = unsigned(monkeypatch, "stepfunctions").start_execution(stateMachineArn=machine)
    assert started["executionArn"].startswith(machine.replace(":stateMachine:", ":execution:"))


def test_without_the_route_moto_does_not_know_an_unsigned_publish(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: moto alone cannot tell an unsigned SNS call's service (another service answers it)."""
    topic = boto3.client("sns", endpoint_url=server, **SIGNED).create_topic(Name="unrouted")["TopicArn"]
    with pytest.raises(KeyError, match="PublishResult"):  # botocore finds no SNS answer in what another service said
        unsigned(monkeypatch, "sns").publish(TopicArn=topic, Message="m")


def test_the_functions_sign_every_call_unless_the_local_stack_says_not_to(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(aws.LOCAL_MOTO_CALLS, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    aws.reset()
    assert aws.client("sqs").meta.config.signature_version is not UNSIGNED
    monkeypatch.setenv(aws.LOCAL_MOTO_CALLS, "true")
    aws.reset()
    assert aws.client("sqs").meta.config.signature_version is UNSIGNED
    aws.reset()


def test_a_call_botocore_would_refuse_reaches_the_local_stacks_moto(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unchecked, a malformed call is sent, and moto answers it; checked (as deployed), botocore refuses it."""
    monkeypatch.delenv(aws.LOCAL_MOTO_CALLS, raising=False)
    aws.reset()
    with pytest.raises(ParamValidationError):
        aws.client("sqs").get_queue_url(QueueName=7)
    with pytest.raises(ClientError, match=r"QueueDoesNotExist|NonExistentQueue"):
        unsigned(monkeypatch, "sqs").get_queue_url(QueueName=7)
