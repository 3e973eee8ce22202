"""The local stack and the integration tier run each function as the synthesized template deploys it.

Each function's environment and its role's statements come from one definition (hookrelay/function_environment.py,
hookrelay/function_permissions.py), which the stack and the local runs (local/as_deployed.py) both call. Here the
template is held to it: every function's variables and every (action, resource) its role allows, with the
template's CloudFormation references resolved to the local resources they stand for, equal what a local run gives
that function, and no more.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest

from hookrelay import functions
from hookrelay.adapters import schema
from local.as_deployed import LOCAL_ONLY, LocalDeployment, arns, local_deployment, placeholder_environment
from local.provision import queue_urls
from tests.support.synth import DELIVERY_SHARDS, Synthesized

REGION, ACCOUNT = "us-east-1", "123456789012"


class Resolver:
    """CloudFormation's intrinsic functions, with each of our resources' references replaced by its local value."""

    def __init__(self, template: Mapping[str, Any], env: Mapping[str, str]) -> None:
        local = arns(env, REGION)
        self.refs: dict[str, str] = {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT}
        self.arns: dict[str, str] = {}
        ids = list(template["Resources"])
        for spec in schema.ALL_TABLES:
            lid = _one(ids, f"Storage{spec.logical_name}")
            self.refs[lid], self.arns[lid] = env[spec.env_var], local.tables[spec]
        for queue, url in queue_urls(env).items():
            lid = _one(ids, f"Queues{queue.logical_name}")
            self.refs[lid], self.arns[lid] = url, local.queues[queue]
        for topic in schema.ALL_TOPICS:
            self.refs[_one(ids, f"Notices{topic.logical_name}")] = local.topics[topic]
        self.refs[_one(ids, "RetryWorkflowStateMachine")] = local.retry_state_machine
        self.arns[_one(ids, "NoticesNoticesKey")] = local.topic_key
        for function in functions.FUNCTIONS:
            self.arns[_one(ids, f"Functions{function.name.title()}Logs")] = local.log_groups[function.name]
        self.api_endpoints = {_one(ids, "ApiHttpApi"): env[schema.API_URL]}

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return [self(v) for v in value]
        [(name, argument)] = value.items()
        if name == "Ref":
            return self.refs[argument]
        if name == "Fn::GetAtt" and argument[1] == "ApiEndpoint":
            return self.api_endpoints[argument[0]]
        if name == "Fn::GetAtt":
            assert argument[1] == "Arn", argument
            return self.arns[argument[0]]
        if name == "Fn::Join":
            return argument[0].join(self(part) for part in argument[1])
        if name == "Fn::Split":
            return self(argument[1]).split(argument[0])
        if name == "Fn::Select":
            return self(argument[1])[argument[0]]
        raise AssertionError(f"an intrinsic this test does not resolve: {value}")


def _one(logical_ids: list[str], construct_path: str) -> str:
    """The logical id CDK gives the construct at this path: the path's ids joined, then an 8-character hash."""
    [found] = [lid for lid in logical_ids if re.fullmatch(re.escape(construct_path) + r"[0-9A-F]{8}", lid)]
    return found


@pytest.fixture(scope="module")
def local(synthesized: Synthesized) -> tuple[LocalDeployment, Resolver]:
    env = placeholder_environment(int(DELIVERY_SHARDS))
    return local_deployment(env, synthesized.function_settings), Resolver(synthesized.template, env)


