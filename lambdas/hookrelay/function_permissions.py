"""Each function's IAM statements: one definition for the stack's roles and the local stack's IAM check.

What a function may do follows from its entry in the table of functions (`hookrelay.functions`): its `Access`,
and its trigger (an SQS event source polls with the function's own role). The CDK stack
(`stacks/constructs/functions.py`) makes each role's policy from `statements` with CloudFormation tokens for the
ARNs; the local stack and the integration tier (`local/iam_check.py`) refuse, with the error AWS returns, every
call these statements do not allow, with moto's ARNs. tests/infrastructure/test_as_deployed.py holds the synthesized
template's policies to this module, action by action and resource by resource.

Every action is listed explicitly (no `dynamodb:*`, no CDK grant bundles): a function gets the calls its code
makes and nothing else; local/iam_check.py reports the granted actions a run never called.

Plain Python (no aws_cdk): the local stack imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hookrelay.adapters import schema
from hookrelay.domain.destinations import ROLE_NAME_PREFIX
from hookrelay.functions import Function, QueueTrigger, TableAccess

_READS = ("dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query")
# The DynamoDB actions each access mode allows. BatchWriteItem is its own action (IAM cannot tell its puts from
# its deletes); only the READ_WRITE modes and KEYED_PUT_DELETE have DeleteItem: records are kept, only idempotency
# records, parking-lot entries, catalogue types and the slow lane's tails are deleted.
TABLE_ACTIONS: Mapping[TableAccess, tuple[str, ...]] = {
    TableAccess.LOOKUP: ("dynamodb:GetItem",),
    TableAccess.READ: _READS,
    TableAccess.READ_SCAN: (*_READS, "dynamodb:Scan"),
    TableAccess.READ_UPDATE: (*_READS, "dynamodb:UpdateItem"),
    TableAccess.READ_REWRITE: (*_READS, "dynamodb:PutItem", "dynamodb:UpdateItem"),
    TableAccess.READ_BATCH_WRITE: (*_READS, "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:BatchWriteItem"),
    TableAccess.READ_WRITE: (*_READS, "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"),
    TableAccess.KEYED_PUT_DELETE: ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem"),
    TableAccess.READ_BATCH_WRITE_DELETE: (
        *_READS,
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:BatchWriteItem",
    ),
}
# What an SQS event source needs of the function's role (Lambda's AWSLambdaSQSQueueExecutionRole, no more).
EVENT_SOURCE_ACTIONS = ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
SEND_ACTIONS = ("sqs:SendMessage",)  # SendMessageBatch is authorized as sqs:SendMessage
DRAIN_ACTIONS = ("sqs:ReceiveMessage", "sqs:DeleteMessage")  # DeleteMessageBatch is authorized as DeleteMessage
# Publishing to a topic encrypted with a customer-managed key (as AWS documents it for SNS).
PUBLISH_ACTIONS = ("sns:Publish",)
PUBLISH_KEY_ACTIONS = ("kms:GenerateDataKey*", "kms:Decrypt")
LOG_ACTIONS = ("logs:CreateLogStream", "logs:PutLogEvents")
# Task-token calls are authorized against the state machine whose task issued the token. No SendTaskHeartbeat:
# the delivery function only ever reports an attempt's outcome.
TASK_RESPONSE_ACTIONS = ("states:SendTaskSuccess", "states:SendTaskFailure")
# Assuming a consumer's role to send to its AWS destination (domain/destinations.py). The calls made with the
# assumed role's credentials are the consumer's role's to allow, not this role's.
ASSUME_ROLE_ACTIONS = ("sts:AssumeRole",)


@dataclass(frozen=True)
class Statement:
    """One Allow statement: every action on every resource."""

    actions: tuple[str, ...]
    resources: tuple[str, ...]
    # Called by an AWS service with the function's role, not by its code: Lambda's log delivery and event source,
    # SNS encrypting a message with the topic's key. A run of the code never makes these calls itself.
    on_behalf: bool = False


@dataclass(frozen=True)
class Arns:
    """The ARNs the statements name: CloudFormation tokens in the stack, moto's ARNs locally."""

    tables: Mapping[schema.TableSpec, str]
    queues: Mapping[schema.QueueSpec, str]
    topics: Mapping[schema.TopicSpec, str]
    topic_key: str  # the notice topics' KMS key
    retry_state_machine: str
    retry_executions: str  # every execution of the retry workflow: `arn:…:execution:<name>:*`
    log_groups: Mapping[str, str]  # function name -> its log group's ARN
    partition: str = "aws"  # the deployment's partition (a token in the stack)


def queue_arns(specs: tuple[schema.QueueSpec, ...], arns: Arns) -> tuple[str, ...]:
    """The ARNs of `specs`, where the delivery queue stands for every delivery queue (every shard's lanes: the
    functions route each message by its endpoint's shard, so one that sends to one may send to any)."""
    found: list[str] = []
    for spec in specs:
        if schema.is_delivery_queue(spec):
            found += [arn for queue, arn in arns.queues.items() if schema.is_delivery_queue(queue)]
        else:
            found.append(arns.queues[spec])
    return tuple(found)


def statements(function: Function, arns: Arns) -> list[Statement]:
    """Everything `function`'s role allows."""
    access = function.access
    found = [Statement(LOG_ACTIONS, (arns.log_groups[function.name],), on_behalf=True)]
    for spec, mode in access.tables.items():
        actions = TABLE_ACTIONS[mode]
        table = arns.tables[spec]
        found.append(Statement(tuple(a for a in actions if a != "dynamodb:Query"), (table,)))
        if "dynamodb:Query" in actions:  # a query names the table or one of its indexes: each index by name
            found.append(Statement(("dynamodb:Query",), (table, *(f"{table}/index/{i.name}" for i in spec.indexes))))
    if isinstance(function.trigger, QueueTrigger):
        found.append(Statement(EVENT_SOURCE_ACTIONS, queue_arns((function.trigger.queue,), arns), on_behalf=True))
    if access.sends_to:
        found.append(Statement(SEND_ACTIONS, queue_arns(access.sends_to, arns)))
    if access.drains:
        found.append(Statement(DRAIN_ACTIONS, queue_arns(access.drains, arns)))
    if access.publishes:
        found.append(Statement(PUBLISH_ACTIONS, tuple(arns.topics[t] for t in access.publishes)))
        found.append(Statement(PUBLISH_KEY_ACTIONS, (arns.topic_key,), on_behalf=True))
    if access.starts_retries:
        found.append(Statement(("states:StartExecution",), (arns.retry_state_machine,)))
    execution_actions = [
        action
        for action, wanted in (
            ("states:DescribeExecution", access.watches_probes),
            ("states:StopExecution", access.stops_retries),
        )
        if wanted
    ]
    if execution_actions:
        found.append(Statement(tuple(execution_actions), (arns.retry_executions,)))
    if access.answers_retries:
        found.append(Statement(TASK_RESPONSE_ACTIONS, (arns.retry_state_machine,)))
    if access.assumes_destination_roles:
        found.append(Statement(ASSUME_ROLE_ACTIONS, (destination_roles(arns.partition),)))
    return found


def destination_roles(partition: str) -> str:
    """The consumers' roles for AWS destinations, in any account: only those named with the prefix
    (domain/destinations.py), so the delivery role can assume no role a consumer did not make for hookrelay."""
    return f"arn:{partition}:iam::*:role/{ROLE_NAME_PREFIX}*"
