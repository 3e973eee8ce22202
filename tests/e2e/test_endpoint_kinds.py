"""One endpoint of each kind, made through the API of the local stack, each receiving the same event (issue 29): a
webhook, an SQS queue, an SNS topic and an EventBridge bus (the AWS ones in moto's server, as a consumer's account,
each behind a role whose trust policy requires the tenant's external ID), and a poll endpoint whose consumer reads
its messages."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from standardwebhooks import Webhook

from tests.e2e.harness import Consumer, LocalStack, eventually

pytestmark = pytest.mark.e2e


def _role(stack: LocalStack, name: str, external_id: str) -> str:
    """A consumer's role trusting the delivery role the stack names, only with the tenant's external ID."""
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": stack.delivery_role_arn},
                "Action": "sts:AssumeRole",
                "Condition": {"StringEquals": {"sts:ExternalId": external_id}},
            }
        ],
    }
    return str(stack._aws("iam").create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"])


def _queue(stack: LocalStack, name: str) -> tuple[str, str]:
    sqs = stack._aws("sqs")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def _one_message(stack: LocalStack, url: str) -> dict[str, Any] | None:
    found = stack._aws("sqs").receive_message(QueueUrl=url, MessageAttributeNames=["All"]).get("Messages", [])
    return found[0] if found else None


def test_one_endpoint_of_each_kind_receives_the_event(stack: LocalStack, consumers: Callable[..., Consumer]) -> None:
    tenant_id, tenant_key = stack.new_tenant("kinds")
    external_id = f"hookrelay-{tenant_id}"
    role = _role(stack, f"hookrelay-kinds-{tenant_id[-8:].lower()}", external_id)
    consumer = consumers("webhook")
    webhook = stack.created("/v1/endpoints", tenant_key, {"url": consumer.url})
    consumer.control(secret=webhook["secret"])

    queue_url, queue_arn = _queue(stack, f"kinds-queue-{tenant_id[-8:]}")
    sns = stack._aws("sns")
    topic = sns.create_topic(Name=f"kinds-{tenant_id[-8:]}")["TopicArn"]
    from_topic, from_topic_arn = _queue(stack, f"kinds-from-topic-{tenant_id[-8:]}")
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=from_topic_arn, Attributes={"RawMessageDelivery": "true"})
    events = stack._aws("events")
    bus_name = f"kinds-{tenant_id[-8:]}"
    bus = events.create_event_bus(Name=bus_name)["EventBusArn"]
    from_bus, from_bus_arn = _queue(stack, f"kinds-from-bus-{tenant_id[-8:]}")
    events.put_rule(Name="all", EventBusName=bus_name, EventPattern=json.dumps({"source": ["hookrelay"]}))
    events.put_targets(Rule="all", EventBusName=bus_name, Targets=[{"Id": "q", "Arn": from_bus_arn}])
    made = {
        kind: stack.created("/v1/endpoints", tenant_key, {"url": arn, "role_arn": role})
        for kind, arn in (("sqs", queue_arn), ("sns", topic), ("eventbridge", bus))
    }
    assert {kind: endpoint["kind"] for kind, endpoint in made.items()} == {k: k for k in made}
    assert all(endpoint["external_id"] == external_id for endpoint in made.values())

    poll = stack.created("/v1/endpoints", tenant_key, {"kind": "poll"})
    assert poll["kind"] == "poll"

    accepted = stack.publish(tenant_id, "order.created", {"order_id": 29})
    assert len(accepted["delivery_ids"]) == 5
    polled = eventually(
        lambda: stack.call("GET", poll["messages_url"], tenant_key).json()["data"], "the poll endpoint has its message"
    )
    [message] = polled
    assert Webhook(poll["secret"]).verify(message["body"], message["headers"])["data"] == {"order_id": 29}
    acknowledged = stack.call("GET", f"{poll['messages_url']}?after={message['seq']}", tenant_key)
    assert acknowledged.status_code == 200 and acknowledged.json()["data"] == []
    for delivery_id in accepted["delivery_ids"]:
        eventually(
            lambda d=delivery_id: stack.delivery(tenant_key, d)["status"] == "delivered" or None,
            f"delivery {delivery_id} is delivered",
        )

    [request] = consumer.received()["requests"]
    assert Webhook(webhook["secret"]).verify(request["body"], request["signature_headers"])["data"] == {"order_id": 29}
    for endpoint, url in ((made["sqs"], queue_url), (made["sns"], from_topic)):
        message = eventually(lambda u=url: _one_message(stack, u), f"the {endpoint['kind']} message arrives")
        headers = {name: value["StringValue"] for name, value in message["MessageAttributes"].items()}
        assert Webhook(endpoint["secret"]).verify(message["Body"], headers)["id"] == accepted["event_id"]
    put = eventually(lambda: _one_message(stack, from_bus), "the EventBridge event arrives")
    detail = json.loads(put["Body"])
    assert (detail["detail-type"], detail["detail"]["data"]) == ("order.created", {"order_id": 29})
