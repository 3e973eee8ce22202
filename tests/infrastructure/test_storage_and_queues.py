"""Tables and queues in the template are exactly the ones `schema` defines, with the settings the design requires."""

from __future__ import annotations

import pytest

from hookrelay.adapters import schema
from hookrelay.domain.queues import DeliveryLane
from tests.support.synth import DELIVERY_SHARDS, Synthesized, logical_id_of


def _table(synthesized: Synthesized, spec: schema.TableSpec) -> dict:
    return synthesized.template["Resources"][
        logical_id_of(synthesized, "AWS::DynamoDB::Table", f"Storage/{spec.logical_name}")
    ]


def test_there_is_one_table_per_spec(synthesized: Synthesized) -> None:
    assert len(synthesized.resources("AWS::DynamoDB::Table")) == len(schema.ALL_TABLES)


def test_every_table_is_on_demand_encrypted_recoverable_and_retained(synthesized: Synthesized) -> None:
    for spec in schema.ALL_TABLES:
        table = _table(synthesized, spec)
        properties = table["Properties"]
        assert properties["BillingMode"] == "PAY_PER_REQUEST", spec.logical_name
        assert properties["SSESpecification"]["SSEEnabled"] is True, spec.logical_name
        assert properties["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True, spec.logical_name
        assert table["DeletionPolicy"] == "Retain" and table["UpdateReplacePolicy"] == "Retain", spec.logical_name


def test_tables_have_the_keys_indexes_and_ttl_of_their_spec(synthesized: Synthesized) -> None:
    for spec in schema.ALL_TABLES:
        properties = _table(synthesized, spec)["Properties"]
        expected_keys = [{"AttributeName": spec.partition_key, "KeyType": "HASH"}]
        if spec.sort_key:
            expected_keys.append({"AttributeName": spec.sort_key, "KeyType": "RANGE"})
        assert properties["KeySchema"] == expected_keys, spec.logical_name
        indexes = {index["IndexName"]: index for index in properties.get("GlobalSecondaryIndexes", [])}
        assert set(indexes) == {index.name for index in spec.indexes}, spec.logical_name
        for index in spec.indexes:
            assert indexes[index.name]["KeySchema"] == [
                {"AttributeName": index.partition_key, "KeyType": "HASH"},
                {"AttributeName": index.sort_key, "KeyType": "RANGE"},
            ]
            projection = indexes[index.name]["Projection"]
            assert projection["ProjectionType"] == index.projection, index.name
            assert sorted(projection.get("NonKeyAttributes", [])) == sorted(index.non_key_attributes), index.name


def test_no_index_projects_the_whole_item(synthesized: Synthesized) -> None:
    """An index projecting ALL is rewritten, and billed, on every update of its items (issue 12)."""
    for spec in schema.ALL_TABLES:
        properties = _table(synthesized, spec)["Properties"]
        for index in properties.get("GlobalSecondaryIndexes", []):
            assert index["Projection"]["ProjectionType"] in ("KEYS_ONLY", "INCLUDE"), index["IndexName"]
        ttl = properties.get("TimeToLiveSpecification")
        if spec.ttl_attribute:
            assert ttl == {"AttributeName": spec.ttl_attribute, "Enabled": True}, spec.logical_name
        else:
            assert ttl is None, spec.logical_name


def test_the_delivery_log_indexes_are_sharded_sparse_and_project_only_fixed_attributes(
    synthesized: Synthesized,
) -> None:
    """Spelled out, not derived from the spec: what issue 12 asks of the deliveries' indexes. Keys that spread a
    tenant's writes over shards, no per-event index of the fan-out, and INCLUDE projections of the ids that never
    change (the status index: also the completion attributes set as a delivery enters it)."""
    properties = _table(synthesized, schema.DELIVERIES)["Properties"]
    indexes = {
        index["IndexName"]: (
            [key["AttributeName"] for key in index["KeySchema"]],
            index["Projection"]["ProjectionType"],
            sorted(index["Projection"].get("NonKeyAttributes", [])),
        )
        for index in properties["GlobalSecondaryIndexes"]
    }
    ids = ["endpoint_id", "event_id", "tenant_id"]
    assert indexes == {
        "by_tenant": (["tenant_shard", "created_at"], "INCLUDE", ids),
        "by_tenant_status": (["tenant_status", "created_at"], "INCLUDE", sorted([*ids, "completed_at", "expires_at"])),
        "event_extras": (["event_extra", "created_at"], "INCLUDE", ids),
    }


def test_events_and_deliveries_expire_by_expires_at(synthesized: Synthesized) -> None:
    for spec in (schema.EVENTS, schema.DELIVERIES):
        ttl = _table(synthesized, spec)["Properties"]["TimeToLiveSpecification"]
        assert ttl == {"AttributeName": "expires_at", "Enabled": True}


def _queue(synthesized: Synthesized, spec: schema.QueueSpec) -> dict:
    logical_id = logical_id_of(synthesized, "AWS::SQS::Queue", f"Queues/{spec.logical_name}")
    return synthesized.template["Resources"][logical_id]["Properties"]


@pytest.mark.parametrize("shard", range(int(DELIVERY_SHARDS)))
@pytest.mark.parametrize("lane", list(DeliveryLane))
def test_every_delivery_queue_is_fifo_with_the_fifo_poison_queue(
    synthesized: Synthesized, shard: int, lane: DeliveryLane
) -> None:
    delivery = _queue(synthesized, schema.delivery_queue(shard, lane))
    poison_id = logical_id_of(synthesized, "AWS::SQS::Queue", f"Queues/{schema.POISON_QUEUE.logical_name}")
    assert delivery["FifoQueue"] is True
    assert _queue(synthesized, schema.POISON_QUEUE)["FifoQueue"] is True
    assert delivery["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [poison_id, "Arn"]},
        "maxReceiveCount": schema.DELIVERY_QUEUE.max_receive_count,
    }
    assert delivery["VisibilityTimeout"] == schema.DELIVERY_QUEUE.visibility_timeout_seconds
    assert delivery["MessageRetentionPeriod"] == schema.DELIVERY_QUEUE.retention_seconds
    # High-throughput FIFO: limits per message group (per endpoint slot), not 300 calls/s for the queue.
    assert (delivery["FifoThroughputLimit"], delivery["DeduplicationScope"]) == ("perMessageGroupId", "messageGroup")


def test_the_dead_letter_queue_is_a_standard_queue(synthesized: Synthesized) -> None:
    dead_letters = _queue(synthesized, schema.DEAD_LETTER_QUEUE)
    assert "FifoQueue" not in dead_letters
    assert "RedrivePolicy" not in dead_letters


def test_every_queue_is_encrypted_and_refuses_plain_http(synthesized: Synthesized) -> None:
    queues = synthesized.resources("AWS::SQS::Queue")
    assert len(queues) == len(schema.all_queues(int(DELIVERY_SHARDS)))
    assert all(queue["Properties"]["SqsManagedSseEnabled"] is True for queue in queues.values())
    denied_insecure = set()
    for policy in synthesized.properties("AWS::SQS::QueuePolicy"):
        for statement in policy["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Deny" and statement.get("Condition") == {
                "Bool": {"aws:SecureTransport": "false"}
            }:
                denied_insecure.update(queue["Ref"] for queue in policy["Queues"])
    assert denied_insecure == set(queues)
