"""What the logs and traces cost per event is set here: the workflow's log level, X-Ray, the functions' log format.

Defaults (as cdk.json states them, and the code without it): the retry workflow logs at ERROR without execution
data, X-Ray is off (and the handlers are told so, so they never import the X-Ray SDK), the functions log JSON with
Lambda's own START/END/REPORT records filtered out. `workflow_log_level=ALL` and `xray_tracing=sampled` turn each
back on; a second synth of the app with both (on deploy/production.json's stage, which also reserves concurrency for
the authorizer and ingest) checks that they reach the template.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_sqs as sqs

from hookrelay.functions import BY_NAME, DELIVERY
from stacks import config
from stacks.constructs.retry_workflow import RetryWorkflow
from tests.support.synth import Synthesized, cdk_json_context, stage_settings


def _state_machine(template: dict[str, Any]) -> dict[str, Any]:
    [props] = [
        r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::StepFunctions::StateMachine"
    ]
    return props


def _functions(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]


def test_by_default_the_workflow_logs_errors_only_without_execution_data(synthesized: Synthesized) -> None:
    logging = _state_machine(synthesized.template)["LoggingConfiguration"]
    assert logging["Level"] == "ERROR"
    assert logging["IncludeExecutionData"] is False
    assert logging["Destinations"]  # still logged: failed executions are worth their records


def test_by_default_nothing_is_traced(synthesized: Synthesized) -> None:
    assert _state_machine(synthesized.template).get("TracingConfiguration", {"Enabled": False}) == {"Enabled": False}
    for props in _functions(synthesized.template):
        assert props.get("TracingConfig", {"Mode": "PassThrough"}) == {"Mode": "PassThrough"}
        assert props["Environment"]["Variables"]["POWERTOOLS_TRACE_DISABLED"] == "true"


def test_functions_log_json_without_lambdas_start_end_report_lines(synthesized: Synthesized) -> None:
    for props in _functions(synthesized.template):
        assert props["LoggingConfig"]["LogFormat"] == "JSON"
        assert props["LoggingConfig"]["SystemLogLevel"] == "WARN"  # START/END/REPORT are INFO: dropped
        assert props["LoggingConfig"]["ApplicationLogLevel"] == "INFO"
        assert props["Environment"]["Variables"]["POWERTOOLS_LOG_LEVEL"] == "INFO"


def test_every_log_group_expires(synthesized: Synthesized) -> None:
    groups = synthesized.properties("AWS::Logs::LogGroup")
    assert groups and all(group["RetentionInDays"] == 30 for group in groups)


@pytest.fixture(scope="module")
def all_on(synthesized: Synthesized, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The app synthesized again, stage production, with execution logging at ALL and X-Ray sampled (after the
    session's synth, so the Lambda asset is built already)."""
    from stacks.app import build_app

    outdir = tmp_path_factory.mktemp("cdk.out.all-on")
    context = {**cdk_json_context(), "stage": "production", "workflow_log_level": "ALL", "xray_tracing": "sampled"}
    app, stack = build_app(context, outdir=str(outdir))
    app.synth()
    yield json.loads((outdir / stack.template_file).read_text())


def test_workflow_log_level_all_logs_execution_data(all_on: dict[str, Any]) -> None:
    logging = _state_machine(all_on)["LoggingConfiguration"]
    assert logging["Level"] == "ALL"
    assert logging["IncludeExecutionData"] is True


def test_xray_tracing_sampled_traces_the_functions_and_the_workflow(all_on: dict[str, Any]) -> None:
    assert _state_machine(all_on)["TracingConfiguration"] == {"Enabled": True}
    for props in _functions(all_on):
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert props["Environment"]["Variables"]["POWERTOOLS_TRACE_DISABLED"] == "false"


def test_the_production_stage_reserves_concurrency_for_the_authorizer_and_ingest_only(all_on: dict[str, Any]) -> None:
    reserved = {
        props["Handler"]: props["ReservedConcurrentExecutions"]
        for props in _functions(all_on)
        if "ReservedConcurrentExecutions" in props
    }
    expected = stage_settings("production")["reserved_concurrency"]
    assert expected == {"authorizer": 30, "ingest": 30}
    handlers = {BY_NAME[name].handler: n for name, n in expected.items()}
    assert reserved == handlers
    [delivery] = [
        logical_id
        for logical_id, r in all_on["Resources"].items()
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"]["Handler"] == DELIVERY.handler
    ]
    mappings = [
        r["Properties"]
        for r in all_on["Resources"].values()
        if r["Type"] == "AWS::Lambda::EventSourceMapping" and r["Properties"]["FunctionName"] == {"Ref": delivery}
    ]
    assert len(mappings) == 2 * stage_settings("production")["delivery_shards"]  # each delivery queue's
    for mapping in mappings:
        maximum = mapping["ScalingConfig"]["MaximumConcurrency"]
        assert maximum == stage_settings("production")["delivery_max_concurrency"]


@pytest.mark.parametrize(
    ("context", "message"),
    [({"workflow_log_level": "DEBUG"}, "workflow_log_level"), ({"xray_tracing": "always"}, "xray_tracing")],
)
def test_a_bad_setting_fails_synth(context: dict[str, str], message: str) -> None:
    stack = Stack(App(context=context), "Bad")
    with pytest.raises(config.InvalidConfiguration, match=message):
        config.telemetry(stack.node)


@pytest.mark.parametrize("level", ["OFF", "FATAL", "ERROR"])
def test_execution_data_is_logged_only_at_all(level: str) -> None:
    stack = Stack(App(context={"workflow_log_level": level}), "Levels")
    queue = sqs.Queue(stack, "Queue")
    RetryWorkflow(
        stack, "Workflow", delivery_queue=queue, dead_letter_queue=queue, telemetry=config.telemetry(stack.node)
    )
    template = App.of(stack).synth().get_stack_by_name("Levels").template  # type: ignore[union-attr]
    logging = _state_machine(template)["LoggingConfiguration"]
    assert logging["Level"] == level and logging["IncludeExecutionData"] is False
