#!/usr/bin/env python3
"""A platform team's own CDK app embedding Hookrelay twice, dev and prod, in one account (docs/embedding.md).

    pip install dist/hookrelay-*.whl aws-cdk-lib constructs cdk-nag    # or the wheel's `cdk` extra
    cd examples/cdk_app && npx cdk synth

Each stage is a stack of the team's own, named by the team's rules; Hookrelay sits in it as one construct with a
name prefix per stage, so the two never collide on a physical name. Prod sends its alarms to the team's existing
on-call topic and serves the API on its own domain, with a certificate made and DNS-validated in the team's zone.
No lookups: it synthesizes with no AWS account.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import App, Environment, RemovalPolicy, Stack, Validations
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_sns as sns
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from hookrelay_cdk import HookRelay, HookRelayProps

ACCOUNT = "111111111111"
REGION = "eu-west-1"
ON_CALL_TOPIC_ARN = f"arn:aws:sns:{REGION}:{ACCOUNT}:platform-oncall"
ZONE_ID = "Z0123456789ABCDEFGHIJ"
ZONE_NAME = "example.com"
PROD_DOMAIN = "hooks.example.com"


class DevWebhooks(Stack):
    """Throwaway: tables and logs go with the stack, the short retry schedule, alarms to the construct's topic."""

    def __init__(self, scope: Construct, construct_id: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.webhooks = HookRelay(
            self,
            "Webhooks",
            HookRelayProps(
                name_prefix="platform-dev-hooks",
                retry_schedule="short",
                table_removal_policy=RemovalPolicy.DESTROY,
                table_deletion_protection=False,
            ),
        )


class ProdWebhooks(Stack):
    """Kept: tables retained, two delivery shards, the team's on-call topic, the API at hooks.example.com."""

    def __init__(self, scope: Construct, construct_id: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        zone = route53.HostedZone.from_hosted_zone_attributes(self, "Zone", hosted_zone_id=ZONE_ID, zone_name=ZONE_NAME)
        self.webhooks = HookRelay(
            self,
            "Webhooks",
            HookRelayProps(
                name_prefix="platform-prod-hooks",
                delivery_shards=2,
                delivery_max_concurrency=100,
                reserved_concurrency={"authorizer": 30, "ingest": 30},
                alarm_topic=sns.Topic.from_topic_arn(self, "OnCall", ON_CALL_TOPIC_ARN),
                domain_name=PROD_DOMAIN,
                hosted_zone=zone,
            ),
        )


def build_app(outdir: str | None = None) -> tuple[App, list[Stack]]:
    app = App(outdir=outdir)
    env = Environment(account=ACCOUNT, region=REGION)
    stacks: list[Stack] = [
        DevWebhooks(app, "PlatformWebhooks-dev", env=env),
        ProdWebhooks(app, "PlatformWebhooks-prod", env=env),
    ]
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))  # as Hookrelay's own app checks itself
    return app, stacks


if __name__ == "__main__":
    build_app()[0].synth()
