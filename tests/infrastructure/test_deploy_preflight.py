"""`make deploy`'s script against moto: CloudFormation, SSM and DynamoDB are moto's; Lambda's GetAccountSettings
(which moto 5.2 does not implement) is botocore's Stubber, which checks each request and response against Lambda's
own API model. The `npx cdk` commands are a fake that does what they would do to the account; nothing reaches AWS.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from hookrelay.adapters import aws
from scripts import deploy
from stacks import config, stage
from tests.support.aws import FAKE_ENV, patched_env

REGION = "us-east-1"


class AccountSession:
    """A boto3 session on moto whose Lambda client answers GetAccountSettings (and GetFunctionConcurrency) stubbed."""

    def __init__(self, quota: int, unreserved: int, function_concurrency: Sequence[int] = ()) -> None:
        self.session = boto3.Session(region_name=REGION)
        self.region_name = REGION
        self.lambda_client = self.session.client("lambda")
        self.stubber = Stubber(self.lambda_client)
        self.stubber.add_response(
            "get_account_settings",
            {"AccountLimit": {"ConcurrentExecutions": quota, "UnreservedConcurrentExecutions": unreserved}},
        )
        for reserved in function_concurrency:
            self.stubber.add_response("get_function_concurrency", {"ReservedConcurrentExecutions": reserved})
        self.stubber.activate()

    def client(self, name: str) -> Any:
        return self.lambda_client if name == "lambda" else self.session.client(name)

    def resource(self, name: str) -> Any:
        return self.session.resource(name)


class FakeCdk:
    """What `npx cdk bootstrap` and `npx cdk deploy` leave in the account: the bootstrap version parameter, and a
    stack with the API keys table and the outputs `make deploy` reads."""

    def __init__(self, stack_name: str = config.DEFAULT_STACK_NAME) -> None:
        self.commands: list[list[str]] = []
        self.stack_name = stack_name

    def __call__(self, command: Sequence[str]) -> int:
        self.commands.append(list(command))
        if command[:3] == ["npx", "cdk", "bootstrap"]:
            boto3.client("ssm").put_parameter(Name=deploy.BOOTSTRAP_VERSION_PARAMETER, Value="21", Type="String")
        elif command[:3] == ["npx", "cdk", "deploy"] and not self._stack_exists():
            boto3.client("cloudformation").create_stack(StackName=self.stack_name, TemplateBody=json.dumps(TEMPLATE))
        return 0

    def _stack_exists(self) -> bool:
        stacks = boto3.client("cloudformation").list_stacks()["StackSummaries"]
        return any(s["StackName"] == self.stack_name and s["StackStatus"] != "DELETE_COMPLETE" for s in stacks)


TEMPLATE = {
    "Resources": {
        "ApiKeys": {
            "Type": "AWS::DynamoDB::Table",
            "Properties": {
                "AttributeDefinitions": [{"AttributeName": "key_id", "AttributeType": "S"}],
                "KeySchema": [{"AttributeName": "key_id", "KeyType": "HASH"}],
                "BillingMode": "PAY_PER_REQUEST",
            },
        }
    },
    "Outputs": {
        "ApiUrl": {"Value": "https://abc123.execute-api.us-east-1.amazonaws.com"},
        deploy.API_KEYS_TABLE_OUTPUT: {"Value": {"Ref": "ApiKeys"}},
    },
}


@pytest.fixture
def account() -> Iterator[None]:
    with patched_env(FAKE_ENV), mock_aws():
        aws.reset()  # the adapters' clients are made again inside this mock
        yield
        aws.reset()


def _admin_keys(outputs: dict[str, str]) -> list[dict[str, Any]]:
    table = boto3.resource("dynamodb").Table(outputs[deploy.API_KEYS_TABLE_OUTPUT])
    return [item for item in table.scan()["Items"] if item["role"] == "admin"]


def test_a_first_deploy_on_a_new_account_bootstraps_deploys_prints_outputs_and_makes_the_admin_key(
    account: None, capsys: pytest.CaptureFixture[str]
) -> None:
    cdk = FakeCdk()
    outputs = deploy.deploy("dev", {}, session=AccountSession(quota=10, unreserved=10), runner=cdk)
    assert cdk.commands == [
        ["npx", "cdk", "bootstrap", "-c", "stage=dev"],
        ["npx", "cdk", "deploy", "--require-approval", "never", "-c", "stage=dev"],
    ]
    assert outputs["ApiUrl"] == "https://abc123.execute-api.us-east-1.amazonaws.com"
    [admin] = _admin_keys(outputs)
    printed = capsys.readouterr().out
    print(printed)  # shown with -s: what an operator sees
    # dev: one delivery shard, so two event sources at 2 each, within half a new account's quota of 10.
    assert "reserved_concurrency {} and delivery_max_concurrency 2 fit a quota of 10" in printed
    assert "delivery_max_concurrency 2 on each of 2 delivery event sources" in printed
    assert f"first admin key: {admin['key_id']}" in printed and "token: hrk_" in printed
    assert outputs[deploy.API_KEYS_TABLE_OUTPUT] in printed


def test_a_redeploy_neither_bootstraps_again_nor_makes_a_second_admin_key(
    account: None, capsys: pytest.CaptureFixture[str]
) -> None:
    cdk = FakeCdk()
    deploy.deploy("dev", {}, session=AccountSession(quota=10, unreserved=10), runner=cdk)
    # The stack exists now: its functions' reservations (none on dev; moto's stack has no functions) are asked for.
    outputs = deploy.deploy("dev", {}, session=AccountSession(quota=10, unreserved=10), runner=cdk)
    assert [c[2] for c in cdk.commands] == ["bootstrap", "deploy", "deploy"]
    assert len(_admin_keys(outputs)) == 1
    assert "an admin key exists" in capsys.readouterr().out


def test_settings_that_do_not_fit_stop_before_cloudformation_and_say_what_fits(account: None) -> None:
    cdk = FakeCdk()
    with pytest.raises(deploy.DeployError) as stopped:
        deploy.deploy("production", {}, session=AccountSession(quota=10, unreserved=10), runner=cdk)
    assert cdk.commands == []
    message = str(stopped.value)
    assert "reserved_concurrency" in message and "delivery_max_concurrency 100 on each of the 4" in message
    # Production's two shards are four event sources: at SQS's least maximum (2) each, more than half of 10.
    assert "a quota of 10 leaves no room for 4 delivery event sources" in message


def test_a_one_off_override_is_checked_and_passed_to_cdk(account: None) -> None:
    cdk = FakeCdk()
    deploy.deploy("dev", {"delivery_max_concurrency": "4"}, session=AccountSession(20, 20), runner=cdk)
    assert cdk.commands[-1][-2:] == ["-c", "delivery_max_concurrency=4"]
    with pytest.raises(deploy.DeployError, match="delivery_max_concurrency 6 on each of the 2 delivery event sources"):
        deploy.deploy("dev", {"delivery_max_concurrency": "6"}, session=AccountSession(20, 20), runner=FakeCdk())


PRODUCTION = config.Concurrency(delivery_max_concurrency=100, reserved={"authorizer": 30, "ingest": 30})


@pytest.mark.parametrize(
    ("account", "fits", "suggestion"),
    [
        (deploy.Account(1000, 1000), True, '{"authorizer": 30, "ingest": 30} and delivery_max_concurrency 100'),
        # A redeploy: the 60 already reserved are this stack's own, replaced, not added to.
        (deploy.Account(160, 100, reserved_by_this_stack=60), False, "and delivery_max_concurrency 50 fit a quota"),
        (deploy.Account(260, 200, reserved_by_this_stack=60), True, "delivery_max_concurrency 100 fit a quota of 260"),
        # Others' reservations count: 1000 - 100 kept - 850 reserved elsewhere leaves 50 to reserve.
        (deploy.Account(1000, 150), False, "reserved_concurrency {} and delivery_max_concurrency 75 fit"),
        (deploy.Account(10, 10), False, "reserved_concurrency {} and delivery_max_concurrency 5 fit a quota of 10"),
    ],
)
def test_what_fits_the_quota(account: deploy.Account, fits: bool, suggestion: str) -> None:
    fit = deploy.check_concurrency(account, PRODUCTION)
    assert fit.ok is fits, fit.problems
    assert suggestion in fit.suggestion


@pytest.mark.parametrize(
    ("event_sources", "fits", "suggestion"),
    [
        (4, True, "delivery_max_concurrency 100 fit"),  # 400 of 940 unreserved: within half
        (6, False, "delivery_max_concurrency 78 fit"),  # 600 > 470: 470 // 6 each
        (16, False, "delivery_max_concurrency 29 fit"),
    ],
)
def test_the_delivery_maximum_counts_once_per_event_source(event_sources: int, fits: bool, suggestion: str) -> None:
    fit = deploy.check_concurrency(deploy.Account(1000, 1000), PRODUCTION, event_sources=event_sources)
    assert fit.ok is fits, fit.problems
    assert suggestion in fit.suggestion


def test_the_stage_files_concurrency_is_read_with_synths_checks() -> None:
    assert deploy.stage_concurrency(stage.load("production")) == PRODUCTION
    with pytest.raises(config.InvalidConfiguration, match="reserved_concurrency"):
        deploy.stage_concurrency({"reserved_concurrency": {"nobody": 3}})


def test_an_unknown_override_is_refused_before_anything_runs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        deploy.main(["--stage", "dev", "-c", "alarm_emial=oncall@example.com"])
    assert "alarm_emial" in capsys.readouterr().err


def test_the_bootstrap_version_required_is_the_templates(synthesized: Any) -> None:
    """The template's CheckBootstrapVersion rule refuses versions 1..N-1: deploy.MIN_BOOTSTRAP_VERSION is N."""
    rule = synthesized.template["Rules"]["CheckBootstrapVersion"]["Assertions"][0]["Assert"]
    refused = rule["Fn::Not"][0]["Fn::Contains"][0]
    assert max(int(v) for v in refused) + 1 == deploy.MIN_BOOTSTRAP_VERSION


