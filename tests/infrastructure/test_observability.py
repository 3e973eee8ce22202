"""Alarms on dead letters, poison messages, function errors and failed workflows, notifying an encrypted topic."""

from __future__ import annotations

from typing import Any

from hookrelay.adapters import schema
from hookrelay.adapters.telemetry import METRICS_NAMESPACE, dead_metric
from hookrelay.domain.queues import DeliveryLane
from hookrelay.domain.status import DeadReason
from hookrelay.functions import INGEST
from hookrelay.services.ports import INTAKE_METRICS
from tests.support.synth import DELIVERY_SHARDS, Synthesized, function_logical_ids, logical_id_of


def _alarms(synthesized: Synthesized) -> list[dict[str, Any]]:
    return synthesized.properties("AWS::CloudWatch::Alarm")


def _alarms_on(synthesized: Synthesized, metric: str, dimension: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        alarm
        for alarm in _alarms(synthesized)
        if alarm.get("MetricName") == metric and dimension in [d["Value"] for d in alarm.get("Dimensions", [])]
    ]


def _queue_name(synthesized: Synthesized, spec: schema.QueueSpec) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id_of(synthesized, "AWS::SQS::Queue", f"Queues/{spec.logical_name}"), "QueueName"]}


def test_the_dead_letter_and_poison_queues_are_alarmed_on_age_only(synthesized: Synthesized) -> None:
    # The reconciler empties both every 5 minutes: a message waiting is normal, an old one means surfacing broke.
    for spec in (schema.DEAD_LETTER_QUEUE, schema.POISON_QUEUE):
        queue = _queue_name(synthesized, spec)
        assert len(_alarms_on(synthesized, "ApproximateNumberOfMessagesVisible", queue)) == 0
        assert len(_alarms_on(synthesized, "ApproximateAgeOfOldestMessage", queue)) == 1


def test_the_deaths_the_platform_causes_are_alarmed_and_a_tenants_are_not(synthesized: Synthesized) -> None:
    alarmed = {
        alarm["MetricName"] for alarm in synthesized.properties("AWS::CloudWatch::Alarm") if "MetricName" in alarm
    }
    assert {dead_metric(DeadReason.POISON), dead_metric(DeadReason.ATTEMPT_LOST)} <= alarmed
    assert dead_metric(DeadReason.EXHAUSTED) not in alarmed and dead_metric(DeadReason.HORIZON) not in alarmed


def _oldest_message_of(alarm: dict[str, Any]) -> list[dict[str, Any]]:
    """The queues a metric math alarm takes the oldest message's age of (MAX over them), by their QueueName."""
    stats = [m["MetricStat"] for m in alarm.get("Metrics", []) if "MetricStat" in m]
    assert all(s["Metric"]["MetricName"] == "ApproximateAgeOfOldestMessage" for s in stats)
    return [d["Value"] for s in stats for d in s["Metric"]["Dimensions"]]


def test_the_delivery_backlog_and_failed_redrive_jobs_are_alarmed(synthesized: Synthesized) -> None:
    # One alarm per lane over every shard's queue of that lane (as many alarms, and runbook sections, for any N).
    for lane, name in ((DeliveryLane.FAST, "DeliveryBacklogAging"), (DeliveryLane.SLOW, "SlowLaneBacklogAging")):
        alarm_id = logical_id_of(synthesized, "AWS::CloudWatch::Alarm", f"Observability/{name}")
        alarm = synthesized.template["Resources"][alarm_id]["Properties"]
        specs = [spec for spec in schema.delivery_queues(int(DELIVERY_SHARDS)) if spec.lane is lane]
        assert sorted(map(str, _oldest_message_of(alarm))) == sorted(str(_queue_name(synthesized, s)) for s in specs)
        [expression] = [m["Expression"] for m in alarm["Metrics"] if "Expression" in m]
        assert expression.startswith("MAX([") and alarm["Threshold"] == 3600
    redrive_jobs = _queue_name(synthesized, schema.REDRIVE_JOBS_DEAD_LETTER_QUEUE)
    assert len(_alarms_on(synthesized, "ApproximateNumberOfMessagesVisible", redrive_jobs)) == 1


def test_every_function_is_alarmed_on_errors(synthesized: Synthesized) -> None:
    for name, logical_id in function_logical_ids(synthesized).items():
        assert len(_alarms_on(synthesized, "Errors", {"Ref": logical_id})) == 1, name


def test_failed_and_timed_out_workflows_are_alarmed(synthesized: Synthesized) -> None:
    state_machine = {
        "Ref": logical_id_of(synthesized, "AWS::StepFunctions::StateMachine", "RetryWorkflow/StateMachine")
    }
    assert len(_alarms_on(synthesized, "ExecutionsFailed", state_machine)) == 1
    assert len(_alarms_on(synthesized, "ExecutionsTimedOut", state_machine)) == 1


