"""Least privilege: each function's and the workflow's policies allow what its table entry's `Access` and the ASL
need, nothing broader."""

from __future__ import annotations

import json

import pytest

from hookrelay.adapters import schema
from hookrelay.functions import FUNCTIONS, TableAccess
from tests.support.synth import (
    DELIVERY_SHARDS,
    Synthesized,
    actions_on,
    as_list,
    function_role,
    logical_id_of,
    role_statements,
    table_of,
)

ACCESS = {function.name: function.access for function in FUNCTIONS}

TASK_TOKEN_ACTIONS = {"states:SendTaskSuccess", "states:SendTaskFailure"}


def test_no_policy_allows_a_service_wide_or_global_action(synthesized: Synthesized) -> None:
    for policy in synthesized.properties("AWS::IAM::Policy"):
        for statement in policy["PolicyDocument"]["Statement"]:
            for action in as_list(statement["Action"]):
                assert action != "*" and not action.endswith(":*"), action


def test_the_delivery_function_may_start_answer_and_stop_only_the_retry_workflow(synthesized: Synthesized) -> None:
    statements = role_statements(synthesized, function_role(synthesized, "delivery"))
    state_machine = logical_id_of(synthesized, "AWS::StepFunctions::StateMachine", "RetryWorkflow/StateMachine")
    states_statements = [s for s in statements if any(a.startswith("states:") for a in as_list(s["Action"]))]
    assert actions_on(states_statements, "states:") == {
        "states:StartExecution",
        "states:StopExecution",
        *TASK_TOKEN_ACTIONS,
    }
    for statement in states_statements:
        if as_list(statement["Action"]) == ["states:StopExecution"]:  # its executions, named per delivery
            [resource] = as_list(statement["Resource"])
            assert ":execution:" in json.dumps(resource) and state_machine in json.dumps(resource)
        else:
            assert as_list(statement["Resource"]) == [{"Ref": state_machine}]


def test_only_the_delivery_function_and_the_sweeper_touch_the_retry_workflow(synthesized: Synthesized) -> None:
    for name in ACCESS:
        statements = role_statements(synthesized, function_role(synthesized, name))
        if name == "sweeper":  # restarts a lost probe workflow: starts and describes, never answers
            assert actions_on(statements, "states:") == {"states:StartExecution", "states:DescribeExecution"}
        elif name != "delivery":
            assert actions_on(statements, "states:") == set(), name


def test_the_authorizer_only_reads_the_api_keys(synthesized: Synthesized) -> None:
    """Its answers are cached, so the per-key counters are the API functions' (below), not its own."""
    statements = role_statements(synthesized, function_role(synthesized, "authorizer"))
    api_keys = logical_id_of(synthesized, "AWS::DynamoDB::Table", "Storage/ApiKeys")
    sessions = logical_id_of(synthesized, "AWS::DynamoDB::Table", "Storage/PortalSessions")
    dynamodb = [s for s in statements if any(a.startswith("dynamodb:") for a in as_list(s["Action"]))]
    writes = {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}
    for read_only in (api_keys, sessions):  # API keys and portal sessions, read only: the rate limit is not here
        on_table = [s for s in dynamodb if {"Fn::GetAtt": [read_only, "Arn"]} in as_list(s["Resource"])]
        assert on_table and not actions_on(on_table, "dynamodb:") & writes
    assert {str(r) for s in dynamodb for r in as_list(s["Resource"])} <= {
        str({"Fn::GetAtt": [table, "Arn"]}) for table in (api_keys, sessions)
    } | {str({"Ref": "AWS::NoValue"})}
    assert actions_on(statements, "sqs:") == set()


@pytest.mark.parametrize("name", ["ingest", "api", "delivery"])
def test_the_api_functions_and_the_delivery_only_update_the_rate_limits(synthesized: Synthesized, name: str) -> None:
    """The API functions count requests per key; the delivery function takes endpoints' send slots
    (domain/pacing.py): conditional updates, never puts or deletes."""
    statements = role_statements(synthesized, function_role(synthesized, name))
    counters = logical_id_of(synthesized, "AWS::DynamoDB::Table", "Storage/RateLimits")
    writes = {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}
    on_counters = [s for s in statements if {"Fn::GetAtt": [counters, "Arn"]} in as_list(s.get("Resource", []))]
    assert actions_on(on_counters, "dynamodb:") & writes == {"dynamodb:UpdateItem"}


def test_each_function_touches_only_the_tables_its_access_names(synthesized: Synthesized) -> None:
    for name, access in ACCESS.items():
        statements = role_statements(synthesized, function_role(synthesized, name))
        granted = set()
        for statement in statements:
            if any(a.startswith("dynamodb:") for a in as_list(statement["Action"])):
                for resource in as_list(statement["Resource"]):
                    granted.add(table_of(resource))
        expected = {
            logical_id_of(synthesized, "AWS::DynamoDB::Table", f"Storage/{spec.logical_name}") for spec in access.tables
        }
        assert granted == expected, name


