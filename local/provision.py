"""Create every table, queue, topic and the state machine on whatever AWS endpoint boto3 points at (moto).

Built from the same definitions the CDK stack uses (`hookrelay.adapters.schema`, `statemachine`), so
there is no hand-kept second copy of the infrastructure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import boto3

import statemachine
from hookrelay.adapters import schema
from hookrelay.domain.queues import DEFAULT_DELIVERY_SHARDS


def delivery_queue_urls(env: Mapping[str, str]) -> schema.DeliveryQueueUrls:
    """The delivery queues' URLs, by shard and lane, from an environment `provision` returned (or a function's)."""
    return schema.DeliveryQueueUrls.parse(env[schema.DELIVERY_QUEUE.env_var])


def delivery_sources(env: Mapping[str, str]) -> list[tuple[str, int]]:
    """Every delivery queue's URL with its event source's batch size (a fast lane's 10, a slow lane's 1)."""
    from hookrelay.functions import DELIVERY, event_sources

    urls = queue_urls(env)
    shards = delivery_queue_urls(env).shards
    return [(urls[s.queue], s.batch_size) for s in event_sources(shards) if s.function is DELIVERY]


def queue_urls(env: Mapping[str, str]) -> dict[schema.QueueSpec, str]:
    """Every queue's URL by its spec, from an environment `provision` returned."""
    delivery = delivery_queue_urls(env)
    urls = {spec: env[spec.env_var] for spec in schema.OTHER_QUEUES}
    for spec in schema.delivery_queues(delivery.shards):
        assert spec.shard is not None and spec.lane is not None
        urls[spec] = delivery.url(spec.shard, spec.lane)
    return urls


LOCAL_ROLE_ARN = "arn:aws:iam::123456789012:role/hookrelay-local-retry"
DEFAULT_PREFIX = "hookrelay"


def resource_name(logical_name: str, prefix: str = DEFAULT_PREFIX) -> str:
    """The local name of a table or queue (a FIFO queue's name also ends in `.fifo`)."""
    return f"{prefix}-{logical_name}"


def queue_name(spec: schema.QueueSpec, prefix: str = DEFAULT_PREFIX) -> str:
    return resource_name(spec.logical_name, prefix) + (".fifo" if spec.fifo else "")


def create_table(dynamodb: Any, spec: schema.TableSpec, name: str) -> None:
    keys = [{"AttributeName": spec.partition_key, "KeyType": "HASH"}]
    attributes = {spec.partition_key}
    if spec.sort_key:
        keys.append({"AttributeName": spec.sort_key, "KeyType": "RANGE"})
        attributes.add(spec.sort_key)
    indexes = []
    for index in spec.indexes:
        attributes.update((index.partition_key, index.sort_key))
        indexes.append(
            {
                "IndexName": index.name,
                "KeySchema": [
                    {"AttributeName": index.partition_key, "KeyType": "HASH"},
                    {"AttributeName": index.sort_key, "KeyType": "RANGE"},
                ],
                "Projection": {
                    "ProjectionType": index.projection,
                    **({"NonKeyAttributes": list(index.non_key_attributes)} if index.non_key_attributes else {}),
                },
            }
        )
    kwargs: dict[str, Any] = {
        "TableName": name,
        "KeySchema": keys,
        "AttributeDefinitions": [{"AttributeName": a, "AttributeType": "S"} for a in sorted(attributes)],
        "BillingMode": "PAY_PER_REQUEST",
    }
    if indexes:
        kwargs["GlobalSecondaryIndexes"] = indexes
    dynamodb.create_table(**kwargs)
    if spec.ttl_attribute:
        dynamodb.update_time_to_live(
            TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": spec.ttl_attribute}
        )


def create_queue(sqs: Any, spec: schema.QueueSpec, prefix: str, arns: dict[str, str]) -> str:
    attributes = {
        "VisibilityTimeout": str(spec.visibility_timeout_seconds),
        "MessageRetentionPeriod": str(spec.retention_seconds),
    }
    if spec.fifo:
        attributes["FifoQueue"] = "true"
        attributes["ContentBasedDeduplication"] = str(spec.content_based_deduplication).lower()
        if spec.high_throughput:
            attributes["FifoThroughputLimit"] = "perMessageGroupId"
            attributes["DeduplicationScope"] = "messageGroup"
    if spec.dead_letter:
        attributes["RedrivePolicy"] = json.dumps(
            {"deadLetterTargetArn": arns[spec.dead_letter], "maxReceiveCount": spec.max_receive_count}
        )
    url = sqs.create_queue(QueueName=queue_name(spec, prefix), Attributes=attributes)["QueueUrl"]
    arns[spec.logical_name] = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    return url


def provision(
    prefix: str = DEFAULT_PREFIX,
    *,
    retry_schedule: str = "default",
    region: str | None = None,
    shards: int = DEFAULT_DELIVERY_SHARDS,
) -> dict[str, str]:
    """Create everything (`shards` delivery shards, each a fast and a slow lane) and return the environment the
    Lambda handlers read: every queue's URL, the delivery queues' all in one variable (schema.DELIVERY_QUEUE's)."""
    session = boto3.session.Session(region_name=region)
    dynamodb = session.client("dynamodb")
    sqs = session.client("sqs")
    sfn = session.client("stepfunctions")
    sns = session.client("sns")
    env: dict[str, str] = {}
    for spec in schema.ALL_TABLES:
        name = resource_name(spec.logical_name, prefix)
        create_table(dynamodb, spec, name)
        env[spec.env_var] = name
    arns: dict[str, str] = {}
    urls = {spec: create_queue(sqs, spec, prefix, arns) for spec in schema.all_queues(shards)}  # dead letters first
    env |= {spec.env_var: url for spec, url in urls.items() if not schema.is_delivery_queue(spec)}
    env[schema.DELIVERY_QUEUE.env_var] = schema.encode_delivery_queues(urls)
    definition = statemachine.render(
        {
            "Partition": "aws",
            "DeliveryQueueUrl": urls[schema.DELIVERY_QUEUE],
            "DeadLetterQueueUrl": env[schema.DEAD_LETTER_QUEUE.env_var],
            "AttemptTaskTimeoutSeconds": str(statemachine.ATTEMPT_TASK_TIMEOUT_SECONDS),
        }
    )
    env[schema.RETRY_STATE_MACHINE_ARN] = sfn.create_state_machine(
        name=resource_name("retry", prefix), definition=definition, roleArn=LOCAL_ROLE_ARN, type="STANDARD"
    )["stateMachineArn"]
    for topic in schema.ALL_TOPICS:
        env[topic.env_var] = sns.create_topic(Name=resource_name(topic.logical_name, prefix))["TopicArn"]
    env[schema.RETRY_SCHEDULE] = retry_schedule
    return env
