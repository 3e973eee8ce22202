"""Every function of the table of functions, as its entry says: handler, timeout, memory, trigger, resources' names."""

from __future__ import annotations

import json
import re

import pytest

from hookrelay.adapters import aws, schema
from hookrelay.adapters.telemetry import METRICS_NAMESPACE
from hookrelay.domain.lanes import DEFAULT_SLOW_LANE_AFTER_MS
from hookrelay.domain.queues import DeliveryLane
from hookrelay.domain.schedule import DEFAULT_SCHEDULE, schedule_from_config
from hookrelay.functions import (
    DELIVERY,
    FUNCTIONS,
    INTERPRETER_ENVIRONMENT,
    ApiRoutes,
    event_sources,
    queue_trigger,
)
from tests.support.synth import (
    CUSTOM_RETRY_SCHEDULE,
    DELIVERY_SHARDS,
    Synthesized,
    function_logical_ids,
    logical_id_of,
    stage_settings,
)


def _function(synthesized: Synthesized, name: str) -> dict:
    return synthesized.template["Resources"][function_logical_ids(synthesized)[name]]["Properties"]


def test_there_is_one_function_per_entry_of_the_table(synthesized: Synthesized) -> None:
    handlers = sorted(props["Handler"] for props in synthesized.properties("AWS::Lambda::Function"))
    assert handlers == sorted(function.handler for function in FUNCTIONS)


def test_each_function_has_its_entrys_timeout_and_memory(synthesized: Synthesized) -> None:
    for function in FUNCTIONS:
        props = _function(synthesized, function.name)
        assert (props["Timeout"], props["MemorySize"]) == (function.timeout_seconds, function.memory_mb), function.name


def test_every_function_is_arm64_on_the_chosen_python(synthesized: Synthesized) -> None:
    for props in synthesized.properties("AWS::Lambda::Function"):
        assert props["Architectures"] == ["arm64"]
        assert props["Runtime"] == stage_settings()["lambda_runtime"]  # the deployment setting
        assert props["Environment"]["Variables"]["POWERTOOLS_METRICS_NAMESPACE"] == METRICS_NAMESPACE


def test_every_function_starts_its_interpreter_with_the_cold_start_settings(synthesized: Synthesized) -> None:
    for props in synthesized.properties("AWS::Lambda::Function"):
        variables = props["Environment"]["Variables"]
        assert {name: variables.get(name) for name in INTERPRETER_ENVIRONMENT} == INTERPRETER_ENVIRONMENT


def test_no_deployed_function_calls_aws_unsigned_or_unchecked(synthesized: Synthesized) -> None:
    """Only the local stack's functions skip signing and botocore's checks (their calls go to moto); AWS refuses
    unsigned calls."""
    for props in synthesized.properties("AWS::Lambda::Function"):
        assert aws.LOCAL_MOTO_CALLS not in props["Environment"]["Variables"]


def test_all_functions_share_one_code_asset(synthesized: Synthesized) -> None:
    keys = {json.dumps(props["Code"], sort_keys=True) for props in synthesized.properties("AWS::Lambda::Function")}
    assert len(keys) == 1