def test_every_alarm_notifies_the_encrypted_topic(synthesized: Synthesized) -> None:
    topic_id = logical_id_of(synthesized, "AWS::SNS::Topic", "Observability/AlarmTopic")
    topic = synthesized.template["Resources"][topic_id]
    assert "KmsMasterKeyId" in topic["Properties"]
    for alarm in _alarms(synthesized):
        assert alarm["AlarmActions"] == [{"Ref": topic_id}]


def test_there_is_a_dashboard(synthesized: Synthesized) -> None:
    assert len(synthesized.resources("AWS::CloudWatch::Dashboard")) == 1


def test_the_outputs_name_the_api_the_key_table_and_the_queues(synthesized: Synthesized) -> None:
    outputs = synthesized.template["Outputs"]
    assert "ApiUrl" in outputs
    api_keys = logical_id_of(synthesized, "AWS::DynamoDB::Table", "Storage/ApiKeys")
    assert outputs["ApiKeysTableName"]["Value"] == {"Ref": api_keys}
    assert outputs["DeliveryShards"]["Value"] == DELIVERY_SHARDS  # what scripts/deploy.py holds the next deploy to
    for spec in schema.all_queues(int(DELIVERY_SHARDS)):
        queue = logical_id_of(synthesized, "AWS::SQS::Queue", f"Queues/{spec.logical_name}")
        assert outputs[f"{spec.logical_name}Url"]["Value"] == {"Ref": queue}


def test_failing_spell_bookkeeping_errors_are_alarmed(synthesized: Synthesized) -> None:
    alarms = [a for a in _alarms(synthesized) if a.get("MetricName") == "FailingSpellErrors"]
    assert [(a["Namespace"], a["Dimensions"]) for a in alarms] == [
        (METRICS_NAMESPACE, [{"Name": "service", "Value": "delivery"}])
    ]


def _throttles_summed_by(alarm: dict[str, Any]) -> set[tuple[str, Any, str | None]]:
    """(metric, table, index) of each metric a metric math alarm adds up, checking that it adds them all."""
    stats = {m["Id"]: m["MetricStat"]["Metric"] for m in alarm["Metrics"] if "MetricStat" in m}
    [expression] = [m["Expression"] for m in alarm["Metrics"] if "Expression" in m]
    assert sorted(expression.split(" + ")) == sorted(f"FILL({metric_id}, 0)" for metric_id in stats)
    summed = set()
    for metric in stats.values():
        dimensions = {d["Name"]: d["Value"] for d in metric["Dimensions"]}
        assert metric["Namespace"] == "AWS/DynamoDB" and set(dimensions) <= {"TableName", "GlobalSecondaryIndexName"}
        summed.add((metric["MetricName"], str(dimensions["TableName"]), dimensions.get("GlobalSecondaryIndexName")))
    return summed


def test_every_table_is_alarmed_on_hot_key_and_quota_throttles_of_it_and_its_indexes(synthesized: Synthesized) -> None:
    for spec in schema.ALL_TABLES:
        table = {"Ref": logical_id_of(synthesized, "AWS::DynamoDB::Table", f"Storage/{spec.logical_name}")}
        alarm_id = logical_id_of(
            synthesized, "AWS::CloudWatch::Alarm", f"Observability/{spec.logical_name}TableThrottled"
        )
        alarm = synthesized.template["Resources"][alarm_id]["Properties"]
        causes = ("KeyRangeThroughput", "AccountLimit")
        expected = {(f"{op}{cause}ThrottleEvents", str(table), None) for op in ("Read", "Write") for cause in causes}
        expected |= {
            (f"Write{cause}ThrottleEvents", str(table), index.name) for index in spec.indexes for cause in causes
        }
        assert _throttles_summed_by(alarm) == expected, spec.logical_name
        assert alarm["Threshold"] == 0 and alarm["ComparisonOperator"] == "GreaterThanThreshold"


def test_the_dashboard_graphs_ingests_intake(synthesized: Synthesized) -> None:
    """Every intake count the ingest handler emits, under its service (tests/integration/test_ingest.py checks the
    emitting side against the same names)."""
    [dashboard] = synthesized.properties("AWS::CloudWatch::Dashboard")
    body = "".join(part for part in dashboard["DashboardBody"]["Fn::Join"][1] if isinstance(part, str))
    for name in INTAKE_METRICS:
        assert f'["{METRICS_NAMESPACE}","{name}","service","{INGEST.name}"' in body, name
