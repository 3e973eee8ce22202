"""The auto-disable sweeper in the stack: its hourly schedule, the encrypted notices topic, least privilege."""

from __future__ import annotations

from typing import Any

import pytest

from hookrelay.adapters import schema
from hookrelay.functions import FUNCTIONS, RECONCILER, SWEEPER, scheduled
from tests.support.synth import (
    Synthesized,
    actions_on,
    as_list,
    function_logical_ids,
    function_role,
    logical_id_of,
    role_statements,
    table_of,
)

NOTICES_TOPIC = f"Notices/{schema.ENDPOINT_NOTICES_TOPIC.logical_name}"


def _sweeper(synthesized: Synthesized) -> tuple[str, dict[str, Any]]:
    logical_id = function_logical_ids(synthesized)["sweeper"]
    return logical_id, synthesized.template["Resources"][logical_id]["Properties"]


def test_the_sweeper_runs_hourly_from_an_eventbridge_rule(synthesized: Synthesized) -> None:
    sweeper_id, properties = _sweeper(synthesized)
    rules = [
        rule
        for rule in synthesized.properties("AWS::Events::Rule")
        if any(target["Arn"] == {"Fn::GetAtt": [sweeper_id, "Arn"]} for target in rule["Targets"])
    ]
    assert [(rule["ScheduleExpression"], rule["State"]) for rule in rules] == [("rate(1 hour)", "ENABLED")]
    assert [(function, schedule.every_seconds) for function, schedule in scheduled()] == [
        (SWEEPER, 3600),
        (RECONCILER, 300),
    ]
    permissions = [
        p
        for p in synthesized.properties("AWS::Lambda::Permission")
        if p["FunctionName"] == {"Fn::GetAtt": [sweeper_id, "Arn"]}
    ]
    assert [p["Principal"] for p in permissions] == ["events.amazonaws.com"]
    assert properties["Timeout"] == SWEEPER.timeout_seconds
    # Only the scheduled functions of the table are targets of rules: the sweeper and the reconciler (every 5 min).
    targets = {t["Arn"]["Fn::GetAtt"][0] for r in synthesized.properties("AWS::Events::Rule") for t in r["Targets"]}
    assert targets == {sweeper_id, function_logical_ids(synthesized)[RECONCILER.name]}
    [reconciler_rule] = [
        r
        for r in synthesized.properties("AWS::Events::Rule")
        if r["Targets"][0]["Arn"]["Fn::GetAtt"][0] == function_logical_ids(synthesized)[RECONCILER.name]
    ]
    assert reconciler_rule["ScheduleExpression"] == "rate(5 minutes)"


