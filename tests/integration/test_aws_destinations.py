"""AWS destinations (issue 29): an endpoint whose url is an SQS queue's, an SNS topic's or an EventBridge bus's ARN,
sent to as a role in the consumer's account assumed with the tenant's external ID, through the real API and delivery
handlers on moto. The delivery function runs as deployed: its `sts:AssumeRole` is checked against its role's
statements, and the consumer role's trust policy as STS checks it (local/trust.py: moto's STS checks none)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from standardwebhooks import Webhook

from hookrelay.adapters.schema import SQS_MAX_BATCH
from local.trust import caller_role
from tests.support.consumer import ScriptedConsumer
from tests.support.platform import Platform

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's


def _trust(external_id: str | None, principal: str | None = None) -> dict[str, Any]:
    """The trust policy the consumer guide gives a consumer to paste (with the external ID hookrelay shows them)."""
    statement: dict[str, Any] = {
        "Effect": "Allow",
        "Principal": {"AWS": principal or caller_role("delivery")},
        "Action": "sts:AssumeRole",
    }
    if external_id is not None:
        statement["Condition"] = {"StringEquals": {"sts:ExternalId": external_id}}
    return {"Version": "2012-10-17", "Statement": [statement]}


def _role(name: str, trust: dict[str, Any]) -> str:
    return boto3.client("iam", region_name=REGION).create_role(
        RoleName=name, AssumeRolePolicyDocument=json.dumps(trust)
    )["Role"]["Arn"]


def _queue(name: str) -> tuple[str, str]:
    sqs = boto3.client("sqs", region_name=REGION)
    attributes = {"FifoQueue": "true"} if name.endswith(".fifo") else {}
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def _received(url: str, count: int) -> list[dict[str, Any]]:
    sqs = boto3.client("sqs", region_name=REGION)
    found: list[dict[str, Any]] = []
    for _ in range(count + 2):
        found += sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=SQS_MAX_BATCH, MessageAttributeNames=["All"], AttributeNames=["All"]
        ).get("Messages", [])
        if len(found) >= count:
            break
    return found


@pytest.fixture
def tenant(platform: Platform) -> Iterator[tuple[str, str, str]]:
    tenant_id, token = platform.new_tenant()
    yield tenant_id, token, platform.new_key("producer")


def _publish(platform: Platform, producer: str, tenant_id: str, **fields: Any) -> str:
    body = {"tenant_id": tenant_id, "type": "order.created", "data": {"id": 7}, **fields}
    accepted = platform.call("POST", "/v1/events", producer, body)
    assert accepted.status == 202, accepted.body
    return str(accepted.json()["delivery_ids"][0])


def _endpoint(platform: Platform, token: str, url: str, role_arn: str) -> dict[str, Any]:
    created = platform.call("POST", "/v1/endpoints", token, {"url": url, "role_arn": role_arn})
    assert created.status == 201, created.body
    return dict(created.json())


def _verified(endpoint: dict[str, Any], body: str, attributes: dict[str, Any]) -> dict[str, Any]:
    headers = {name: value["StringValue"] for name, value in attributes.items()}
    return dict(Webhook(endpoint["secret"]).verify(body, headers))


def test_an_sqs_queue_receives_the_signed_webhook_and_the_attempt_is_recorded(
    platform: Platform, tenant: tuple[str, str, str]
) -> None:
    tenant_id, token, producer = tenant
    url, arn = _queue("orders")
    role = _role("hookrelay-orders", _trust(f"hookrelay-{tenant_id}"))
    endpoint = _endpoint(platform, token, arn, role)
    assert endpoint["kind"] == "sqs" and endpoint["role_arn"] == role
    assert endpoint["external_id"] == f"hookrelay-{tenant_id}"

    delivery_id = _publish(platform, producer, tenant_id)
    assert platform.pump() == 1

    [message] = _received(url, 1)
    envelope = _verified(endpoint, message["Body"], message["MessageAttributes"])
    assert envelope["type"] == "order.created" and envelope["data"] == {"id": 7}
    delivery = platform.call("GET", f"/v1/deliveries/{delivery_id}", token).json()
    assert delivery["status"] == "delivered"
    [attempt] = delivery["attempts"]
    assert attempt["status_code"] == 200 and "MessageId" in attempt["response_excerpt"]


def test_a_fifo_queue_gets_the_ordering_key_as_its_group_in_order(
    platform: Platform, tenant: tuple[str, str, str]
) -> None:
    tenant_id, token, producer = tenant
    url, arn = _queue("orders.fifo")
    endpoint = _endpoint(platform, token, arn, _role("hookrelay-fifo", _trust(f"hookrelay-{tenant_id}")))
    for number in range(3):
        body = {"tenant_id": tenant_id, "type": "order.created", "data": {"n": number}, "ordering_key": "acct-1"}
        assert platform.call("POST", "/v1/events", producer, body).status == 202
    _publish(platform, producer, tenant_id)  # no ordering key: the endpoint's own group
    platform.pump()

    messages = _received(url, 4)
    groups = [m["Attributes"]["MessageGroupId"] for m in messages]
    keyed = [json.loads(m["Body"])["data"]["n"] for m in messages if m["Attributes"]["MessageGroupId"] == "acct-1"]
    assert keyed == [0, 1, 2]
    assert sorted(set(groups)) == sorted({"acct-1", endpoint["id"]})


def test_an_sns_topic_and_an_eventbridge_bus_receive_it(platform: Platform, tenant: tuple[str, str, str]) -> None:
    tenant_id, token, producer = tenant
    role = _role("hookrelay-bus", _trust(f"hookrelay-{tenant_id}"))
    sns = boto3.client("sns", region_name=REGION)
    topic = sns.create_topic(Name="orders")["TopicArn"]
    from_topic, from_topic_arn = _queue("from-topic")
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=from_topic_arn, Attributes={"RawMessageDelivery": "true"})
    events = boto3.client("events", region_name=REGION)
    bus = events.create_event_bus(Name="orders")["EventBusArn"]
    from_bus, from_bus_arn = _queue("from-bus")
    events.put_rule(Name="all", EventBusName="orders", EventPattern=json.dumps({"source": ["hookrelay"]}))
    events.put_targets(Rule="all", EventBusName="orders", Targets=[{"Id": "q", "Arn": from_bus_arn}])

    on_topic = _endpoint(platform, token, topic, role)
    on_bus = _endpoint(platform, token, bus, role)
    assert (on_topic["kind"], on_bus["kind"]) == ("sns", "eventbridge")
    _publish(platform, producer, tenant_id)
    assert platform.pump() == 2

    [published] = _received(from_topic, 1)
    assert _verified(on_topic, published["Body"], published["MessageAttributes"])["data"] == {"id": 7}
    [put] = _received(from_bus, 1)
    event = json.loads(put["Body"])
    assert event["source"] == "hookrelay" and event["detail-type"] == "order.created"
    assert event["detail"]["data"] == {"id": 7}


@pytest.mark.parametrize(
    ("trust", "answer"),
    [
        # AWS itself would let this role be assumed (no condition to fail): hookrelay refuses it, since any tenant of
        # the deployment could then send into that account.
        pytest.param(lambda tenant_id: _trust(None), "UnsafeTrust: ", id="no external id"),
        pytest.param(
            lambda tenant_id: {
                "Statement": [
                    {
                        **_trust(None)["Statement"][0],
                        "Condition": {"StringLike": {"sts:ExternalId": "hookrelay-*"}},
                    }
                ]
            },
            "UnsafeTrust: ",
            id="a pattern every tenant's external id matches",
        ),
        pytest.param(
            lambda tenant_id: _trust("hookrelay-ten_someone_else"), "AccessDenied: ", id="another tenant's external id"
        ),
        pytest.param(
            lambda tenant_id: _trust(f"hookrelay-{tenant_id}", f"arn:aws:iam::{ACCOUNT}:role/someone-else"),
            "AccessDenied: ",
            id="another principal",
        ),
    ],
)
def test_a_role_whose_trust_does_not_hold_fails_as_a_recorded_attempt_not_a_crash(
    platform: Platform, tenant: tuple[str, str, str], trust: Any, answer: str
) -> None:
    tenant_id, token, producer = tenant
    url, arn = _queue("guarded")
    _endpoint(platform, token, arn, _role("hookrelay-guarded", trust(tenant_id)))
    delivery_id = _publish(platform, producer, tenant_id)
    assert platform.pump(max_batches=1) == 1

    delivery = platform.call("GET", f"/v1/deliveries/{delivery_id}", token).json()
    assert delivery["status"] == "retrying"
    [attempt] = delivery["attempts"]
    assert attempt["status_code"] == 403
    assert attempt["response_excerpt"].startswith(answer)
    assert _received(url, 0) == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"url": "arn:aws:sqs:us-east-1:123456789012:orders"}, "an AWS destination needs role_arn"),
        (
            {"url": "arn:aws:sqs:us-east-1:123456789012:orders", "role_arn": "arn:aws:iam::123456789012:role/admin"},
            "the role's name must start with 'hookrelay-'",
        ),
        (
            {
                "url": "arn:aws:sqs:us-east-1:123456789012:orders",
                "role_arn": "arn:aws:iam::210987654321:role/hookrelay-x",
            },
            "role_arn must be in the destination's account",
        ),
        (
            {"url": "https://8.8.8.8/hook", "role_arn": "arn:aws:iam::123456789012:role/hookrelay-x"},
            "role_arn is only for AWS destinations",
        ),
        (
            {"url": "arn:aws:lambda:us-east-1:123456789012:function:f", "role_arn": "arn:aws:iam::1:role/x"},
            "url must be an https:// URL or the ARN of an SQS queue",
        ),
    ],
)
def test_a_destination_that_cannot_work_is_refused_with_the_reason(
    platform: Platform, tenant: tuple[str, str, str], body: dict[str, Any], message: str
) -> None:
    _, token, _ = tenant
    refused = platform.call("POST", "/v1/endpoints", token, body)
    assert refused.status == 422, refused.body
    assert message in refused.json()["detail"]


def test_an_endpoint_moves_between_a_webhook_and_a_queue_with_its_role(
    platform: Platform, tenant: tuple[str, str, str], consumer: ScriptedConsumer
) -> None:
    tenant_id, token, producer = tenant
    url, arn = _queue("moved")
    role = _role("hookrelay-moved", _trust(f"hookrelay-{tenant_id}"))
    endpoint = platform.new_endpoint(token, consumer.url)
    path = f"/v1/endpoints/{endpoint['id']}"
    assert platform.call("PATCH", path, token, {"url": arn}).status == 422  # a queue needs its role
    moved = platform.call("PATCH", path, token, {"url": arn, "role_arn": role})
    assert moved.status == 200 and moved.json()["kind"] == "sqs"
    _publish(platform, producer, tenant_id)
    platform.pump()
    assert len(_received(url, 1)) == 1 and consumer.received == []

    back = platform.call("PATCH", path, token, {"url": consumer.url, "role_arn": None})
    assert back.status == 200 and back.json()["kind"] == "http" and "role_arn" not in back.json()