def test_the_delivery_function_consumes_every_delivery_queue_with_partial_batch_responses(
    synthesized: Synthesized,
) -> None:
    """N shards: 2N FIFO delivery queues, each an event source of the delivery function: a fast lane's batches of
    10, a slow lane's of 1."""
    delivery_id = function_logical_ids(synthesized)["delivery"]
    assert _function(synthesized, "delivery")["Timeout"] == schema.DELIVERY_FUNCTION_TIMEOUT_SECONDS
    mappings = [
        m
        for m in synthesized.properties("AWS::Lambda::EventSourceMapping")
        if m["FunctionName"] == {"Ref": delivery_id}
    ]
    shards = int(DELIVERY_SHARDS)
    queue_ids = {
        logical_id_of(synthesized, "AWS::SQS::Queue", f"Queues/{spec.logical_name}"): spec
        for spec in schema.delivery_queues(shards)
    }
    assert len(queue_ids) == len(mappings) == 2 * shards
    by_queue = {m["EventSourceArn"]["Fn::GetAtt"][0]: m for m in mappings}
    lanes = {(queue_ids[queue_id].shard, queue_ids[queue_id].lane) for queue_id in by_queue}
    assert lanes == {(shard, lane) for shard in range(shards) for lane in DeliveryLane}
    for queue_id, mapping in by_queue.items():
        fast = queue_ids[queue_id].lane is DeliveryLane.FAST
        assert mapping["BatchSize"] == (queue_trigger(DELIVERY).batch_size if fast else 1) == (10 if fast else 1)
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        # Lambda refuses (at deploy) an event source whose queue is visible again before its function has timed out.
        queue = synthesized.template["Resources"][queue_id]["Properties"]
        assert queue["VisibilityTimeout"] >= _function(synthesized, "delivery")["Timeout"]
        assert queue["FifoQueue"] is True


def test_shard_0s_fast_lane_keeps_the_one_delivery_queues_logical_id_and_its_event_sources(
    synthesized: Synthesized,
) -> None:
    """An upgrade updates the live queue and its event source in place instead of replacing them."""
    queue = logical_id_of(synthesized, "AWS::SQS::Queue", "Queues/DeliveryQueue")
    assert re.fullmatch(r"QueuesDeliveryQueue[0-9A-F]{8}", queue)  # the construct path of before shards
    source = logical_id_of(synthesized, "AWS::Lambda::EventSourceMapping", "Functions/DeliveryEventSource")
    mapping = synthesized.template["Resources"][source]["Properties"]
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": [queue, "Arn"]}


def test_each_queue_trigger_of_the_table_is_an_event_source_mapping(synthesized: Synthesized) -> None:
    """The SQS event sources are exactly the table's queue triggers, which the local stack also runs."""
    queue_names = {
        logical_id_of(synthesized, "AWS::SQS::Queue", f"Queues/{spec.logical_name}"): spec.logical_name
        for spec in schema.all_queues(int(DELIVERY_SHARDS))
    }
    names = {logical_id: name for name, logical_id in function_logical_ids(synthesized).items()}
    deployed = {
        (
            names[mapping["FunctionName"]["Ref"]],
            queue_names[mapping["EventSourceArn"]["Fn::GetAtt"][0]],
            mapping["BatchSize"],
            mapping.get("ScalingConfig", {}).get("MaximumConcurrency"),
        )
        for mapping in synthesized.properties("AWS::Lambda::EventSourceMapping")
        if mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    }
    # An entry's own maximum concurrency, else the deployment's (the stage file; stacks/config.py).
    configured = {"delivery": stage_settings()["delivery_max_concurrency"]}
    expected = {
        (
            source.function.name,
            source.queue.logical_name,
            source.batch_size,
            source.max_concurrency or configured.get(source.function.name),
        )
        for source in event_sources(int(DELIVERY_SHARDS))
    }
    assert deployed == expected
    # The delivery queues' 2 x 3 and the redrive jobs queue's.
    assert len(synthesized.properties("AWS::Lambda::EventSourceMapping")) == len(expected) == 7