def test_read_only_tables_get_no_writes(synthesized: Synthesized) -> None:
    writes = {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}
    for name, access in ACCESS.items():
        statements = role_statements(synthesized, function_role(synthesized, name))
        for spec, mode in access.tables.items():
            table = logical_id_of(synthesized, "AWS::DynamoDB::Table", f"Storage/{spec.logical_name}")
            allowed = {
                action
                for s in statements
                if any(table_of(r) == table for r in as_list(s["Resource"]))
                for action in as_list(s["Action"])
            }
            if mode is TableAccess.READ:
                assert not allowed & writes, (name, spec.logical_name)
            if mode is TableAccess.READ_UPDATE:
                assert allowed & writes == {"dynamodb:UpdateItem"}, (name, spec.logical_name)


def test_the_delivery_function_may_update_endpoints_but_never_put_or_delete_them(synthesized: Synthesized) -> None:
    # The failing spell (auto-disable) is an UpdateItem on the endpoint, made on the delivery path.
    statements = role_statements(synthesized, function_role(synthesized, "delivery"))
    endpoints = logical_id_of(synthesized, "AWS::DynamoDB::Table", "Storage/Endpoints")
    on_endpoints = {
        action
        for s in statements
        if any(table_of(r) == endpoints for r in as_list(s["Resource"]))
        for action in as_list(s["Action"])
    }
    writes = {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}
    assert on_endpoints & writes == {"dynamodb:UpdateItem"}
    assert "dynamodb:GetItem" in on_endpoints


def test_the_workflow_role_only_sends_to_the_delivery_queues_and_the_dead_letter_queue(
    synthesized: Synthesized,
) -> None:
    """Its attempts and commands go to the delivery queue its input names (each shard's lanes); a lost attempt is
    reported on the dead-letter queue."""
    (role_arn,) = [p["RoleArn"] for p in synthesized.properties("AWS::StepFunctions::StateMachine")]
    statements = role_statements(synthesized, role_arn["Fn::GetAtt"][0])
    sqs = [s for s in statements if any(a.startswith("sqs:") for a in as_list(s["Action"]))]
    assert actions_on(sqs, "sqs:") == {"sqs:SendMessage"}
    sent_to = {resource["Fn::GetAtt"][0] for s in sqs for resource in as_list(s["Resource"])}
    specs = (*schema.delivery_queues(int(DELIVERY_SHARDS)), schema.DEAD_LETTER_QUEUE)
    expected = {logical_id_of(synthesized, "AWS::SQS::Queue", f"Queues/{spec.logical_name}") for spec in specs}
    assert sent_to == expected and len(expected) == 2 * int(DELIVERY_SHARDS) + 1
    other = {a.split(":")[0] for s in statements for a in as_list(s["Action"])} - {"sqs"}
    assert other <= {"logs", "xray"}  # execution logging and tracing, which CDK adds


def test_only_idempotency_records_and_parking_lot_entries_are_deleted(synthesized: Synthesized) -> None:
    """Records are revoked, soft-deleted or expired by TTL, never deleted; Powertools idempotency deletes the
    record of a request that failed, a parked delivery's lot entry goes when it leaves the lot, and ingest's batch
    writes carry the write grant as a whole. (An admin's DELETE of an event type removes a definition from the
    catalogue, which no record refers to; a poll endpoint's mailbox entry goes when its consumer acknowledges it,
    its delivery recorded delivered first; a slow-lane tail goes when the delivery function settles the message it
    names, whose attempt is recorded first.)"""
    idempotency = logical_id_of(synthesized, "AWS::DynamoDB::Table", "Storage/Idempotency")
    lot = logical_id_of(synthesized, "AWS::DynamoDB::Table", "Storage/ParkingLot")
    catalogue = logical_id_of(synthesized, "AWS::DynamoDB::Table", "Storage/EventTypes")
    mailboxes = logical_id_of(synthesized, "AWS::DynamoDB::Table", "Storage/Mailboxes")
    tails = logical_id_of(synthesized, "AWS::DynamoDB::Table", "Storage/SlowTails")
    for name in ACCESS:
        if name == "ingest":
            continue
        statements = role_statements(synthesized, function_role(synthesized, name))
        for statement in statements:
            if "dynamodb:DeleteItem" in as_list(statement["Action"]):
                deletable = {idempotency, lot} | ({catalogue, mailboxes} if name == "api" else set())
                deletable |= {tails} if name == "delivery" else set()
                assert {table_of(r) for r in as_list(statement["Resource"])} <= deletable, name
