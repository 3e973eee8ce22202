"""Where an endpoint's deliveries go: an HTTPS URL, or an AWS destination in the consumer's own account.

An endpoint's `url` is either an https:// URL (a webhook) or the ARN of an SQS queue, an SNS topic or an EventBridge
event bus. An AWS destination also names a role in the consumer's account (`role_arn`) that the delivery function
assumes, with an external ID unique to the tenant (`external_id`), to send there. The consumer's trust policy allows
the deployment's delivery role to assume it only with that external ID, so no other tenant of the deployment (each
assumed with its own external ID) can make hookrelay send into that account: the confused-deputy guard AWS
documents for third parties (https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html).

The delivery role may assume only roles whose name starts with `ROLE_NAME_PREFIX` (stacks grant
`sts:AssumeRole` on `arn:<partition>:iam::*:role/<prefix>*` and nothing wider), so a consumer's role is named that
way; registration refuses any other role, with the reason, rather than failing every attempt later.

Same contract as a webhook: every attempt recorded (an AWS error answers with its HTTP status, so the response
table classifies it as it would a webhook's), the retry schedule, the circuit, dead letters, redrive, order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from hookrelay.domain.errors import InvalidRequest

# The consumer's role name must start with this: the delivery role's sts:AssumeRole grant names no other roles.
ROLE_NAME_PREFIX = "hookrelay-"
# The source of the events put on an EventBridge bus (what a consumer's rule matches on).
EVENTBRIDGE_SOURCE = "hookrelay"
# How long an assumed role's credentials are asked for (STS's minimum is 900 s; its default, one hour, is the
# most a role allows unless its owner raised it); they are used until shortly before they run out.
ASSUMED_ROLE_SECONDS = 3600
REFRESH_BEFORE_SECONDS = 300
# An external ID no tenant has, shaped like theirs (`hookrelay-ten_<ULID>`; a ULID has no hyphen): a role that lets
# hookrelay assume it with this one does not require its own tenant's (no condition, or a pattern such as
# `hookrelay-*` that every tenant's matches), and is refused (adapters/aws_destinations.py).
TRUST_CHECK_EXTERNAL_ID = "hookrelay-ten_trust-check"

_PARTITION = r"aws(?:-cn|-us-gov)?"
_REGION = r"[a-z]{2}(?:-[a-z]+)+-\d"
_ACCOUNT = r"\d{12}"
_QUEUE = re.compile(
    rf"^arn:(?P<partition>{_PARTITION}):sqs:(?P<region>{_REGION}):(?P<account>{_ACCOUNT}):"
    r"(?P<name>[A-Za-z0-9_-]{1,75}(?:\.fifo)?)$"
)
_TOPIC = re.compile(
    rf"^arn:(?P<partition>{_PARTITION}):sns:(?P<region>{_REGION}):(?P<account>{_ACCOUNT}):"
    r"(?P<name>[A-Za-z0-9_-]{1,251}(?:\.fifo)?)$"
)
_BUS = re.compile(
    rf"^arn:(?P<partition>{_PARTITION}):events:(?P<region>{_REGION}):(?P<account>{_ACCOUNT}):"
    r"event-bus/(?P<name>[A-Za-z0-9._\-/]{1,256})$"
)
_ROLE = re.compile(
    rf"^arn:(?P<partition>{_PARTITION}):iam::(?P<account>{_ACCOUNT}):role/"
    r"(?:[\w+=,.@-]+/)*(?P<name>[\w+=,.@-]{1,64})$"
)


class DestinationKind(StrEnum):
    HTTP = "http"
    SQS = "sqs"
    SNS = "sns"
    EVENTBRIDGE = "eventbridge"
    POLL = "poll"  # pull delivery: the consumer reads its mailbox (domain/mailbox.py)


# A poll endpoint's stored url: nothing is sent anywhere; its deliveries wait in its mailbox.
POLL_URL = "poll:"


@dataclass(frozen=True)
class AwsDestination:
    kind: DestinationKind
    arn: str
    partition: str
    region: str
    account: str
    name: str

    @property
    def fifo(self) -> bool:
        """A FIFO queue or topic: each message needs a group (ordering) and a deduplication id."""
        return self.kind in (DestinationKind.SQS, DestinationKind.SNS) and self.name.endswith(".fifo")

    @property
    def queue_url(self) -> str:
        """An SQS queue's URL, from its ARN (SQS's calls take the URL)."""
        domain = "amazonaws.com.cn" if self.partition == "aws-cn" else "amazonaws.com"
        return f"https://sqs.{self.region}.{domain}/{self.account}/{self.name}"


_PATTERNS = ((DestinationKind.SQS, _QUEUE), (DestinationKind.SNS, _TOPIC), (DestinationKind.EVENTBRIDGE, _BUS))


def is_aws_target(url: str) -> bool:
    return url.startswith("arn:")


def kind_of(url: str) -> DestinationKind:
    if url == POLL_URL:
        return DestinationKind.POLL
    return aws_destination(url).kind if is_aws_target(url) else DestinationKind.HTTP


def aws_destination(arn: str) -> AwsDestination:
    """The AWS destination an ARN names; InvalidRequest (422) for anything else, saying what is accepted."""
    for kind, pattern in _PATTERNS:
        if found := pattern.match(arn):
            return AwsDestination(kind, arn, found["partition"], found["region"], found["account"], found["name"])
    raise InvalidRequest(
        "url must be an https:// URL or the ARN of an SQS queue (arn:aws:sqs:<region>:<account>:<name>), "
        "an SNS topic (arn:aws:sns:<region>:<account>:<name>) or an EventBridge event bus "
        "(arn:aws:events:<region>:<account>:event-bus/<name>)"
    )


def check_role(url: str, role_arn: str | None) -> str | None:
    """The role an endpoint's url needs: one for an AWS destination (in the destination's account and partition,
    named with ROLE_NAME_PREFIX), none for a webhook. InvalidRequest says which rule a request broke."""
    if not is_aws_target(url):
        if role_arn is not None:
            raise InvalidRequest("role_arn is only for AWS destinations (an SQS, SNS or EventBridge ARN as url)")
        return None
    destination = aws_destination(url)
    if role_arn is None:
        raise InvalidRequest("an AWS destination needs role_arn: the role in your account hookrelay assumes to send")
    role = _ROLE.match(role_arn)
    if role is None:
        raise InvalidRequest("role_arn must be an IAM role ARN (arn:aws:iam::<account>:role/<name>)")
    if not role["name"].startswith(ROLE_NAME_PREFIX):
        raise InvalidRequest(
            f"the role's name must start with {ROLE_NAME_PREFIX!r}: the only roles hookrelay may assume"
        )
    if role["account"] != destination.account or role["partition"] != destination.partition:
        raise InvalidRequest("role_arn must be in the destination's account")
    return role_arn


def external_id(tenant_id: str) -> str:
    """The external ID hookrelay gives when it assumes a tenant's roles: the tenant's own, never another's."""
    return f"hookrelay-{tenant_id}"


def session_name(endpoint_id: str) -> str:
    """The assumed role's session name (64 characters at most): which endpoint, in the consumer's CloudTrail."""
    return f"hookrelay-{endpoint_id}"[:64]
