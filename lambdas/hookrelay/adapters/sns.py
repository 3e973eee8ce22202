"""SNS: endpoint notices, with the message attributes subscription filter policies select on."""

from __future__ import annotations

import json
from typing import Any

from hookrelay.services.ports import EndpointNoticeMessage

SUBJECT_MAX = 100  # SNS's limit on a subject (used by email subscriptions)


def notice_attributes(message: EndpointNoticeMessage) -> dict[str, dict[str, str]]:
    values = {"tenant_id": message.tenant_id, "endpoint_id": message.endpoint_id, "kind": message.kind.value}
    return {name: {"DataType": "String", "StringValue": value} for name, value in values.items()}


class SnsEndpointNotices:
    def __init__(self, sns: Any, topic_arn: str) -> None:
        self.sns = sns
        self.topic_arn = topic_arn

    def publish(self, message: EndpointNoticeMessage) -> None:
        self.sns.publish(
            TopicArn=self.topic_arn,
            Subject=message.subject[:SUBJECT_MAX],
            Message=json.dumps(message.body, separators=(",", ":")),
            MessageAttributes=notice_attributes(message),
        )
