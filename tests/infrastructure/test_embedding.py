"""examples/cdk_app: a team's own app embedding HookRelay twice (dev and prod, one account), synthesized with
cdk-nag's AWS Solutions checks; the stage file's custom domain on the app's own stack; and the example again from
the wheel `make dist` builds, installed in a clean virtualenv and run outside this checkout."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.synth import ROOT, cdk_json_context

EXAMPLE = ROOT / "examples" / "cdk_app" / "app.py"
CERTIFICATE = "arn:aws:acm:us-east-1:111111111111:certificate/0f6b2b42-1f3e-4c1a-9d1e-2b7a9a1c0e11"
DOMAIN_TYPES = (
    "AWS::ApiGatewayV2::DomainName",
    "AWS::ApiGatewayV2::ApiMapping",
    "AWS::CertificateManager::Certificate",
    "AWS::Route53::RecordSet",
)
# The properties that set a physical name, by resource type (the name-prefix rule covers each).
NAME_PROPERTIES = {
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::CloudWatch::Alarm": "AlarmName",
    "AWS::CloudWatch::Dashboard": "DashboardName",
    "AWS::ApiGatewayV2::Api": "Name",
    "AWS::DynamoDB::Table": "TableName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::StepFunctions::StateMachine": "StateMachineName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::IAM::Role": "RoleName",
    "AWS::KMS::Alias": "AliasName",
}


def _example_module() -> Any:
    spec = importlib.util.spec_from_file_location("example_cdk_app", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _templates(outdir: Path) -> dict[str, dict[str, Any]]:
    manifest = json.loads((outdir / "manifest.json").read_text())
    return {
        name: json.loads((outdir / artifact["properties"]["templateFile"]).read_text())
        for name, artifact in manifest["artifacts"].items()
        if artifact["type"] == "aws:cloudformation:stack"
    }


def _of_type(template: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    return {key: value for key, value in template["Resources"].items() if value["Type"] == resource_type}


def _nag_failures(outdir: Path) -> list[str]:
    """The validation report's failed plugins' findings (synth raises on any; the report says which)."""
    report = json.loads((outdir / "validation-report.json").read_text())
    return [
        violation["ruleName"]
        for plugin in report["pluginReports"]
        if plugin["conclusion"] != "success"
        for violation in plugin.get("violations", [])
    ]


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, dict[str, Any]]]]:
    outdir = tmp_path_factory.mktemp("example.out")
    app, _ = _example_module().build_app(str(outdir))
    app.synth()  # unacknowledged cdk-nag findings fail here
    yield outdir, _templates(outdir)


def test_both_stages_pass_the_aws_solutions_checks(example: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    outdir, templates = example
    assert sorted(templates) == ["PlatformWebhooks-dev", "PlatformWebhooks-prod"]
    assert _nag_failures(outdir) == []


def test_no_physical_name_is_shared_between_the_stages(example: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    _, templates = example
    names: list[str] = []
    for template in templates.values():
        for resource in template["Resources"].values():
            name = resource.get("Properties", {}).get(NAME_PROPERTIES.get(resource["Type"], ""))
            if name is not None:
                names.append(json.dumps(name))
    assert names, "the example names nothing: the test would pass on any template"
    assert len(names) == len(set(names)), sorted(name for name in names if names.count(name) > 1)
    dev, prod = templates["PlatformWebhooks-dev"], templates["PlatformWebhooks-prod"]
    for template, prefix in ((dev, "platform-dev-hooks-"), (prod, "platform-prod-hooks-")):
        alarms = _of_type(template, "AWS::CloudWatch::Alarm").values()
        assert alarms and all(alarm["Properties"]["AlarmName"].startswith(prefix) for alarm in alarms)


def test_prod_alarms_notify_the_teams_topic_and_no_topic_of_its_own(
    example: tuple[Path, dict[str, dict[str, Any]]],
) -> None:
    _, templates = example
    module = _example_module()
    prod, dev = templates["PlatformWebhooks-prod"], templates["PlatformWebhooks-dev"]
    alarms = _of_type(prod, "AWS::CloudWatch::Alarm").values()
    assert {json.dumps(alarm["Properties"]["AlarmActions"]) for alarm in alarms} == {
        json.dumps([module.ON_CALL_TOPIC_ARN])
    }
    (topic_output,) = (value for key, value in prod["Outputs"].items() if key.startswith("WebhooksAlarmTopicArn"))
    assert topic_output["Value"] == module.ON_CALL_TOPIC_ARN
    # Dev has its own alarm topic besides the notices topic; prod only the notices topic.
    assert len(_of_type(dev, "AWS::SNS::Topic")) == len(_of_type(prod, "AWS::SNS::Topic")) + 1


def test_prod_serves_the_api_on_its_domain(example: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    _, templates = example
    module = _example_module()
    prod = templates["PlatformWebhooks-prod"]
    (domain,) = _of_type(prod, "AWS::ApiGatewayV2::DomainName").values()
    assert domain["Properties"]["DomainName"] == module.PROD_DOMAIN
    (certificate_id, certificate), *_ = _of_type(prod, "AWS::CertificateManager::Certificate").items()
    assert certificate["Properties"]["DomainName"] == module.PROD_DOMAIN
    assert certificate["Properties"]["ValidationMethod"] == "DNS"
    assert certificate["Properties"]["DomainValidationOptions"][0]["HostedZoneId"] == module.ZONE_ID
    assert domain["Properties"]["DomainNameConfigurations"][0]["CertificateArn"] == {"Ref": certificate_id}
    (mapping,) = _of_type(prod, "AWS::ApiGatewayV2::ApiMapping").values()
    (api_id,) = _of_type(prod, "AWS::ApiGatewayV2::Api")
    assert mapping["Properties"]["ApiId"] == {"Ref": api_id}
    assert mapping["Properties"]["Stage"] == "$default"
    assert mapping["Properties"]["DomainName"] == {"Ref": next(iter(_of_type(prod, "AWS::ApiGatewayV2::DomainName")))}
    (record,) = _of_type(prod, "AWS::Route53::RecordSet").values()
    assert record["Properties"]["Name"] == f"{module.PROD_DOMAIN}."
    assert record["Properties"]["Type"] == "A"
    assert record["Properties"]["HostedZoneId"] == module.ZONE_ID
    outputs = {key: value["Value"] for key, value in prod["Outputs"].items()}
    url = f"https://{module.PROD_DOMAIN}"
    assert url in outputs.values() and f"{url}/portal" in outputs.values()
    # The links the API hands out (portal sessions) are built from the functions' API_URL.
    api_urls = {
        json.dumps(function["Properties"]["Environment"]["Variables"].get("API_URL"))
        for function in _of_type(prod, "AWS::Lambda::Function").values()
        if "API_URL" in function["Properties"].get("Environment", {}).get("Variables", {})
    }
    assert api_urls == {json.dumps(url)}


def test_dev_has_no_domain_and_keeps_the_execute_api_url(example: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    _, templates = example
    dev = templates["PlatformWebhooks-dev"]
    assert [resource_type for resource_type in DOMAIN_TYPES if _of_type(dev, resource_type)] == []
    (api_id,) = _of_type(dev, "AWS::ApiGatewayV2::Api")
    (api_url,) = (value["Value"] for key, value in dev["Outputs"].items() if key.startswith("WebhooksApiUrl"))
    assert api_url == {"Fn::GetAtt": [api_id, "ApiEndpoint"]}


def test_the_stage_files_domain_with_a_certificate(tmp_path: Path) -> None:
    from stacks.app import build_app

    context = {**cdk_json_context(), "domain_name": "hooks.example.com", "certificate_arn": CERTIFICATE}
    app, stack = build_app(context, outdir=str(tmp_path))
    app.synth()
    template = json.loads((tmp_path / stack.template_file).read_text())
    (domain,) = _of_type(template, "AWS::ApiGatewayV2::DomainName").values()
    assert domain["Properties"]["DomainNameConfigurations"][0]["CertificateArn"] == CERTIFICATE
    assert len(_of_type(template, "AWS::ApiGatewayV2::ApiMapping")) == 1
    # A certificate of the stage's own: none made, and no zone to add a record to.
    assert not _of_type(template, "AWS::CertificateManager::Certificate")
    assert not _of_type(template, "AWS::Route53::RecordSet")
    assert template["Outputs"]["ApiUrl"]["Value"] == "https://hooks.example.com"
    assert template["Outputs"]["PortalUrl"]["Value"] == "https://hooks.example.com/portal"
    assert _nag_failures(tmp_path) == []


def test_the_wheel_synthesizes_the_example_outside_the_checkout(tmp_path: Path) -> None:
    """`make dist`, a fresh virtualenv (`uv venv`) with uv.lock's versions of the wheel's dependencies and its `cdk`
    extra synced offline from uv's cache (`uv sync`, which reads the lock's own URLs: `uv pip install -r` would need
    the index pages a fresh machine's cache does not hold) and the wheel installed, then the example app run from a
    directory outside the checkout, with nothing of the checkout on its path."""
    uv = ROOT / ".tools" / "bin" / "uv"
    run = {"cwd": ROOT, "check": True, "capture_output": True, "text": True}
    subprocess.run(["make", "dist"], **run)  # noqa: S607
    (wheel,) = (ROOT / "dist").glob("hookrelay-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([str(uv), "venv", "--quiet", "--python", sys.executable, str(venv)], **run)  # noqa: S603
    into_venv = {**os.environ, "VIRTUAL_ENV": str(venv), "UV_PROJECT_ENVIRONMENT": str(venv)}
    synced = subprocess.run(  # noqa: S603
        [str(uv), "sync", "--frozen", "--offline", "--quiet", "--no-dev", "--extra", "cdk", "--no-install-project"],
        cwd=ROOT,
        env=into_venv,
        capture_output=True,
        text=True,
    )
    assert synced.returncode == 0, synced.stderr
    installed = subprocess.run(  # noqa: S603
        [str(uv), "pip", "install", "--offline", "--quiet", "--no-deps", str(wheel)],
        cwd=ROOT,
        env=into_venv,
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr
    app_dir = tmp_path / "team-app"
    (app_dir / "bin").mkdir(parents=True)
    (app_dir / "app.py").write_text(EXAMPLE.read_text())
    (app_dir / "bin" / "uv").symlink_to(uv)  # the asset builder's one tool; the wheel says so (docs/embedding.md)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{app_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    script = (
        "import json, stacks, hookrelay_cdk\n"
        "from app import build_app\n"
        "app, stacks_ = build_app('out')\n"
        "app.synth()\n"
        "print(json.dumps({'stacks': stacks.__file__, 'names': [s.stack_name for s in stacks_]}))\n"
    )
    synth = subprocess.run(  # noqa: S603
        [str(venv / "bin" / "python"), "-c", script], cwd=app_dir, env=env, capture_output=True, text=True
    )
    assert synth.returncode == 0, synth.stderr[-4000:]
    result = json.loads(synth.stdout.strip().splitlines()[-1])
    assert Path(result["stacks"]).is_relative_to(venv), "the example imported the checkout, not the wheel"
    assert result["names"] == ["PlatformWebhooks-dev", "PlatformWebhooks-prod"]
    templates = _templates(app_dir / "out")
    assert _nag_failures(app_dir / "out") == []
    assert len(_of_type(templates["PlatformWebhooks-prod"], "AWS::ApiGatewayV2::DomainName")) == 1
