"""What an endpoint's url and role may be (domain/destinations.py); the local trust-policy check (local/trust.py)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from hookrelay.domain.destinations import (
    ROLE_NAME_PREFIX,
    TRUST_CHECK_EXTERNAL_ID,
    DestinationKind,
    aws_destination,
    check_role,
    external_id,
    kind_of,
)
from hookrelay.domain.errors import InvalidRequest
from hookrelay.function_permissions import destination_roles
from local import trust

ROLE = "arn:aws:iam::123456789012:role/hookrelay-orders"


@pytest.mark.parametrize(
    ("url", "kind", "fifo"),
    [
        ("https://example.com/hook", DestinationKind.HTTP, False),
        ("arn:aws:sqs:eu-west-1:123456789012:orders", DestinationKind.SQS, False),
        ("arn:aws:sqs:eu-west-1:123456789012:orders.fifo", DestinationKind.SQS, True),
        ("arn:aws:sns:us-east-1:123456789012:orders.fifo", DestinationKind.SNS, True),
        ("arn:aws:events:us-east-1:123456789012:event-bus/orders", DestinationKind.EVENTBRIDGE, False),
    ],
)
def test_each_kind_of_url(url: str, kind: DestinationKind, fifo: bool) -> None:
    assert kind_of(url) is kind
    if kind is not DestinationKind.HTTP:
        assert aws_destination(url).fifo is fifo


def test_a_queue_s_url_is_derived_from_its_arn_in_its_partition() -> None:
    assert aws_destination("arn:aws:sqs:eu-west-1:123456789012:q").queue_url == (
        "https://sqs.eu-west-1.amazonaws.com/123456789012/q"
    )
    assert aws_destination("arn:aws-cn:sqs:cn-north-1:123456789012:q").queue_url == (
        "https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q"
    )


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:lambda:us-east-1:123456789012:function:f",  # not a destination kind
        "arn:aws:sqs:us-east-1:12345:q",  # account not 12 digits
        "arn:aws:sqs:us-east-1:123456789012:q/../x",  # not a queue name
        "arn:aws:events:us-east-1:123456789012:rule/r",  # a rule, not a bus
    ],
)
def test_other_arns_are_refused_saying_what_is_accepted(arn: str) -> None:
    with pytest.raises(InvalidRequest, match="ARN of an SQS queue"):
        aws_destination(arn)


def test_a_role_is_required_for_aws_refused_for_webhooks_and_held_to_the_prefix_and_account() -> None:
    queue = "arn:aws:sqs:us-east-1:123456789012:orders"
    assert check_role(queue, ROLE) == ROLE
    assert check_role("https://example.com/", None) is None
    for url, role, problem in [
        (queue, None, "needs role_arn"),
        ("https://example.com/", ROLE, "only for AWS destinations"),
        (queue, "arn:aws:iam::123456789012:role/admin", f"must start with {ROLE_NAME_PREFIX!r}"),
        (queue, "arn:aws:iam::999999999999:role/hookrelay-x", "in the destination's account"),
        (queue, "arn:aws:iam::123456789012:user/hookrelay-x", "must be an IAM role ARN"),
    ]:
        with pytest.raises(InvalidRequest, match=problem):
            check_role(url, role)


def test_the_grant_names_only_prefixed_roles_and_no_tenant_has_the_trust_check_s_external_id() -> None:
    assert destination_roles("aws") == f"arn:aws:iam::*:role/{ROLE_NAME_PREFIX}*"
    assert external_id("ten_01ABC") == "hookrelay-ten_01ABC" != TRUST_CHECK_EXTERNAL_ID


def _policy(condition: dict[str, Any] | None, principal: Any = None, effect: str = "Allow") -> dict[str, Any]:
    statement: dict[str, Any] = {
        "Effect": effect,
        "Principal": principal or {"AWS": trust.caller_role("delivery")},
        "Action": "sts:AssumeRole",
    }
    if condition is not None:
        statement["Condition"] = condition
    return {"Statement": [statement]}


def _assume(document: dict[str, Any] | None, external: str = "hookrelay-ten_1") -> None:
    def unchecked(client: Any, operation: str, params: dict[str, Any]) -> Any:
        if document is None:
            raise ClientError({"Error": {"Code": "NoSuchEntity"}}, "GetRole")
        return {"Role": {"Arn": ROLE, "AssumeRolePolicyDocument": document}}

    trust.check("delivery", {"RoleArn": ROLE, "ExternalId": external}, unchecked)


@pytest.mark.parametrize(
    "document",
    [
        _policy({"StringEquals": {"sts:ExternalId": "hookrelay-ten_1"}}),
        _policy({"StringLike": {"sts:ExternalId": "hookrelay-ten_*"}}),
        _policy(None, principal={"AWS": "123456789012"}),
        _policy(None, principal="*"),
    ],
)
def test_trust_allows_what_sts_allows(document: dict[str, Any]) -> None:
    _assume(document)


@pytest.mark.parametrize(
    "document",
    [
        None,  # no such role
        _policy({"StringEquals": {"sts:ExternalId": "hookrelay-ten_2"}}),
        _policy({"StringEquals": {"sts:ExternalId": "hookrelay-ten_1"}}, principal={"AWS": "arn:aws:iam::1:role/x"}),
        _policy({"StringEquals": {"aws:SourceIp": "10.0.0.1"}}),  # a condition this check does not know: not met
        {"Statement": [*_policy(None)["Statement"], *_policy(None, effect="Deny")["Statement"]]},
    ],
)
def test_trust_refuses_what_sts_refuses(document: dict[str, Any] | None) -> None:
    with pytest.raises(ClientError) as refused:
        _assume(document)
    assert refused.value.response["Error"]["Code"] == "AccessDenied"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_the_docs_name_the_code_s_prefix_source_and_output() -> None:
    """The consumer guide and the README say what the code does (one source of truth: tested, not copied)."""
    from pathlib import Path

    from hookrelay.domain.destinations import EVENTBRIDGE_SOURCE
    from stacks.config import DELIVERY_ROLE_OUTPUT

    root = Path(__file__).resolve().parents[2]
    guide = (root / "docs" / "consumer-guide.md").read_text()
    readme = (root / "README.md").read_text()
    assert f"named\n`{ROLE_NAME_PREFIX}…`" in guide or f"named `{ROLE_NAME_PREFIX}…`" in guide
    assert f"`source` `{EVENTBRIDGE_SOURCE}`" in guide
    assert f"`{DELIVERY_ROLE_OUTPUT}`" in readme and f"`{DELIVERY_ROLE_OUTPUT}`" in guide


def test_a_poll_endpoint_s_url_is_its_own_kind_and_a_posted_delivery_awaits_no_message() -> None:
    from dataclasses import replace

    from hookrelay.domain.clock import utcnow
    from hookrelay.domain.destinations import POLL_URL
    from hookrelay.domain.lifecycle import awaits_first_message
    from hookrelay.domain.status import DeliveryStatus
    from tests.support.records import make

    assert kind_of(POLL_URL) is DestinationKind.POLL
    delivery = make("ten_1", "ep_1", utcnow(), DeliveryStatus.QUEUED).delivery
    assert awaits_first_message(delivery)
    assert not awaits_first_message(replace(delivery, posted_at=delivery.created_at, mailbox_seq=1))