def _deployed_with_shards(shards: int) -> None:
    """A stack as a deploy with `shards` delivery shards left it (its DeliveryShards output)."""
    template = json.loads(json.dumps(TEMPLATE))
    template["Outputs"][config.DELIVERY_SHARDS_OUTPUT] = {"Value": str(shards)}
    boto3.client("cloudformation").create_stack(StackName=config.DEFAULT_STACK_NAME, TemplateBody=json.dumps(template))
    boto3.client("ssm").put_parameter(Name=deploy.BOOTSTRAP_VERSION_PARAMETER, Value="21", Type="String")


def test_fewer_delivery_shards_than_deployed_are_refused_before_cloudformation(account: None) -> None:
    _deployed_with_shards(3)  # the dev stage file says 1
    cdk = FakeCdk()
    with pytest.raises(deploy.DeployError) as stopped:
        deploy.deploy("dev", {"delivery_shards": "2"}, session=AccountSession(quota=100, unreserved=100), runner=cdk)
    assert cdk.commands == []
    assert "delivery_shards 2 is fewer than the deployed stack's 3" in str(stopped.value)
    assert "Set delivery_shards to 3 or more in deploy/dev.json" in str(stopped.value)


@pytest.mark.parametrize("shards", ["3", "4"])
def test_as_many_delivery_shards_as_deployed_or_more_deploy(account: None, shards: str) -> None:
    _deployed_with_shards(3)
    cdk = FakeCdk()
    deploy.deploy("dev", {"delivery_shards": shards}, session=AccountSession(quota=100, unreserved=100), runner=cdk)
    assert [c[2] for c in cdk.commands] == ["deploy"]
    assert f"delivery_shards={shards}" in cdk.commands[0]
