"""The SNS topics of notices to platform teams (one per `schema.TopicSpec`), encrypted with a customer-managed key."""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from hookrelay.adapters import schema


class Notices(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, specs: Iterable[schema.TopicSpec] = schema.ALL_TOPICS):
        super().__init__(scope, construct_id)
        # One key for the notice topics: rotated, and granted to each publisher with its topic.
        self.key = kms.Key(self, "NoticesKey", enable_key_rotation=True, description="Hookrelay endpoint notices")
        self.topics: dict[str, sns.Topic] = {
            spec.logical_name: sns.Topic(self, spec.logical_name, master_key=self.key, enforce_ssl=True)
            for spec in specs
        }

    def topic(self, spec: schema.TopicSpec) -> sns.Topic:
        return self.topics[spec.logical_name]
