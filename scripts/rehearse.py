"""A deploy rehearsal with no AWS account (`make rehearse`, part of `make test`): everything that can be checked of a
stage's deployment before CloudFormation sees it, summarised on one screen.

    python -m scripts.rehearse [--stage dev]

- synth of the stage as `cdk deploy -c stage=<stage>` synthesizes it, with cdk-nag's AWS Solutions checks (synth
  fails on an unacknowledged finding);
- cfn-lint on the template;
- the npm asl-validator on every state machine's definition as deployed: the template's DefinitionString with its
  tokens (queue URLs, ARNs, the partition) replaced by placeholder values of the right shape;
- every Task of each deployed definition is allowed by its state machine's role in the template (action and
  resource), so a task the role cannot perform fails here, not as States.TaskFailed in production.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hookrelay.adapters import schema

ROOT = Path(__file__).resolve().parents[1]
ASL_VALIDATOR = ROOT / "node_modules" / ".bin" / "asl-validator"

# Placeholder account values for the template's pseudo parameters.
PSEUDO = {
    "AWS::Partition": "aws",
    "AWS::Region": "us-east-1",
    "AWS::AccountId": "123456789012",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackName": "Rehearsal",
}
# cfn-lint findings that CDK's synthesis itself produces, each with why it is harmless.
ACCEPTED_CFN_LINT = {
    "W3005": "CDK adds an explicit DependsOn on a function's (or state machine's) role next to the Role GetAtt: "
    "redundant ordering, not a defect.",
}
# A service integration's request parameter that names the resource it acts on, by service.
TASK_RESOURCE_PARAMETER = {
    "sqs": "QueueUrl",
    "sns": "TopicArn",
    "lambda": "FunctionName",
    "dynamodb": "TableName",
    "states": "StateMachineArn",
    "events": "*",  # PutEvents: the bus is in the entries; checked against any resource
}


# Resources a task chooses at run time (its parameter given by a path, `QueueUrl.$`) among a known set: the logical id
# prefix of that set in the template. The retry workflow sends each attempt and probe command to the delivery queue
# its input names (statemachine/retry.asl.json): any delivery queue, every shard's lanes.
RUN_TIME_CHOICES = {("sqs", "QueueUrl"): ("AWS::SQS::Queue", "Queues" + schema.DELIVERY_QUEUE.logical_name)}


class Unresolvable(ValueError):
    pass


class Placeholders:
    """Stand-in values for a template's tokens, and which resource each stands for (to check IAM resources)."""

    def __init__(self, template: dict[str, Any]) -> None:
        self.resources: dict[str, dict[str, Any]] = template.get("Resources", {})
        self.owner: dict[str, str] = {}  # placeholder value -> logical id

    def of_type(self, resource_type: str, prefix: str) -> list[str]:
        """The resources of the type whose logical ids start with `prefix` (CDK's: the construct path, a hash)."""
        return sorted(
            logical_id
            for logical_id, resource in self.resources.items()
            if resource["Type"] == resource_type and logical_id.startswith(prefix)
        )

    def _account(self) -> tuple[str, str, str]:
        return PSEUDO["AWS::Partition"], PSEUDO["AWS::Region"], PSEUDO["AWS::AccountId"]

    def arn(self, logical_id: str) -> str:
        partition, region, account = self._account()
        kind = self.resources[logical_id]["Type"]
        service, _, resource = kind.removeprefix("AWS::").partition("::")
        shapes = {
            "AWS::SQS::Queue": f"arn:{partition}:sqs:{region}:{account}:{logical_id}",
            "AWS::SNS::Topic": f"arn:{partition}:sns:{region}:{account}:{logical_id}",
            "AWS::Lambda::Function": f"arn:{partition}:lambda:{region}:{account}:function:{logical_id}",
            "AWS::DynamoDB::Table": f"arn:{partition}:dynamodb:{region}:{account}:table/{logical_id}",
            "AWS::StepFunctions::StateMachine": f"arn:{partition}:states:{region}:{account}:stateMachine:{logical_id}",
            "AWS::Logs::LogGroup": f"arn:{partition}:logs:{region}:{account}:log-group:{logical_id}:*",
            "AWS::IAM::Role": f"arn:{partition}:iam::{account}:role/{logical_id}",
            "AWS::KMS::Key": f"arn:{partition}:kms:{region}:{account}:key/{logical_id}",
        }
        value = shapes.get(
            kind, f"arn:{partition}:{service.lower()}:{region}:{account}:{resource.lower()}/{logical_id}"
        )
        self.owner[value] = logical_id
        return value

    def ref(self, logical_id: str) -> str:
        if logical_id in PSEUDO:
            return PSEUDO[logical_id]
        if logical_id not in self.resources:
            raise Unresolvable(f"Ref to {logical_id}: not a resource (a parameter?)")
        kind = self.resources[logical_id]["Type"]
        if kind == "AWS::SQS::Queue":
            _, region, account = self._account()
            value = f"https://sqs.{region}.{PSEUDO['AWS::URLSuffix']}/{account}/{logical_id}"
        elif kind in ("AWS::SNS::Topic", "AWS::StepFunctions::StateMachine"):
            value = self.arn(logical_id)
        else:
            value = logical_id  # a name: tables, functions, log groups
        self.owner[value] = logical_id
        return value

    def get_att(self, logical_id: str, attribute: str) -> str:
        if attribute == "Arn":
            return self.arn(logical_id)
        if attribute == "QueueUrl":
            return self.ref(logical_id)
        if attribute in ("QueueName", "TopicName", "Name"):
            self.owner[logical_id] = logical_id
            return logical_id
        raise Unresolvable(f"GetAtt {logical_id}.{attribute}")

    def resolve(self, value: Any) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and len(value) == 1:
            [(function, argument)] = value.items()
            if function == "Ref":
                return self.ref(argument)
            if function == "Fn::GetAtt":
                return self.get_att(*argument)
            if function == "Fn::Join":
                separator, parts = argument
                return separator.join(self.resolve(part) for part in parts)
            if function == "Fn::Sub" and isinstance(argument, str) and "${" not in argument:
                return argument
        raise Unresolvable(f"cannot stand in for {json.dumps(value)[:120]}")


