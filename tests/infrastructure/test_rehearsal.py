"""The deploy rehearsal's own checks (scripts/rehearse.py, run by `make test`), on the session's synth: they pass on
the stack as it is, and each fails on the defect it is there to catch."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from scripts import rehearse
from tests.support.synth import Synthesized


def _machine(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    [(logical_id, machine)] = rehearse.state_machines(template).items()
    return logical_id, machine


def _role_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    role = _machine(template)[1]["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    return [
        statement
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role} in resource["Properties"]["Roles"]
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_the_deployed_definition_has_every_token_filled(synthesized: Synthesized) -> None:
    logical_id, _ = _machine(synthesized.template)
    placeholders = rehearse.Placeholders(synthesized.template)
    definition = rehearse.deployed_definition(synthesized.template, logical_id, placeholders, synthesized.outdir)
    text = json.dumps(definition)
    assert "${" not in text
    assert "https://sqs.us-east-1.amazonaws.com/123456789012/QueuesDeadLetterQueue" in text
    assert '"QueueUrl.$": "$.ticket.queue_url"' in text  # the delivery queue: each execution's input names it
    assert "arn:aws:states:::sqs:sendMessage.waitForTaskToken" in text


def test_asl_validator_accepts_the_deployed_definition(synthesized: Synthesized, tmp_path: Path) -> None:
    check = rehearse.check_asl(synthesized.template, synthesized.outdir, tmp_path)
    assert check.ok, check.problems


def test_asl_validator_rejects_a_broken_definition(tmp_path: Path) -> None:
    broken = {"StartAt": "Missing", "States": {"Only": {"Type": "Pass", "Next": "Nowhere"}}}
    template = {
        "Resources": {
            "Machine": {
                "Type": "AWS::StepFunctions::StateMachine",
                "Properties": {"DefinitionString": json.dumps(broken)},
            }
        }
    }
    check = rehearse.check_asl(template, tmp_path, tmp_path)
    assert not check.ok and "MISSING_TRANSITION_TARGET" in check.problems[0]


def test_every_task_of_the_deployed_workflow_is_allowed_by_its_role(synthesized: Synthesized) -> None:
    check = rehearse.check_task_permissions(synthesized.template, synthesized.outdir)
    assert check.ok, check.problems
    assert "sqs:SendMessage on QueuesDeliveryQueue" in check.detail and "QueuesDeadLetterQueue" in check.detail


def test_a_task_the_role_does_not_allow_is_reported(synthesized: Synthesized) -> None:
    template = copy.deepcopy(synthesized.template)
    for statement in _role_statements(template):
        if "sqs:SendMessage" in json.dumps(statement["Action"]):
            statement["Action"] = "sqs:GetQueueUrl"  # the action gone
    check = rehearse.check_task_permissions(template, synthesized.outdir)
    assert not check.ok
    assert any("SendAttempt: sqs:SendMessage" in problem for problem in check.problems), check.problems


def test_a_task_on_a_queue_the_role_does_not_name_is_reported(synthesized: Synthesized) -> None:
    template = copy.deepcopy(synthesized.template)
    for statement in _role_statements(template):
        if "sqs:SendMessage" in json.dumps(statement["Action"]):
            # Only the dead-letter queue left: the retries' sends to the delivery queue would fail.
            statement["Resource"] = [r for r in statement["Resource"] if "DeadLetter" in json.dumps(r)]
    check = rehearse.check_task_permissions(template, synthesized.outdir)
    problems = " ".join(check.problems)
    assert "SendAttempt" in problems and "QueuesDeliveryQueue" in problems
    assert "DeadLetter" not in problems


def test_the_summary_fits_one_screen(synthesized: Synthesized, tmp_path: Path) -> None:
    template_path = synthesized.outdir / f"{synthesized.stack_name}.template.json"
    synth = rehearse.Synth(synthesized.stack_name, template_path, synthesized.template, acknowledged=1)
    checks = [
        rehearse.check_cfn_lint(template_path),
        rehearse.check_asl(synthesized.template, synthesized.outdir, tmp_path),
        rehearse.check_task_permissions(synthesized.template, synthesized.outdir),
    ]
    text = rehearse.summary("dev", synth, checks)
    assert text.endswith("rehearsal passed") and len(text.splitlines()) <= 24