def test_the_notices_topic_is_encrypted_with_a_rotated_customer_managed_key_and_refuses_plain_http(
    synthesized: Synthesized,
) -> None:
    topic_id = logical_id_of(synthesized, "AWS::SNS::Topic", NOTICES_TOPIC)
    key_reference = synthesized.template["Resources"][topic_id]["Properties"]["KmsMasterKeyId"]
    key_id = logical_id_of(synthesized, "AWS::KMS::Key", "Notices/NoticesKey")
    assert key_reference == {"Fn::GetAtt": [key_id, "Arn"]}
    assert synthesized.template["Resources"][key_id]["Properties"]["EnableKeyRotation"] is True
    [policy] = [p for p in synthesized.properties("AWS::SNS::TopicPolicy") if {"Ref": topic_id} in p["Topics"]]
    [deny] = [s for s in policy["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert synthesized.template["Outputs"][f"{schema.ENDPOINT_NOTICES_TOPIC.logical_name}Arn"]["Value"] == {
        "Ref": topic_id
    }


def test_the_sweeper_gets_the_topic_and_the_threshold(synthesized: Synthesized) -> None:
    topic_id = logical_id_of(synthesized, "AWS::SNS::Topic", NOTICES_TOPIC)
    variables = _sweeper(synthesized)[1]["Environment"]["Variables"]
    assert variables[schema.ENDPOINT_NOTICES_TOPIC.env_var] == {"Ref": topic_id}
    assert variables[schema.AUTO_DISABLE_AFTER_DAYS] == "5"
    assert schema.ENDPOINT_HEALTH_DAY_SECONDS not in variables  # the local stack's --fast knob only


def test_the_sweeper_publishes_only_to_the_notices_topic_and_never_deletes_a_record(synthesized: Synthesized) -> None:
    statements = role_statements(synthesized, function_role(synthesized, "sweeper"))
    topic_id = logical_id_of(synthesized, "AWS::SNS::Topic", NOTICES_TOPIC)
    key_id = logical_id_of(synthesized, "AWS::KMS::Key", "Notices/NoticesKey")
    services = {action.split(":")[0] for s in statements for action in as_list(s["Action"])}
    # states: restarting a lost probe workflow (a death is a record and a metric, never a queue message); sqs: the
    # first messages of the notices' operational webhooks, on the delivery queue (its only queue: tests/integration/
    # test_least_privilege.py checks every call against the table of functions).
    assert services == {"dynamodb", "sns", "kms", "logs", "states", "sqs"}  # no xray: tracing is off by default

    sns = [s for s in statements if actions_on([s], "sns:")]
    assert actions_on(sns, "sns:") == {"sns:Publish"}
    assert [as_list(s["Resource"]) for s in sns] == [[{"Ref": topic_id}]]
    kms = [s for s in statements if actions_on([s], "kms:")]
    assert actions_on(kms, "kms:") <= {"kms:Decrypt", "kms:GenerateDataKey*"}
    assert all(as_list(s["Resource"]) == [{"Fn::GetAtt": [key_id, "Arn"]}] for s in kms)

    endpoints = logical_id_of(synthesized, "AWS::DynamoDB::Table", "Storage/Endpoints")
    deliveries = logical_id_of(synthesized, "AWS::DynamoDB::Table", "Storage/Deliveries")
    events = logical_id_of(synthesized, "AWS::DynamoDB::Table", "Storage/Events")
    event_log = logical_id_of(synthesized, "AWS::DynamoDB::Table", "Storage/EventLog")
    by_table: dict[str | None, set[str]] = {}
    for statement in statements:
        for resource in as_list(statement["Resource"]):
            if actions_on([statement], "dynamodb:"):
                by_table.setdefault(table_of(resource), set()).update(actions_on([statement], "dynamodb:"))
    lot = logical_id_of(synthesized, "AWS::DynamoDB::Table", "Storage/ParkingLot")
    tenants = logical_id_of(synthesized, "AWS::DynamoDB::Table", "Storage/Tenants")
    # tenants: read by ingest, for the webhooks; the event log: the delivery log's other half, and events' expiry
    assert set(by_table) == {endpoints, deliveries, events, event_log, lot, tenants}
    assert by_table[event_log] & {"dynamodb:PutItem", "dynamodb:BatchWriteItem", "dynamodb:DeleteItem"} == set()
    assert by_table[tenants] & {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"} == set()
    # The lot's entries go when their parked deliveries end (the records themselves are never deleted).
    assert "dynamodb:DeleteItem" in by_table[lot]
    assert by_table[endpoints] & {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"} == {
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
    }
    assert "dynamodb:BatchWriteItem" not in by_table[endpoints]
    # Parked deliveries are ended (dead past their horizon, cancelled when disabled) by conditional updates; the
    # operational webhooks' events and deliveries are conditional puts. Never a delete, never a batch write.
    for table in (deliveries, events):
        assert by_table[table] & {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"} == {
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
        }
        assert "dynamodb:BatchWriteItem" not in by_table[table]


@pytest.mark.parametrize("name", [function.name for function in FUNCTIONS if function is not SWEEPER])
def test_no_other_function_publishes_notices(synthesized: Synthesized, name: str) -> None:
    statements = role_statements(synthesized, function_role(synthesized, name))
    assert actions_on(statements, "sns:") == set() and actions_on(statements, "kms:") == set()


def test_the_endpoints_table_has_the_sparse_failing_and_open_circuit_indexes(synthesized: Synthesized) -> None:
    table_id = logical_id_of(synthesized, "AWS::DynamoDB::Table", "Storage/Endpoints")
    indexes = synthesized.template["Resources"][table_id]["Properties"]["GlobalSecondaryIndexes"]
    keys = {index["IndexName"]: [k["AttributeName"] for k in index["KeySchema"]] for index in indexes}
    assert keys == {
        schema.FAILING_ENDPOINTS_INDEX.name: ["failing", "failing_since"],
        schema.OPEN_CIRCUITS_INDEX.name: ["circuit_mark", "circuit_opened_at"],
    }


@pytest.mark.parametrize("bad", [3, 2.5, 31, "soon", True, -1])
def test_an_invalid_auto_disable_threshold_fails_synth_with_a_clear_message(bad: object) -> None:
    from aws_cdk import App

    from stacks.config import InvalidConfiguration
    from stacks.hookrelay_stack import HookrelayStack

    app = App(context={"auto_disable_after_days": bad})
    with pytest.raises(InvalidConfiguration, match=r"auto_disable_after_days=.* is not valid"):
        HookrelayStack(app, "Invalid")


@pytest.mark.parametrize(("context", "days"), [(None, 5.0), (7, 7.0), ("4.5", 4.5)])
def test_the_auto_disable_threshold_is_read_with_the_runtime_parser(context: object, days: float) -> None:
    from aws_cdk import App

    from stacks import config

    app = App(context={config.AUTO_DISABLE_CONTEXT: context} if context is not None else None)
    assert config.auto_disable_policy(app.node).disable_after_days == days


def test_the_local_stack_runs_exactly_the_tables_scheduled_functions_on_timers() -> None:
    from local.stack import scheduled_functions

    for fast in (False, True):
        assert [timer.function for timer in scheduled_functions(fast=fast)] == [SWEEPER.name, RECONCILER.name]
