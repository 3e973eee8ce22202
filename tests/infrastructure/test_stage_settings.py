"""Stage files (deploy/<stage>.json): the one reviewed place for a deployment's settings, checked on every synth."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stacks import config, stage
from tests.support.synth import cdk_json_context

STAGE_FILES = sorted(stage.STAGE_DIR.glob("*.json"))
TOPIC = "arn:aws:sns:us-east-1:123456789012:oncall"


def _stages(tmp_path: Path, **files: dict[str, Any]) -> Path:
    for name, settings in files.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(settings))
    return tmp_path


def test_the_settings_a_stage_file_may_hold_are_the_ones_synth_reads() -> None:
    assert {
        "stack_name",
        "alarm_email",
        "alarm_topic_arn",
        "retry_schedule",
        "auto_disable_after_days",
        "delivery_max_concurrency",
        "reserved_concurrency",
        "api_key_rate_per_second",
        "enforce_event_catalogue",
        "endpoint_ports",
        "max_endpoints_per_tenant",
        "max_filters_per_endpoint",
        "workflow_log_level",
        "xray_tracing",
    } <= config.setting_names()
    assert stage.STAGE_CONTEXT not in config.setting_names()


@pytest.mark.parametrize("path", STAGE_FILES, ids=lambda p: p.stem)
def test_every_committed_stage_file_passes_synths_checks(path: Path) -> None:
    node: Any = stage.Settings(stage.load(path.stem))
    config.retry_schedule(node)
    config.auto_disable_policy(node)
    config.concurrency(node)
    config.api_key_rate(node)
    config.alarm_email(node)
    config.alarm_topic_arn(node)
    config.enforce_event_catalogue(node)
    config.endpoint_ports(node)
    config.tenant_limits(node)
    config.telemetry(node)
    config.stack_name(node)


def test_the_default_stage_is_committed() -> None:
    assert stage.stage_name(None) == stage.DEFAULT_STAGE
    assert (stage.STAGE_DIR / f"{stage.DEFAULT_STAGE}.json").is_file()


def test_an_unknown_key_is_refused_by_name(tmp_path: Path) -> None:
    stages = _stages(tmp_path, typo={"alarm_emial": "oncall@example.com", "stack_name": config.DEFAULT_STACK_NAME})
    with pytest.raises(stage.InvalidStage, match=r"typo.json: unknown setting 'alarm_emial'; the settings are "):
        stage.load("typo", stages)


def test_an_unknown_key_fails_synth_before_anything_is_built(tmp_path: Path) -> None:
    from stacks.app import build_app

    stages = _stages(tmp_path, typo={"reserved_concurency": {}})
    with pytest.raises(stage.InvalidStage, match="reserved_concurency"):
        build_app({**cdk_json_context(), "stage": "typo"}, outdir=str(tmp_path / "out"), stage_dir=stages)


@pytest.mark.parametrize(("text", "message"), [("[1, 2]", "JSON object"), ("{", "not valid JSON")])
def test_a_stage_file_that_is_not_an_object_is_refused(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "bad.json").write_text(text)
    with pytest.raises(stage.InvalidStage, match=message):
        stage.load("bad", tmp_path)


def test_a_missing_stage_names_the_ones_there_are(tmp_path: Path) -> None:
    stages = _stages(tmp_path, dev={}, prod={})
    with pytest.raises(stage.InvalidStage, match=r"stage 'staging' \(stages: dev, prod\)"):
        stage.load("staging", stages)


@pytest.mark.parametrize("name", ["../etc/passwd", "Prod", "a/b", 3])
def test_a_stage_name_that_is_not_a_file_of_deploy_is_refused(name: object) -> None:
    with pytest.raises(stage.InvalidStage):
        stage.stage_name(name)


def test_a_command_line_setting_wins_for_a_one_off(tmp_path: Path) -> None:
    stages = _stages(tmp_path, next={"stack_name": "HookrelayNext", "delivery_max_concurrency": 5})
    resolved = stage.resolve({"stage": "next", "delivery_max_concurrency": "8", "@aws-cdk/x": True}, stages)
    assert resolved == {"stack_name": "HookrelayNext", "delivery_max_concurrency": "8"}


@pytest.mark.parametrize("bad", ["1stack", "has space", "x" * 129, "under_score"])
def test_a_stack_name_cloudformation_refuses_is_refused_at_synth(bad: str) -> None:
    with pytest.raises(config.InvalidConfiguration, match="stack_name"):
        config.stack_name(stage.Settings({"stack_name": bad}))  # type: ignore[arg-type]


def test_an_alarm_topic_and_an_alarm_email_together_are_refused() -> None:
    node: Any = stage.Settings({"alarm_topic_arn": TOPIC, "alarm_email": "oncall@example.com"})
    with pytest.raises(config.InvalidConfiguration, match="both set"):
        config.alarm_topic_arn(node)
    with pytest.raises(config.InvalidConfiguration, match="alarm_topic_arn"):
        config.alarm_topic_arn(stage.Settings({"alarm_topic_arn": "oncall"}))  # type: ignore[arg-type]


def test_one_off_overrides_reach_the_template_an_existing_alarm_topic_included(tmp_path: Path) -> None:
    """`-c stack_name=… -c alarm_email= -c alarm_topic_arn=…` over a stage file naming another stack and an address:
    the command line wins, and the alarms notify the existing topic (no topic, key or subscription of the stack's)."""
    from stacks.app import build_app

    stages = _stages(tmp_path, next={"stack_name": "HookrelayNext", "alarm_email": "oncall@example.com"})
    context = {
        **cdk_json_context(),
        "stage": "next",
        "stack_name": "HookrelayOneOff",
        "alarm_email": "",
        "alarm_topic_arn": TOPIC,
    }
    app, stack = build_app(context, outdir=str(tmp_path / "out"), stage_dir=stages)
    assert stack.stack_name == "HookrelayOneOff"
    template = app.synth().get_stack_by_name("HookrelayOneOff").template  # cdk-nag runs here too
    types = [resource["Type"] for resource in template["Resources"].values()]
    assert "AWS::SNS::Subscription" not in types
    assert not any("AlarmTopic" in logical_id for logical_id in template["Resources"])
    assert template["Outputs"]["AlarmTopicArn"]["Value"] == TOPIC
    actions = [
        r["Properties"]["AlarmActions"] for r in template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Alarm"
    ]
    assert actions and all(action == [TOPIC] for action in actions)
