"""Deploy one stage (`make deploy STAGE=dev`): pre-flight, bootstrap when needed, deploy, outputs, first admin key.

    python -m scripts.deploy --stage dev [-c name=value ...]

1. Reads the stage's settings (deploy/<stage>.json, then any `-c` one-offs), checked as synth checks them.
2. Refuses fewer delivery shards than the deployed stack has (its DeliveryShards output): they can only grow.
   Then checks the account's Lambda concurrency (GetAccountSettings) against the stage's reservations and the delivery
   event source's maximum concurrency, and stops, saying which settings fit, before CloudFormation would fail.
3. Bootstraps the account and region (`npx cdk bootstrap`) when the CDK's bootstrap version parameter is missing
   or older than the synthesized template requires.
4. Deploys (`npx cdk deploy --require-approval never -c stage=<stage>`), prints the stack's outputs, and creates
   the first admin key (scripts/create_admin_key.py) when the API keys table has no active admin key.

Credentials and region come from the environment, as the AWS CLI reads them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.exceptions import ClientError

from hookrelay.domain.api_keys import ADMIN
from scripts.create_admin_key import create_admin_key
from stacks import config, stage

# Lambda keeps this much of the account's concurrency unreserved: "You can reserve concurrency for as many functions
# as you like, as long as you leave at least 100 simultaneous executions unreserved" (PutFunctionConcurrency).
LAMBDA_MINIMUM_UNRESERVED = 100
# The delivery event source may take at most this share of the unreserved pool: a burst of slow endpoints leaves the
# rest to the functions without a reservation (the API's, and the authorizer and ingest when they have none).
DELIVERY_SHARE_OF_UNRESERVED = 0.5
# An SQS event source's maximum concurrency is 2..1000.
EVENT_SOURCE_MINIMUM = 2
# The bootstrap version CDK v2's synthesized templates require (their CheckBootstrapVersion rule), and where the
# bootstrap stack publishes its own (the default qualifier).
MIN_BOOTSTRAP_VERSION = 6
BOOTSTRAP_VERSION_PARAMETER = "/cdk-bootstrap/hnb659fds/version"
API_KEYS_TABLE_OUTPUT = "ApiKeysTableName"

Runner = Callable[[Sequence[str]], int]
Print = Callable[[str], None]


class DeployError(RuntimeError):
    """The deploy stops here; the message says why and what to change."""


@dataclass(frozen=True)
class Account:
    """GetAccountSettings' AccountLimit, and what of its reservations are this stack's own (a redeploy replaces
    them, so they are not counted twice)."""

    concurrent_executions: int
    unreserved_concurrent_executions: int
    reserved_by_this_stack: int = 0

    @property
    def reserved_by_others(self) -> int:
        return self.concurrent_executions - self.unreserved_concurrent_executions - self.reserved_by_this_stack


@dataclass(frozen=True)
class Fit:
    problems: list[str]
    suggestion: str  # settings that fit this account, as the stage file would hold them

    @property
    def ok(self) -> bool:
        return not self.problems


def _json(reserved: Mapping[str, int]) -> str:
    return "{" + ", ".join(f'"{name}": {n}' for name, n in reserved.items()) + "}"


def check_concurrency(account: Account, concurrency: config.Concurrency, event_sources: int = 1) -> Fit:
    """Whether the stage's reservations and the delivery event sources' maximum fit the account's quota.
    `delivery_max_concurrency` is each event source's: the delivery function has `event_sources` of them (a fast and
    a slow lane per delivery shard), so it may run that many times as many at once."""
    quota = account.concurrent_executions
    reservable = quota - LAMBDA_MINIMUM_UNRESERVED - account.reserved_by_others
    wanted = sum(concurrency.reserved.values())
    problems: list[str] = []
    reserved = dict(concurrency.reserved)
    if wanted and wanted > reservable:
        problems.append(
            f"reserved_concurrency {_json(concurrency.reserved)} reserves {wanted}, but Lambda keeps "
            f"{LAMBDA_MINIMUM_UNRESERVED} of the account's {quota} unreserved"
            + (f" and other functions reserve {account.reserved_by_others}" if account.reserved_by_others else "")
            + f": at most {max(reservable, 0)} can be reserved (CloudFormation would fail on the function)"
        )
        reserved = {}
    pool = quota - account.reserved_by_others - sum(reserved.values())
    delivery_limit = int(pool * DELIVERY_SHARE_OF_UNRESERVED)
    if concurrency.delivery_max_concurrency * event_sources > delivery_limit:
        problems.append(
            f"delivery_max_concurrency {concurrency.delivery_max_concurrency} on each of the {event_sources} delivery"
            f" event sources is over half the {pool} unreserved concurrency: throttled receives count toward"
            " maxReceiveCount and push deliveries to the poison queue"
        )
    fitting_max = min(concurrency.delivery_max_concurrency, delivery_limit // event_sources)
    if fitting_max < EVENT_SOURCE_MINIMUM:
        return Fit(
            [*problems, f"a quota of {quota} leaves no room for {event_sources} delivery event sources"],
            "none (fewer delivery_shards, on a stack not yet deployed, or a higher quota)",
        )
    suggestion = (
        f"reserved_concurrency {_json(reserved)} and delivery_max_concurrency {fitting_max} fit a quota of {quota}"
    )
    return Fit(problems, suggestion)


def stage_concurrency(settings: Mapping[str, Any]) -> config.Concurrency:
    return config.concurrency(stage.Settings(settings))  # type: ignore[arg-type]


def account_concurrency(lambda_client: Any, cloudformation: Any, stack_name: str) -> Account:
    limit = lambda_client.get_account_settings()["AccountLimit"]
    own = 0
    try:
        pages = cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack_name)
        functions = [
            resource["PhysicalResourceId"]
            for page in pages
            for resource in page["StackResourceSummaries"]
            if resource["ResourceType"] == "AWS::Lambda::Function" and resource.get("PhysicalResourceId")
        ]
    except ClientError:  # no such stack yet: nothing of its own reserved
        functions = []
    for function in functions:
        own += int(
            lambda_client.get_function_concurrency(FunctionName=function).get("ReservedConcurrentExecutions") or 0
        )
    return Account(int(limit["ConcurrentExecutions"]), int(limit["UnreservedConcurrentExecutions"]), own)


def bootstrap_version(ssm: Any) -> int | None:
    try:
        return int(ssm.get_parameter(Name=BOOTSTRAP_VERSION_PARAMETER)["Parameter"]["Value"])
    except ClientError as error:
        if error.response["Error"]["Code"] == "ParameterNotFound":
            return None
        raise


def deployed_shards(cloudformation: Any, stack_name: str) -> int | None:
    """The delivery shards of the deployed stack; None when there is no stack yet, or it predates shards (its one
    delivery queue is shard 0's fast lane, which every number of shards keeps)."""
    try:
        value = stack_outputs(cloudformation, stack_name).get(config.DELIVERY_SHARDS_OUTPUT)
    except ClientError:  # no such stack yet
        return None
    return int(value) if value else None


def check_shards_grow(deployed: int | None, wanted: int, stage_name: str) -> None:
    """Each endpoint keeps the delivery shard it was given when it was created (domain/queues.py): a deploy with
    fewer shards would delete the queues the endpoints of the shards taken away are routed to (and what they hold)."""
    if deployed is not None and wanted < deployed:
        raise DeployError(
            f"delivery_shards {wanted} is fewer than the deployed stack's {deployed}: shards can only grow (every "
            f"endpoint keeps the shard it was created on, and shards {wanted}..{deployed - 1} would lose their queues)."
            f" Set delivery_shards to {deployed} or more in deploy/{stage_name}.json"
        )


def stack_outputs(cloudformation: Any, stack_name: str) -> dict[str, str]:
    [described] = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    return {output["OutputKey"]: output["OutputValue"] for output in described.get("Outputs", [])}


def has_active_admin_key(dynamodb: Any, table_name: str) -> bool:
    """A scan of the keys table (one item per key, small) for an admin key not revoked."""
    table = dynamodb.Table(table_name)
    arguments: dict[str, Any] = {
        "FilterExpression": "#role = :admin AND attribute_not_exists(revoked_at)",
        "ExpressionAttributeNames": {"#role": "role"},
        "ExpressionAttributeValues": {":admin": ADMIN},
        "ProjectionExpression": "key_id",
    }
    while True:
        page = table.scan(**arguments)
        if page["Items"]:
            return True
        if "LastEvaluatedKey" not in page:
            return False
        arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def run(command: Sequence[str]) -> int:
    return subprocess.run(list(command), check=False).returncode  # noqa: S603 (our own fixed commands)


def deploy(
    stage_name: str,
    overrides: Mapping[str, str],
    *,
    session: Any,
    runner: Runner = run,
    out: Print = print,
) -> dict[str, str]:
    """The whole deploy; returns the stack's outputs. Raises DeployError before CloudFormation when it would fail."""
    settings = stage.resolve({stage.STAGE_CONTEXT: stage_name, **overrides})
    node = stage.Settings(settings)
    stack_name = config.stack_name(node)  # type: ignore[arg-type]
    concurrency = stage_concurrency(settings)
    cloudformation = session.client("cloudformation")
    out(f"stage {stage_name}: stack {stack_name} in {session.region_name}")
    shards = config.delivery_shards(node)  # type: ignore[arg-type]
    check_shards_grow(deployed_shards(cloudformation, stack_name), shards, stage_name)

    account = account_concurrency(session.client("lambda"), cloudformation, stack_name)
    fit = check_concurrency(account, concurrency, event_sources=2 * shards)  # each shard's fast and slow lane
    out(
        f"Lambda concurrency: quota {account.concurrent_executions}, "
        f"unreserved {account.unreserved_concurrent_executions} (this stack reserves {account.reserved_by_this_stack} "
        "now); the stage reserves "
        f"{sum(concurrency.reserved.values())}, delivery_max_concurrency {concurrency.delivery_max_concurrency} on each"
        f" of {2 * shards} delivery event sources"
    )
    if not fit.ok:
        raise DeployError(
            "\n".join(["the stage's concurrency does not fit this account:", *(f"  - {p}" for p in fit.problems)])
            + f"\n  {fit.suggestion}: set them in deploy/{stage_name}.json (or ask AWS to raise the quota)"
        )
    out(f"ok: {fit.suggestion}")

    context = ["-c", f"{stage.STAGE_CONTEXT}={stage_name}"]
    for name, value in overrides.items():
        context += ["-c", f"{name}={value}"]
    version = bootstrap_version(session.client("ssm"))
    if version is None or version < MIN_BOOTSTRAP_VERSION:
        out(f"CDK bootstrap version {version or 'missing'} (needs {MIN_BOOTSTRAP_VERSION}): npx cdk bootstrap")
        if runner(["npx", "cdk", "bootstrap", *context]) != 0:
            raise DeployError("npx cdk bootstrap failed (its output is above)")
    else:
        out(f"CDK bootstrap version {version}: ok")

    if runner(["npx", "cdk", "deploy", "--require-approval", "never", *context]) != 0:
        raise DeployError("npx cdk deploy failed (its output is above; the stack rolls back by itself)")

    outputs = stack_outputs(cloudformation, stack_name)
    out("outputs:")
    for key in sorted(outputs):
        out(f"  {key:<{max(map(len, outputs))}}  {outputs[key]}")

    table = outputs[API_KEYS_TABLE_OUTPUT]
    if has_active_admin_key(session.resource("dynamodb"), table):
        out(f"an admin key exists in {table}: none created")
    else:
        issued = create_admin_key(table)
        out(
            f"first admin key: {issued.key.key_id}\n  token: {issued.token}\n  (store it now: it cannot be shown again)"
        )
    return outputs


def _override(text: str) -> tuple[str, str]:
    name, separator, value = text.partition("=")
    if not separator or name not in config.setting_names():
        raise argparse.ArgumentTypeError(
            f"{text!r}: give name=value, name one of {', '.join(sorted(config.setting_names()))}"
        )
    return name, value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", default=stage.DEFAULT_STAGE, help="deploy/<stage>.json (default: %(default)s)")
    parser.add_argument("-c", "--context", type=_override, action="append", default=[], help="a one-off override")
    args = parser.parse_args(argv)
    try:
        deploy(args.stage, dict(args.context), session=boto3.Session())
    except (DeployError, config.InvalidConfiguration) as error:
        print(f"deploy stopped: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