def test_functions_get_the_names_of_exactly_the_resources_they_may_touch(synthesized: Synthesized) -> None:
    shared = {schema.RETRY_SCHEDULE, schema.ATTEMPT_TIMEOUT_SECONDS, schema.AUTO_DISABLE_AFTER_DAYS}
    for function in FUNCTIONS:
        access = function.access
        variables = set(_function(synthesized, function.name)["Environment"]["Variables"]) - shared
        variables -= set(INTERPRETER_ENVIRONMENT)  # the same for every function (the cold start's settings)
        expected = {spec.env_var for spec in access.tables}
        expected |= {spec.env_var for spec in (*access.sends_to, *access.drains)}
        if access.starts_retries or access.answers_retries:
            expected.add(schema.RETRY_STATE_MACHINE_ARN)
        expected |= {topic.env_var for topic in access.publishes}
        if isinstance(function.trigger, ApiRoutes):  # the per-key rate limit (tests/infrastructure/test_operations.py)
            expected.add(schema.API_KEY_RATE_PER_SECOND)
        if function.name == "api":  # the event catalogue's filter rule (tests/infrastructure/test_event_types.py)
            expected.add(schema.ENFORCE_EVENT_CATALOGUE)
            # ... and the per-tenant limits it enforces on endpoints (tests/unit/test_limits.py).
            expected |= {schema.MAX_ENDPOINTS_PER_TENANT, schema.MAX_FILTERS_PER_ENDPOINT}
        if function.name in (
            "api",
            "delivery",
        ):  # the endpoint URLs' ports (tests/infrastructure/test_endpoint_ports.py)
            expected.add(schema.ENDPOINT_PORTS)
        if function.name == "api":  # where portal links point (tests/integration/test_portal_capabilities.py)
            expected.add(schema.API_URL)
        if schema.DELIVERIES in access.tables:  # the log's write shards (tests/unit/test_log_shards_setting.py)
            expected.add(schema.DELIVERY_LOG_SHARDS)
        if function.name == "delivery":  # the lanes' threshold (domain/lanes.py)
            expected.add(schema.SLOW_LANE_AFTER_MS)
        assert {v for v in variables if not v.startswith("POWERTOOLS_")} == expected, function.name


def test_every_resource_has_its_own_environment_variable() -> None:
    # Every delivery queue's URL is in the delivery queue's one variable.
    specs = (*schema.ALL_TABLES, *schema.OTHER_QUEUES, schema.DELIVERY_QUEUE, *schema.ALL_TOPICS)
    assert len({spec.env_var for spec in specs}) == len(specs)


def test_private_destinations_are_never_allowed_in_the_deployed_stack(synthesized: Synthesized) -> None:
    for props in synthesized.properties("AWS::Lambda::Function"):
        assert schema.ALLOW_PRIVATE_DESTINATIONS not in props["Environment"]["Variables"]


def test_the_schedule_context_reaches_every_function(synthesized: Synthesized) -> None:
    expected = schedule_from_config(CUSTOM_RETRY_SCHEDULE)
    for props in synthesized.properties("AWS::Lambda::Function"):
        configured = props["Environment"]["Variables"][schema.RETRY_SCHEDULE]
        assert schedule_from_config(configured) == expected
    assert expected != DEFAULT_SCHEDULE


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        (None, DEFAULT_SCHEDULE),
        ("short", schedule_from_config("short")),
        ([0, 10, 20], schedule_from_config([0, 10, 20])),
    ],
)
def test_the_schedule_context_is_read_with_the_runtime_parser(context: object, expected: object) -> None:
    from aws_cdk import App

    from stacks import config

    app = App(context={config.RETRY_SCHEDULE_CONTEXT: context} if context is not None else None)
    assert config.retry_schedule(app.node) == expected


@pytest.mark.parametrize("bad", ["weekly", "[30, 60]", "[0, -5]", '{"gaps": [0, 60], "horizon": 10}', "[0, 1"])
def test_an_invalid_schedule_fails_synth_with_a_clear_message(bad: str) -> None:
    from aws_cdk import App

    from stacks.config import InvalidConfiguration
    from stacks.hookrelay_stack import HookrelayStack

    app = App(context={"retry_schedule": bad})
    with pytest.raises(InvalidConfiguration, match=r"retry_schedule=.* is not a valid retry schedule"):
        HookrelayStack(app, "Invalid")


def test_the_slow_lane_s_threshold_is_the_stage_s_setting(synthesized: Synthesized) -> None:
    variables = _function(synthesized, "delivery")["Environment"]["Variables"]
    assert variables[schema.SLOW_LANE_AFTER_MS] == str(DEFAULT_SLOW_LANE_AFTER_MS)
