"""The HookRelay construct's props: the stage file's settings under the same names and defaults, checked by the
same readers (stacks/config.py); the app's own stack built from them keeps every stateful resource's logical ID."""

from __future__ import annotations

import re
from typing import Any

import pytest

from stacks import config, stage
from stacks.props import HookRelayProps, Resolved, props_table
from tests.support.synth import ROOT, Synthesized

# The logical IDs of the deployed stack's tables, queues, topics, keys and workflow before the construct existed:
# a changed one makes CloudFormation replace the resource (a new, empty table).
DEPLOYED_IDS = [
    "NoticesEndpointNoticesTopicE565F078",
    "NoticesNoticesKey22BD85B2",
    "ObservabilityAlarmTopicF724909D",
    "ObservabilityAlarmTopicKey48516DE9",
    "QueuesDeadLetterQueue82AA3FB7",
    "QueuesDeliveryQueueAD22072F",
    "QueuesDeliveryQueueShard0Slow84EFEB79",
    "QueuesDeliveryQueueShard19B81A623",
    "QueuesDeliveryQueueShard1Slow9BD7B532",
    "QueuesPoisonQueue66A13921",
    "QueuesRedriveJobsDeadLetterQueue8A295086",
    "QueuesRedriveJobsQueue75BDB4DC",
    "RetryWorkflowStateMachineE5633325",
    "StorageApiKeys7B037C32",
    "StorageDeliveriesE42B5069",
    "StorageEndpointsF05A81BA",
    "StorageEventTypes37E4DCD5",
    "StorageEvents1AF1C090",
    "StorageIdempotency5C96D584",
    "StorageMailboxes442A6634",
    "StorageParkingLot027D8C8F",
    "StoragePortalSessions2D33C212",
    "StorageRateLimitsE7433BBF",
    "StorageRedrives58AE031F",
    "StorageTenants23CFB847",
]


def test_the_apps_stack_keeps_the_deployed_logical_ids(synthesized: Synthesized) -> None:
    resources = synthesized.template["Resources"]
    assert [logical_id for logical_id in DEPLOYED_IDS if logical_id not in resources] == []
    stateful = {"AWS::DynamoDB::Table", "AWS::SQS::Queue", "AWS::StepFunctions::StateMachine"}
    # Every table and queue's ID is its construct path without the construct's own id in it.
    assert all(
        re.fullmatch(r"(Storage|Queues|RetryWorkflow)[A-Za-z0-9]+", logical_id)
        for logical_id, resource in resources.items()
        if resource["Type"] in stateful
    )


def test_default_props_are_the_default_settings() -> None:
    assert HookRelayProps().resolve() == Resolved.from_node(stage.Settings({}))


@pytest.mark.parametrize("stage_name", ["dev", "production"])
def test_props_of_a_stage_file_resolve_to_its_settings(stage_name: str) -> None:
    from aws_cdk import App, Stack

    settings = stage.load(stage_name)
    stack = Stack(App(context=settings), "Stage")
    assert HookRelayProps.from_context(stack).resolve() == Resolved.from_node(stage.Settings(settings))


@pytest.mark.parametrize(
    ("prop", "value"),
    [
        ("delivery_shards", 0),
        ("log_shards", 1000),
        ("retry_schedule", [5, 60]),
        ("lambda_runtime", "python3.9"),
        ("reserved_concurrency", {"nosuchfunction": 3}),
        ("endpoint_ports", "every"),
        ("workflow_log_level", "LOUD"),
        ("alarm_email", "not an address"),
    ],
)
def test_a_bad_prop_is_refused_with_the_stage_files_message(prop: str, value: Any) -> None:
    with pytest.raises(config.InvalidConfiguration) as from_props:
        HookRelayProps(**{prop: value}).resolve()
    with pytest.raises(config.InvalidConfiguration) as from_stage_file:
        Resolved.from_node(stage.Settings(HookRelayProps(**{prop: value}).context()))
    assert str(from_props.value) == str(from_stage_file.value)
    assert prop in str(from_props.value)


def test_an_alarm_topic_and_an_alarm_address_exclude_each_other() -> None:
    from aws_cdk import App, Stack
    from aws_cdk import aws_sns as sns

    stack = Stack(App(), "Topics")
    topic = sns.Topic.from_topic_arn(stack, "OnCall", "arn:aws:sns:eu-west-1:111111111111:oncall")
    with pytest.raises(config.InvalidConfiguration, match="both set"):
        HookRelayProps(alarm_topic=topic, alarm_email="oncall@example.com").resolve()


