"""The delivery log's write shards as a deployment setting: validated from CDK context, carried to every function
that may write or read the log (and to no other), stated by the stage files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hookrelay.adapters import schema
from hookrelay.function_environment import Resources, Settings, environment
from hookrelay.functions import FUNCTIONS
from local.stack import parse_args
from stacks import config

ROOT = Path(__file__).resolve().parents[2]


class _Node:
    def __init__(self, context: dict[str, Any]) -> None:
        self.context = context

    def try_get_context(self, key: str) -> Any:
        return self.context.get(key)


def test_the_context_is_validated_and_defaults_to_the_schema_s_count() -> None:
    assert config.log_shards(_Node({})) == schema.DEFAULT_LOG_SHARDS
    assert config.log_shards(_Node({"log_shards": "64"})) == 64
    assert config.log_shards(_Node({"log_shards": schema.MAX_LOG_SHARDS})) == schema.MAX_LOG_SHARDS
    for bad in (0, schema.MAX_LOG_SHARDS + 1, True, "many", -4, 2.5):
        with pytest.raises(config.InvalidConfiguration, match="log_shards"):
            config.log_shards(_Node({"log_shards": bad}))
    assert config.LOG_SHARDS_CONTEXT in config.setting_names()


def test_every_function_with_the_deliveries_table_is_deployed_with_the_count_and_no_other_is() -> None:
    resources = Resources(
        table_names={spec: spec.logical_name for spec in schema.ALL_TABLES},
        queue_urls={spec: spec.logical_name for spec in schema.all_queues(2)},
        topic_arns={spec: spec.logical_name for spec in schema.ALL_TOPICS},
        retry_state_machine_arn="arn",
        api_url="https://api.example",
    )
    settings = Settings("default", 10, "5", None, False, log_shards=48)
    given = set()
    for function in FUNCTIONS:
        env = environment(function, resources, settings)
        if schema.DELIVERIES in function.access.tables:
            assert env[schema.DELIVERY_LOG_SHARDS] == "48", function.name
            given.add(function.name)
        else:
            assert schema.DELIVERY_LOG_SHARDS not in env, function.name
    assert {"api", "delivery", "ingest"} <= given  # the log's writers and its reader


@pytest.mark.parametrize("stage", ["dev", "production"])
def test_the_stage_files_state_a_valid_count(stage: str) -> None:
    settings = json.loads((ROOT / "deploy" / f"{stage}.json").read_text())
    assert config.log_shards(_Node(settings)) == settings[config.LOG_SHARDS_CONTEXT]


def test_the_local_stack_takes_the_count_checked_as_synth_checks_it() -> None:
    assert parse_args([]).log_shards == schema.DEFAULT_LOG_SHARDS
    assert parse_args(["--log-shards", "16"]).log_shards == 16
    with pytest.raises(SystemExit):
        parse_args(["--log-shards", str(schema.MAX_LOG_SHARDS + 1)])
