"""What a real account does with the template that synth alone would not say: the deploy traps of the "AWS fidelity"
issue, each pinned where it was found (the session's synth is the default stage, deployed as `make deploy` does).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.synth import ROOT, Synthesized, cdk_json_context

README = ROOT / "README.md"
# The lowest Lambda concurrency quota a new account is given (AWS lowers it on new accounts until they have history),
# and the unreserved concurrency Lambda keeps (PutFunctionConcurrency: "leave at least 100 ... unreserved").
NEW_ACCOUNT_QUOTA = 10
LAMBDA_MINIMUM_UNRESERVED = 100


def _reserved_total(template: dict[str, Any]) -> int:
    return sum(
        int(resource["Properties"].get("ReservedConcurrentExecutions", 0))
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::Lambda::Function"
    )


def _event_source_maxima(template: dict[str, Any]) -> list[int]:
    return [
        int(resource["Properties"]["ScalingConfig"]["MaximumConcurrency"])
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::Lambda::EventSourceMapping" and "ScalingConfig" in resource["Properties"]
    ]


def test_the_default_deployment_fits_a_new_accounts_concurrency_quota(synthesized: Synthesized) -> None:
    """Defect 5: 30 + 30 reserved fails CloudFormation on a quota of 10 (no reservation fits under 100 + n); an event
    source allowed 100 at once on a pool of 10 is throttled, and throttled receives count toward maxReceiveCount."""
    reserved = _reserved_total(synthesized.template)
    assert reserved == 0 or reserved <= NEW_ACCOUNT_QUOTA - LAMBDA_MINIMUM_UNRESERVED, reserved
    maxima = _event_source_maxima(synthesized.template)
    assert maxima, "expected the delivery event source's maximum concurrency"
    # Half the unreserved pool at most: the API's functions share the other half.
    assert all(maximum <= (NEW_ACCOUNT_QUOTA - reserved) // 2 for maximum in maxima), maxima


def test_the_workflow_logs_to_a_vended_logs_group(synthesized: Synthesized) -> None:
    """Defect 7: Step Functions adds each log group outside /aws/vendedlogs/ to the account's logs resource policy
    (5,120 characters for all of them); AWS's guidance is the prefix."""
    [machine] = synthesized.properties("AWS::StepFunctions::StateMachine")
    destinations = machine["LoggingConfiguration"]["Destinations"]
    for destination in destinations:
        group_id = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
        name = synthesized.template["Resources"][group_id]["Properties"].get("LogGroupName")
        assert isinstance(name, str), f"the workflow's log group {group_id} is named by CloudFormation: {name!r}"
        assert name.startswith("/aws/vendedlogs/states/"), name


def test_the_api_url_output_has_no_trailing_slash(synthesized: Synthesized) -> None:
    """Defect 11: the README appends "/v1/..." to ApiUrl; a trailing slash made that "//v1/..."."""
    value = synthesized.template["Outputs"]["ApiUrl"]["Value"]
    parts = value["Fn::Join"][1] if isinstance(value, dict) and "Fn::Join" in value else [value]
    last = parts[-1]
    if isinstance(last, dict) and "Fn::GetAtt" in last:
        # An HTTP API's ApiEndpoint attribute ends at the host (CloudFormation's example:
        # https://abcdef123.execute-api.us-west-2.amazonaws.com); a stage's URL is that plus "/" and the stage.
        resource, attribute = last["Fn::GetAtt"]
        assert (synthesized.template["Resources"][resource]["Type"], attribute) == (
            "AWS::ApiGatewayV2::Api",
            "ApiEndpoint",
        )
    else:
        assert isinstance(last, str) and not last.endswith("/"), parts


def _readme_shell_lines() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.DOTALL)
    return [line for block in blocks for line in block.splitlines()]


def test_every_readme_deploy_runs_unattended_with_its_stage() -> None:
    """Defects 8 and 11: a `cdk deploy` without the stage drops what the stage set (the alarm subscription, the stack
    name); without --require-approval never, a non-interactive deploy stops at the IAM-change prompt."""
    deploys = [line for line in _readme_shell_lines() if re.search(r"\bcdk deploy\b", line)]
    for line in deploys:
        assert "--require-approval never" in line and "-c stage=" in line, line
    commands = [line for line in _readme_shell_lines() if re.search(r"\bcdk deploy\b|make deploy", line)]
    assert commands, "the README deploys with make deploy"


def test_a_plain_redeploy_keeps_the_stage_files_alarm_subscription_and_stack_name(tmp_path: Path) -> None:
    """Defect 8: settings given only as -c on the first deploy are gone from the next plain `cdk deploy`; the stage
    file is read by every deploy, so the second synth (no -c at all) gives the same stack and subscription."""
    from stacks.app import build_app

    stages = tmp_path / "deploy"
    stages.mkdir()
    (stages / "next.json").write_text(json.dumps({"stack_name": "HookrelayNext", "alarm_email": "oncall@example.com"}))
    # What `npx cdk deploy -c stage=next` hands the app: cdk.json's context plus the stage.
    app, stack = build_app({**cdk_json_context(), "stage": "next"}, outdir=str(tmp_path / "out"), stage_dir=stages)
    assert stack.stack_name == "HookrelayNext"
    template = app.synth().get_stack_by_name("HookrelayNext").template
    subscriptions = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::SNS::Subscription"]
    assert [(s["Protocol"], s["Endpoint"]) for s in subscriptions] == [("email", "oncall@example.com")]


@pytest.mark.parametrize("setting", ["alarm_email", "reserved_concurrency", "delivery_max_concurrency"])
def test_cdk_json_holds_no_deployment_setting(setting: str) -> None:
    """Defect 8: a deployment setting in cdk.json as well as the stage file would be two sources of truth (and
    cdk.json's empty alarm_email is what a plain deploy applied)."""
    assert setting not in cdk_json_context()
