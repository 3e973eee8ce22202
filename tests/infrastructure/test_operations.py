"""What an operator relies on: no noisy tenant can take the account's concurrency, throttles and every alarm
reach someone, and an upgrade can never replace (or a stray delete remove) a table."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hookrelay.adapters import schema
from hookrelay.domain.rate_limit import DEFAULT_PER_KEY_PER_SECOND
from hookrelay.functions import ROUTES
from stacks import config
from tests.support.synth import (
    ALARM_EMAIL,
    DELIVERY_SHARDS,
    Synthesized,
    function_logical_ids,
    logical_id_of,
    stage_settings,
)

# The tables' logical ids as deployed. A table whose logical id changes is a new table to CloudFormation: the old
# one is orphaned (retained) and the new one starts empty. So they are pinned: a change here must be deliberate,
# and must come with a migration (docs/deploying.md, "Upgrading").
PINNED_TABLE_IDS = {
    "Tenants": "StorageTenants23CFB847",
    "ApiKeys": "StorageApiKeys7B037C32",
    "Endpoints": "StorageEndpointsF05A81BA",
    "Events": "StorageEvents1AF1C090",
    "Deliveries": "StorageDeliveriesE42B5069",
    "Idempotency": "StorageIdempotency5C96D584",
    "Redrives": "StorageRedrives58AE031F",
    "RateLimits": "StorageRateLimitsE7433BBF",
    "ParkingLot": "StorageParkingLot027D8C8F",
    "EventTypes": "StorageEventTypes37E4DCD5",  # new with the event catalogue: created empty on deploy
    "PortalSessions": "StoragePortalSessions2D33C212",
    "Mailboxes": "StorageMailboxes442A6634",  # new with pull delivery: created empty on deploy
    "Checkpoints": "StorageCheckpoints2CDBDF43",  # new with the reconciler's checkpoint: created empty on deploy
    "SlowTails": "StorageSlowTails19781EC7",  # new with the tails off the endpoints' items: created empty on deploy
    "EventLog": "StorageEventLogB987CAE5",  # new with the event log (issue 28): created empty on deploy
}


def test_table_logical_ids_are_pinned(synthesized: Synthesized) -> None:
    found = {
        spec.logical_name: logical_id_of(synthesized, "AWS::DynamoDB::Table", f"Storage/{spec.logical_name}")
        for spec in schema.ALL_TABLES
    }
    assert found == PINNED_TABLE_IDS


def test_every_table_is_deletion_protected(synthesized: Synthesized) -> None:
    for logical_id, table in synthesized.resources("AWS::DynamoDB::Table").items():
        assert table["Properties"]["DeletionProtectionEnabled"] is True, logical_id


def test_the_delivery_event_source_has_the_configured_maximum_concurrency(synthesized: Synthesized) -> None:
    """Each delivery queue's event source: the setting is per event source, as SQS event sources' maximum is."""
    delivery = function_logical_ids(synthesized)["delivery"]
    mappings = [
        m for m in synthesized.properties("AWS::Lambda::EventSourceMapping") if m["FunctionName"] == {"Ref": delivery}
    ]
    assert len(mappings) == 2 * int(DELIVERY_SHARDS)
    for mapping in mappings:
        assert mapping["ScalingConfig"] == {"MaximumConcurrency": stage_settings()["delivery_max_concurrency"]}


def test_the_default_stage_reserves_no_concurrency(synthesized: Synthesized) -> None:
    ids = function_logical_ids(synthesized)
    functions = synthesized.template["Resources"]
    reserved = {
        name: functions[logical_id]["Properties"].get("ReservedConcurrentExecutions")
        for name, logical_id in ids.items()
    }
    # The default stage reserves none (it must deploy on a new account's quota of 10); test_logging_and_tracing's
    # second synth reserves for the two, as deploy/production.json does.
    assert {name: n for name, n in reserved.items() if n is not None} == stage_settings()["reserved_concurrency"] == {}


def test_the_functions_serving_routes_get_the_per_key_limit(synthesized: Synthesized) -> None:
    """They count it (handlers/http.py): the authorizer's answers are cached, so it does not see every request."""
    ids = function_logical_ids(synthesized)
    serving = {function.name for function in ROUTES.values()}
    for name, logical_id in ids.items():
        environment = synthesized.template["Resources"][logical_id]["Properties"]["Environment"]["Variables"]
        expected = str(stage_settings()["api_key_rate_per_second"]) if name in serving else None
        assert environment.get(schema.API_KEY_RATE_PER_SECOND) == expected, name


def test_every_function_is_alarmed_on_throttles(synthesized: Synthesized) -> None:
    throttled = {
        dimension["Value"]["Ref"]
        for alarm in synthesized.properties("AWS::CloudWatch::Alarm")
        if alarm.get("MetricName") == "Throttles"
        for dimension in alarm["Dimensions"]
    }
    assert throttled == set(function_logical_ids(synthesized).values())


def test_the_alarm_topic_is_an_output_and_mails_the_configured_address(synthesized: Synthesized) -> None:
    topic = logical_id_of(synthesized, "AWS::SNS::Topic", "Observability/AlarmTopic")
    assert synthesized.template["Outputs"]["AlarmTopicArn"]["Value"] == {"Ref": topic}
    subscriptions = synthesized.properties("AWS::SNS::Subscription")
    assert [(s["Protocol"], s["Endpoint"], s["TopicArn"]) for s in subscriptions] == [
        ("email", ALARM_EMAIL, {"Ref": topic})
    ]


def test_the_default_stage_file_states_the_defaults_the_code_applies() -> None:
    context = stage_settings()
    assert context["delivery_max_concurrency"] == config.DEFAULT_DELIVERY_MAX_CONCURRENCY
    assert context["reserved_concurrency"] == config.DEFAULT_RESERVED_CONCURRENCY
    assert context["api_key_rate_per_second"] == DEFAULT_PER_KEY_PER_SECOND
    assert context["alarm_email"] == ""
    assert context[config.STACK_NAME_CONTEXT] == config.DEFAULT_STACK_NAME


class _Node:
    def __init__(self, context: dict[str, Any]) -> None:
        self.context = context

    def try_get_context(self, key: str) -> Any:
        return self.context.get(key)


@pytest.mark.parametrize(
    ("key", "bad"),
    [
        ("delivery_max_concurrency", 1),
        ("delivery_max_concurrency", 1001),
        ("delivery_max_concurrency", "many"),
        ("reserved_concurrency", {"nobody": 5}),
        ("reserved_concurrency", {"ingest": 0}),
        ("reserved_concurrency", "not json"),
        ("api_key_rate_per_second", -1),
        ("api_key_rate_per_second", "fast"),
        ("alarm_email", "not an address"),
    ],
)
def test_bad_operational_settings_fail_synth_with_a_clear_message(key: str, bad: object) -> None:
    node: Any = _Node({key: bad})
    reader = {
        "delivery_max_concurrency": config.concurrency,
        "reserved_concurrency": config.concurrency,
        "api_key_rate_per_second": config.api_key_rate,
        "alarm_email": config.alarm_email,
    }[key]
    with pytest.raises(config.InvalidConfiguration, match=key):
        reader(node)


def test_settings_given_on_the_command_line_are_read() -> None:
    node: Any = _Node({"reserved_concurrency": json.dumps({"ingest": 50}), "api_key_rate_per_second": "0"})
    assert config.concurrency(node).reserved == {"ingest": 50}
    assert config.api_key_rate(node) is None
    assert config.alarm_email(node) is None