def test_a_name_prefix_must_fit_every_name_it_starts() -> None:
    with pytest.raises(config.InvalidConfiguration, match="name prefix"):
        HookRelayProps(name_prefix="dev_hooks").resolve()
    HookRelayProps(name_prefix="platform-dev-hooks").resolve()


def test_a_domain_needs_a_certificate_or_a_zone_it_is_in() -> None:
    from aws_cdk import App, Stack
    from aws_cdk import aws_route53 as route53

    stack = Stack(App(), "Domains")
    zone = route53.HostedZone.from_hosted_zone_attributes(
        stack, "Zone", hosted_zone_id="Z0123456789ABC", zone_name="example.com"
    )
    with pytest.raises(config.InvalidConfiguration, match="needs a certificate"):
        HookRelayProps(domain_name="hooks.example.com").resolve()
    with pytest.raises(config.InvalidConfiguration, match="not in the hosted zone"):
        HookRelayProps(domain_name="hooks.example.org", hosted_zone=zone).resolve()
    with pytest.raises(config.InvalidConfiguration, match="without domain_name"):
        HookRelayProps(hosted_zone=zone).resolve()
    HookRelayProps(domain_name="hooks.example.com", hosted_zone=zone).resolve()


CERTIFICATE = "arn:aws:acm:eu-west-1:111111111111:certificate/0f6b2b42-1f3e-4c1a-9d1e-2b7a9a1c0e11"


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"domain_name": "Hooks.Example.com", "certificate_arn": CERTIFICATE}, "is not a domain name"),
        ({"domain_name": "hooks.example.com"}, "needs a certificate"),
        ({"domain_name": "hooks.example.com", "certificate_arn": "arn:aws:acm:nope"}, "is not an ACM ARN"),
        ({"domain_name": "hooks.example.com", "hosted_zone_id": "Z0123456789ABC"}, "go together"),
        (
            {"domain_name": "hooks.example.com", "hosted_zone_id": "zone", "hosted_zone_name": "example.com"},
            "is not a Route 53 zone ID",
        ),
        (
            {"domain_name": "hooks.example.org", "hosted_zone_id": "Z0123456789ABC", "hosted_zone_name": "example.com"},
            "not in the hosted zone",
        ),
        ({"certificate_arn": CERTIFICATE}, "without domain_name"),
    ],
)
def test_the_stage_files_domain_settings_are_checked(context: dict[str, str], message: str) -> None:
    with pytest.raises(config.InvalidConfiguration, match=message):
        config.custom_domain(stage.Settings(context))


def test_the_stage_files_domain_settings() -> None:
    assert config.custom_domain(stage.Settings({})) is None
    domain = config.custom_domain(
        stage.Settings(
            {"domain_name": "hooks.example.com", "hosted_zone_id": "Z01234", "hosted_zone_name": "example.com"}
        )
    )
    assert domain == config.CustomDomain("hooks.example.com", None, "Z01234", "example.com")
    assert {"domain_name", "certificate_arn", "hosted_zone_id", "hosted_zone_name"} <= config.setting_names()


def test_every_setting_of_the_stage_files_but_the_stacks_name_is_a_prop() -> None:
    from dataclasses import fields

    props = {prop.name for prop in fields(HookRelayProps)}
    # The ARN and ID settings become the objects the props take (an imported topic, certificate and zone).
    by_object = {"alarm_topic_arn", "certificate_arn", "hosted_zone_id", "hosted_zone_name"}
    assert config.setting_names() - by_object - {config.STACK_NAME_CONTEXT} <= props


def test_the_embedding_guide_shows_the_props_as_they_are() -> None:
    page = (ROOT / "docs" / "embedding.md").read_text()
    start, end = "<!-- props-table:start -->\n", "<!-- props-table:end -->"
    assert start in page and end in page
    assert page.split(start, 1)[1].split(end, 1)[0] == props_table(), (
        "docs/embedding.md's props table is stale: paste stacks.props.props_table()"
    )


def test_every_prop_is_documented() -> None:
    from dataclasses import fields

    assert all(prop.metadata.get("doc") for prop in fields(HookRelayProps))