@dataclass
class Check:
    name: str
    problems: list[str] = field(default_factory=list)
    detail: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems


def state_machines(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        logical_id: resource
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::StepFunctions::StateMachine"
    }


def deployed_definition(
    template: dict[str, Any], logical_id: str, placeholders: Placeholders, asset_dir: Path
) -> dict[str, Any]:
    """The definition Step Functions would receive, its tokens filled by placeholders: DefinitionString, or the file
    CDK uploads as an asset (DefinitionS3Location, which `DefinitionBody.from_file` makes), then the substitutions."""
    properties = template["Resources"][logical_id]["Properties"]
    if "DefinitionString" in properties:
        text = placeholders.resolve(properties["DefinitionString"])
    elif "Definition" in properties:
        text = json.dumps(properties["Definition"])
    else:
        key = properties["DefinitionS3Location"]["Key"]
        text = (asset_dir / f"asset.{key}").read_text()  # CDK names a file asset asset.<hash>.<extension>
    for name, value in properties.get("DefinitionSubstitutions", {}).items():
        text = text.replace("${" + name + "}", placeholders.resolve(value))
    definition: dict[str, Any] = json.loads(text)
    return definition


def _states(definition: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, state in definition.get("States", {}).items():
        yield name, state
        for branch in state.get("Branches", []):
            yield from _states(branch)
        for key in ("Iterator", "ItemProcessor"):
            if key in state:
                yield from _states(state[key])


def task_permissions(definition: dict[str, Any], placeholders: Placeholders) -> list[tuple[str, str, str]]:
    """(state, IAM action, resource ARN) for every Task: what the role must allow for the task to run."""
    needed = []
    for name, state in _states(definition):
        if state.get("Type") != "Task":
            continue
        resource = state["Resource"]
        parameters = state.get("Parameters", state.get("Arguments", {}))
        if ":states:::" not in resource:  # a plain Lambda function ARN
            needed.append((name, "lambda:InvokeFunction", resource))
            continue
        service, _, api = resource.split(":states:::", 1)[1].partition(":")
        action = f"{service}:{api.split('.')[0][:1].upper()}{api.split('.')[0][1:]}"
        parameter = TASK_RESOURCE_PARAMETER.get(service)
        if parameter is None:
            raise Unresolvable(f"state {name}: no rule for the {service} integration's resource (add one)")
        if f"{parameter}.$" in parameters and (service, parameter) in RUN_TIME_CHOICES:
            # Chosen at run time among known resources: the role must allow every one of them.
            resource_type, prefix = RUN_TIME_CHOICES[(service, parameter)]
            choices = placeholders.of_type(resource_type, prefix)
            needed += [(name, action, placeholders.arn(choice)) for choice in choices]
            continue
        if parameter == "*" or f"{parameter}.$" in parameters:
            needed.append((name, action, "*"))  # chosen at run time: only a wildcard statement allows it
            continue
        value = parameters[parameter]
        owner = placeholders.owner.get(value)
        needed.append((name, action, placeholders.arn(owner) if owner else value))
    return needed


def role_allows(template: dict[str, Any], role_id: str, placeholders: Placeholders, action: str, arn: str) -> bool:
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::IAM::Policy" or {"Ref": role_id} not in resource["Properties"]["Roles"]:
            continue
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            if statement.get("Effect") != "Allow":
                continue
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            if not any(fnmatch.fnmatchcase(action.lower(), a.lower()) for a in actions):
                continue
            if any(fnmatch.fnmatchcase(arn, placeholders.resolve(r)) for r in resources):
                return True
    return False


def check_task_permissions(template: dict[str, Any], asset_dir: Path) -> Check:
    check = Check("state machine role allows its tasks")
    allowed: Counter[str] = Counter()
    for logical_id, machine in state_machines(template).items():
        placeholders = Placeholders(template)
        definition = deployed_definition(template, logical_id, placeholders, asset_dir)
        role_id = machine["Properties"]["RoleArn"]["Fn::GetAtt"][0]
        for state, action, arn in task_permissions(definition, placeholders):
            if role_allows(template, role_id, placeholders, action, arn):
                allowed[f"{action} on {placeholders.owner.get(arn, arn)}"] += 1
            else:
                check.problems.append(f"{logical_id}.{state}: {action} on {arn} is not allowed by {role_id}")
    check.detail = ", ".join(f"{what} ({n})" for what, n in sorted(allowed.items())) or "no tasks"
    return check


def check_asl(template: dict[str, Any], asset_dir: Path, workdir: Path) -> Check:
    check = Check("asl-validator (definitions as deployed)")
    machines = state_machines(template)
    states = 0
    for logical_id in machines:
        definition = deployed_definition(template, logical_id, Placeholders(template), asset_dir)
        path = workdir / f"{logical_id}.asl.json"
        path.write_text(json.dumps(definition, indent=2))
        result = subprocess.run(  # noqa: S603 (the project's own pinned validator)
            [str(ASL_VALIDATOR), "--json-path", str(path)], capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            check.problems.append(f"{logical_id}: {(result.stdout + result.stderr).strip()}")
        states += sum(1 for _ in _states(definition))
    check.detail = f"{len(machines)} state machine(s), {states} states, valid"
    if not machines:
        check.problems.append("no state machine in the template")
    return check


def check_cfn_lint(template_path: Path) -> Check:
    from cfnlint.api import lint_file

    check = Check("cfn-lint")
    matches = lint_file(template_path)
    accepted = Counter(m.rule.id for m in matches if m.rule.id in ACCEPTED_CFN_LINT)
    check.problems = [f"{m.rule.id} {m.message}" for m in matches if m.rule.id not in ACCEPTED_CFN_LINT]
    check.detail = f"{len(check.problems)} findings" + (
        f"; accepted {', '.join(f'{rule} x{n}' for rule, n in accepted.items())}" if accepted else ""
    )
    return check


@dataclass(frozen=True)
class Synth:
    stack_name: str
    template_path: Path
    template: dict[str, Any]
    acknowledged: int  # cdk-nag findings acknowledged, each with its reason (stacks/nag.py)


def synth(stage_name: str, outdir: Path) -> Synth:
    """The stage as `cdk deploy -c stage=<stage>` synthesizes it: cdk.json's context, then the stage file."""
    from aws_cdk import Validations

    from stacks.app import build_app
    from stacks.stage import STAGE_CONTEXT

    context = {**json.loads((ROOT / "cdk.json").read_text())["context"], STAGE_CONTEXT: stage_name}
    app, stack = build_app(context, outdir=str(outdir))
    app.synth()  # cdk-nag's AwsSolutionsChecks run here: an unacknowledged finding raises
    template_path = outdir / stack.template_file
    metadata_path = outdir / f"{stack.stack_name}.metadata.json"
    metadata = json.loads(metadata_path.read_text()) if metadata_path.exists() else {}
    acknowledged = sum(
        len(entry["data"])
        for entries in metadata.values()
        for entry in entries
        if entry["type"] == Validations.ACKNOWLEDGED_RULES_METADATA_KEY
    )
    return Synth(stack.stack_name, template_path, json.loads(template_path.read_text()), acknowledged)


def rehearse(stage_name: str, workdir: Path) -> tuple[Synth, list[Check]]:
    synthesized = synth(stage_name, workdir / "cdk.out")
    nag = Check("synth + cdk-nag (AwsSolutions)", detail=f"0 unacknowledged, {synthesized.acknowledged} acknowledged")
    checks = [
        nag,
        check_cfn_lint(synthesized.template_path),
        check_asl(synthesized.template, synthesized.template_path.parent, workdir),
        check_task_permissions(synthesized.template, synthesized.template_path.parent),
    ]
    return synthesized, checks


def summary(stage_name: str, synthesized: Synth, checks: list[Check]) -> str:
    kinds = Counter(r["Type"].removeprefix("AWS::") for r in synthesized.template["Resources"].values())
    top = ", ".join(f"{kind} {n}" for kind, n in kinds.most_common(6))
    lines = [
        f"Deploy rehearsal: stage {stage_name}, stack {synthesized.stack_name}, "
        f"{sum(kinds.values())} resources ({top}, ...)",
    ]
    width = max(len(c.name) for c in checks)
    for check in checks:
        lines.append(f"  {'ok  ' if check.ok else 'FAIL'}  {check.name:<{width}}  {check.detail}")
        lines.extend(f"        - {problem}" for problem in check.problems)
    lines.append("rehearsal passed" if all(c.ok for c in checks) else "rehearsal FAILED")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from stacks.stage import DEFAULT_STAGE

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", default=DEFAULT_STAGE)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hookrelay-rehearsal-") as workdir:
        synthesized, checks = rehearse(args.stage, Path(workdir))
        print(summary(args.stage, synthesized, checks))
    return 0 if all(c.ok for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
