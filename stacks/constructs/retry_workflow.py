"""The retry workflow: the ASL file in `statemachine/`, loaded as is, with its `${...}` substitutions filled."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Aws, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

import statemachine
from stacks.config import DEFAULT_TELEMETRY, Telemetry
from stacks.nag import acknowledge


class MissingSubstitution(ValueError):
    pass


def definition_substitutions(values: Mapping[str, str]) -> dict[str, str]:
    """Exactly `statemachine.SUBSTITUTIONS`, each with a value; synth fails naming whatever is missing."""
    declared = set(statemachine.SUBSTITUTIONS)
    undeclared = statemachine.placeholders() - declared
    if undeclared:
        raise MissingSubstitution(
            f"{statemachine.ASL_PATH.name} uses {sorted(undeclared)}, not listed in statemachine.SUBSTITUTIONS"
        )
    missing = declared - values.keys()
    if missing:
        raise MissingSubstitution(
            f"no CDK value for ASL substitutions {sorted(missing)}: add them to RetryWorkflow.substitution_values"
        )
    return {name: values[name] for name in statemachine.SUBSTITUTIONS}


class RetryWorkflow(Construct):
    """Standard workflow, started by the delivery Lambda only after a failed attempt; logged and traced as set."""

    TYPE = sfn.StateMachineType.STANDARD
    LOG_RETENTION = logs.RetentionDays.ONE_MONTH

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        delivery_queue: sqs.IQueue,
        dead_letter_queue: sqs.IQueue,
        delivery_queues: Sequence[sqs.IQueue] = (),
        telemetry: Telemetry = DEFAULT_TELEMETRY,
        name_prefix: str | None = None,
        log_removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
    ):
        """`delivery_queue`: shard 0's fast lane (the one delivery queue of before shards: an execution started then
        runs the definition it started with, which names it); `delivery_queues`: every delivery queue, which an
        execution's input names one of (its ticket's or command's `queue_url`).
        `telemetry`: the execution log's level (execution data only at ALL) and X-Ray (stacks/config.py).
        `name_prefix`: starts the log group's name (default: the stack's name)."""
        super().__init__(scope, construct_id)
        # The queues the ASL sends to, by the substitution that names them.
        queues = {"DeadLetterQueueUrl": dead_letter_queue}
        log_group = logs.LogGroup(
            self,
            "Logs",
            log_group_name=self.log_group_name(name_prefix or Stack.of(self).stack_name),
            retention=self.LOG_RETENTION,
            removal_policy=log_removal_policy,
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_type=self.TYPE,
            definition_body=sfn.DefinitionBody.from_file(str(statemachine.ASL_PATH)),
            definition_substitutions=definition_substitutions(self.substitution_values(queues)),
            logs=sfn.LogOptions(
                destination=log_group,
                level=sfn.LogLevel(telemetry.workflow_log_level),
                include_execution_data=telemetry.workflow_execution_data,
            ),
            tracing_enabled=telemetry.xray_tracing,
        )
        # The ASL's tasks only send to queues: SendMessage on exactly the queues its definition names.
        used = [queue.queue_arn for name, queue in queues.items() if name in statemachine.SUBSTITUTIONS]
        used += [queue.queue_arn for queue in dict.fromkeys((delivery_queue, *delivery_queues))]
        self.state_machine.add_to_role_policy(iam.PolicyStatement(actions=["sqs:SendMessage"], resources=used))
        self._acknowledge_service_wildcards()
        self._acknowledge_telemetry(telemetry)

    @staticmethod
    def log_group_name(stack_name: str) -> str:
        """Under /aws/vendedlogs/: Step Functions adds any other log group it delivers to to the account's one
        CloudWatch Logs resource policy (5,120 characters for all of them), and deploys fail once it is full. The
        stack's name (or the construct's name prefix) keeps two deployments' groups apart (an upgrade deploys
        beside the old stack)."""
        return f"/aws/vendedlogs/states/{stack_name}-RetryWorkflow"

    @staticmethod
    def substitution_values(queues: Mapping[str, sqs.IQueue]) -> dict[str, str]:
        """The value of every `${Name}` in the ASL file, by name."""
        return {
            "Partition": Aws.PARTITION,
            "AttemptTaskTimeoutSeconds": str(statemachine.ATTEMPT_TASK_TIMEOUT_SECONDS),
            **{name: queue.queue_url for name, queue in queues.items()},
        }

    def _acknowledge_telemetry(self, telemetry: Telemetry) -> None:
        if telemetry.workflow_log_level != "ALL":
            acknowledge(
                self.state_machine,
                "AwsSolutions-SF1",
                f"Logged at {telemetry.workflow_log_level} by default (CDK context workflow_log_level): at ALL with "
                "execution data every retried delivery writes about 3 KB per state transition (bench/cost.py). "
                "Every delivery's attempts are recorded in the deliveries table; ALL is one context value away.",
            )
        if not telemetry.xray_tracing:
            acknowledge(
                self.state_machine,
                "AwsSolutions-SF2",
                "X-Ray is off by default (CDK context xray_tracing=sampled turns it on, sampled): traces are billed "
                "per trace and the delivery log and metrics already record every attempt.",
            )

    def _acknowledge_service_wildcards(self) -> None:
        acknowledge(
            self.state_machine.role,
            "AwsSolutions-IAM5[Resource::*]",
            "Added by CDK for execution logging and tracing: the CloudWatch Logs delivery actions "
            "(logs:CreateLogDelivery, ...) and X-Ray's PutTraceSegments/PutTelemetryRecords/GetSampling* do not "
            "support resource-level permissions. The workflow's own tasks send only to the delivery and dead-letter "
            "queues.",
        )