def deployed_functions(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    """Each of the table's functions' resource in the template, by function name."""
    found = {}
    for function in functions.FUNCTIONS:
        lid = _one(list(synthesized.template["Resources"]), f"Functions{function.name.title()}")
        found[function.name] = synthesized.template["Resources"][lid]
    return found


def test_every_function_runs_locally_with_exactly_its_template_environment(
    synthesized: Synthesized, local: tuple[LocalDeployment, Resolver]
) -> None:
    deployment, resolve = local
    for name, resource in deployed_functions(synthesized).items():
        variables = resource["Properties"]["Environment"]["Variables"]
        deployed = {variable: resolve(value) for variable, value in variables.items()}
        assert deployed == deployment.environments[name], name
        assert not set(LOCAL_ONLY) & set(variables), f"{name} is deployed with a local-only variable"


def test_every_role_allows_exactly_what_the_local_check_allows(
    synthesized: Synthesized, local: tuple[LocalDeployment, Resolver]
) -> None:
    deployment, resolve = local
    resources = synthesized.template["Resources"]
    for name, resource in deployed_functions(synthesized).items():
        role = resource["Properties"]["Role"]["Fn::GetAtt"][0]
        granted: set[tuple[str, str]] = set()
        for policy in synthesized.resources("AWS::IAM::Policy").values():
            if {"Ref": role} not in policy["Properties"]["Roles"]:
                continue
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                assert statement["Effect"] == "Allow" and "Condition" not in statement
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                targets = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
                granted |= {(action, resolve(target)) for action in actions for target in targets}
        assert not resources[role]["Properties"].get("ManagedPolicyArns"), name
        local_pairs = {
            (action, target) for s in deployment.policies[name] for action in s.actions for target in s.resources
        }
        assert granted == local_pairs, name


def test_the_resolution_itself_would_see_a_difference(
    synthesized: Synthesized, local: tuple[LocalDeployment, Resolver]
) -> None:
    """The comparison above can fail: another function's environment is not this one's."""
    deployment, resolve = local
    deployed = deployed_functions(synthesized)
    authorizer = {v: resolve(x) for v, x in deployed["authorizer"]["Properties"]["Environment"]["Variables"].items()}
    assert authorizer != deployment.environments["api"]
    assert schema.TENANTS.env_var not in authorizer  # the portal's defect: the authorizer has no tenants table


# Lambda's quota on a function's environment: its variables' names and values, 4 KB in all
# (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html). Every function that sends to a delivery
# queue holds every delivery queue's URL, so this is what bounds MAX_DELIVERY_SHARDS (domain/queues.py).
LAMBDA_ENVIRONMENT_BYTES = 4096


def aws_named_environment(stack_name: str, shards: int) -> dict[str, str]:
    """Resources' variables as AWS names them: CloudFormation's `<stack>-<logical id>-<13 random characters>` (the
    logical id CDK's, with its 8-character hash), cut to the service's length (a queue's 80 characters, `.fifo`
    included), in AWS's URL and ARN forms."""

    def generated(logical: str, limit: int = 255, suffix: str = "") -> str:
        return f"{stack_name}-{logical}0123ABCD-ABCDEFGHIJKLM"[: limit - len(suffix)] + suffix

    env = {spec.env_var: generated(f"Storage{spec.logical_name}") for spec in schema.ALL_TABLES}
    urls = {
        spec: f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/"
        + generated(f"Queues{spec.logical_name}", 80, ".fifo" if spec.fifo else "")
        for spec in schema.all_queues(shards)
    }
    env |= {spec.env_var: url for spec, url in urls.items() if not schema.is_delivery_queue(spec)}
    env[schema.DELIVERY_QUEUE.env_var] = schema.encode_delivery_queues(urls)
    arn = f"arn:aws:{{}}:{REGION}:{ACCOUNT}:{{}}"
    env |= {spec.env_var: arn.format("sns", generated(f"Notices{spec.logical_name}")) for spec in schema.ALL_TOPICS}
    env[schema.RETRY_STATE_MACHINE_ARN] = arn.format("states", "stateMachine:" + generated("RetryWorkflow", 80))
    env[schema.API_URL] = f"https://abcdefghij.execute-api.{REGION}.amazonaws.com"
    return env


def test_at_the_most_delivery_shards_every_function_s_environment_fits_lambda_s_quota(
    synthesized: Synthesized,
) -> None:
    """A deployment at MAX_DELIVERY_SHARDS, its resources named as AWS names them: the environment the template gives
    each function stays within Lambda's 4 KB (a deploy past it fails in CloudFormation, never here on moto)."""
    from hookrelay.domain.queues import MAX_DELIVERY_SHARDS

    env = aws_named_environment(synthesized.stack_name, MAX_DELIVERY_SHARDS)
    deployment = local_deployment(env, synthesized.function_settings)
    sizes = {
        name: sum(len(key.encode()) + len(value.encode()) for key, value in variables.items())
        for name, variables in deployment.environments.items()
    }
    assert max(sizes.values()) <= LAMBDA_ENVIRONMENT_BYTES, sizes
