"""The event-type catalogue's table, who may touch it, and the `enforce_event_catalogue` context's way to the API."""

from __future__ import annotations

from typing import Any

import pytest

from hookrelay.adapters import schema
from hookrelay.services.event_types import enforce_from_config
from stacks import config
from tests.support.synth import (
    ENFORCED_EVENT_CATALOGUE,
    Synthesized,
    actions_on,
    as_list,
    function_logical_ids,
    function_role,
    logical_id_of,
    role_statements,
    stage_settings,
)

WRITES = {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}


def _on_catalogue(synthesized: Synthesized, function: str) -> set[str]:
    table = logical_id_of(synthesized, "AWS::DynamoDB::Table", "Storage/EventTypes")
    statements = role_statements(synthesized, function_role(synthesized, function))
    on_table = [s for s in statements if {"Fn::GetAtt": [table, "Arn"]} in as_list(s["Resource"])]
    return actions_on(on_table, "dynamodb:")


def test_the_catalogue_table_is_one_partition_sorted_by_name(synthesized: Synthesized) -> None:
    table = synthesized.resources("AWS::DynamoDB::Table")[
        logical_id_of(synthesized, "AWS::DynamoDB::Table", "Storage/EventTypes")
    ]["Properties"]
    assert table["KeySchema"] == [
        {"AttributeName": schema.EVENT_TYPES.partition_key, "KeyType": "HASH"},
        {"AttributeName": "name", "KeyType": "RANGE"},
    ]


def test_ingest_only_reads_the_catalogue_and_the_api_writes_it(synthesized: Synthesized) -> None:
    ingest = _on_catalogue(synthesized, "ingest")
    assert {"dynamodb:GetItem", "dynamodb:Query"} <= ingest and not ingest & WRITES
    api = _on_catalogue(synthesized, "api")
    assert {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:DeleteItem"} <= api
    for function in ("authorizer", "delivery", "redrive", "sweeper", "reconciler"):
        assert _on_catalogue(synthesized, function) == set(), function


def test_the_enforcement_context_reaches_the_api_function_only(synthesized: Synthesized) -> None:
    for name, logical_id in function_logical_ids(synthesized).items():
        environment = synthesized.template["Resources"][logical_id]["Properties"]["Environment"]["Variables"]
        expected = ENFORCED_EVENT_CATALOGUE if name == "api" else None
        assert environment.get(schema.ENFORCE_EVENT_CATALOGUE) == expected, name
    assert enforce_from_config(ENFORCED_EVENT_CATALOGUE) is True


class _Node:
    def __init__(self, context: dict[str, Any]) -> None:
        self.context = context

    def try_get_context(self, key: str) -> Any:
        return self.context.get(key)


@pytest.mark.parametrize(("given", "expected"), [(None, False), (False, False), ("false", False), (True, True)])
def test_enforcement_is_off_unless_the_context_turns_it_on(given: object, expected: bool) -> None:
    node: Any = _Node({} if given is None else {config.ENFORCE_EVENT_CATALOGUE_CONTEXT: given})
    assert config.enforce_event_catalogue(node) is expected
    assert stage_settings()[config.ENFORCE_EVENT_CATALOGUE_CONTEXT] is False


@pytest.mark.parametrize("bad", ["yes", 1, "on"])
def test_a_bad_enforcement_setting_fails_synth_with_a_clear_message(bad: object) -> None:
    node: Any = _Node({config.ENFORCE_EVENT_CATALOGUE_CONTEXT: bad})
    with pytest.raises(config.InvalidConfiguration, match="enforce_event_catalogue"):
        config.enforce_event_catalogue(node)
