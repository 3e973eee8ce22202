"""The Lambda functions, one per entry of the table of functions (`hookrelay.functions`), all from one asset.

Each entry's `Access` becomes its IAM grants and the environment naming those resources, its trigger an SQS
event source or an EventBridge rule (API routes and the authorizer are the API construct's).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from hookrelay.adapters import schema
from hookrelay.adapters.telemetry import METRICS_NAMESPACE
from hookrelay.functions import (
    FUNCTIONS,
    INTERPRETER_ENVIRONMENT,
    Access,
    Function,
    QueueTrigger,
    Schedule,
    TableAccess,
)
from stacks.constructs.notices import Notices
from stacks.constructs.queues import Queues
from stacks.constructs.storage import Storage
from stacks.nag import acknowledge


def newest_python_runtime() -> lambda_.Runtime:
    """The newest Python runtime this aws-cdk-lib lists, as cdk-nag's AwsSolutions-L1 finds it."""
    pythons = [runtime for runtime in lambda_.Runtime.ALL if runtime.name.startswith("python")]
    return max(pythons, key=lambda runtime: tuple(int(part) for part in runtime.name[len("python") :].split(".")))


class Functions(Construct):
    """Every function shares these settings; what differs between them is its entry in the table of functions."""

    # The runtime is a deployment setting (`runtime`, from CDK context lambda_runtime: stacks/config.py); the asset
    # is built for it, whatever Python deploys (scripts/build_lambda_asset.py).
    ARCHITECTURE = lambda_.Architecture.ARM_64
    LOG_RETENTION = logs.RetentionDays.ONE_MONTH
    # Lambda's JSON log format, with the platform's own records at WARN: no START/END/REPORT lines (three per
    # invocation, about 300 bytes, on the log bill of every event); the functions' lines at INFO, and a
    # delivered webhook writes one (the delivery handler's metrics record, which carries the attempt).
    LOG_FORMAT = lambda_.LoggingFormat.JSON
    SYSTEM_LOG_LEVEL = lambda_.SystemLogLevel.WARN
    APPLICATION_LOG_LEVEL = lambda_.ApplicationLogLevel.INFO

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        runtime: lambda_.Runtime,
        storage: Storage,
        queues: Queues,
        notices: Notices,
        retry_workflow: sfn.IStateMachine,
        environment: Mapping[str, str],
        entries: Iterable[Function] = FUNCTIONS,
        reserved_concurrency: Mapping[str, int] | None = None,
        event_source_max_concurrency: Mapping[str, int] | None = None,
        xray_tracing: bool = False,
    ):
        """`reserved_concurrency` and `event_source_max_concurrency` (by function name) are deployment settings
        (stacks/config.py): they override nothing in the table of functions but what its entries leave open.
        `xray_tracing`: Lambda Active tracing (sampled by X-Ray's rules) and Powertools' Tracer; off, the handlers
        never import the X-Ray SDK (handlers/tracing.py)."""
        super().__init__(scope, construct_id)
        self._runtime = runtime
        self._tracing = xray_tracing
        self._storage, self._queues, self._notices, self._retry_workflow = storage, queues, notices, retry_workflow
        self._reserved = dict(reserved_concurrency or {})
        self._max_concurrency = dict(event_source_max_concurrency or {})
        self.functions: dict[str, lambda_.Function] = {
            entry.name: self._function(entry, code, environment) for entry in entries
        }

    @classmethod
    def architecture_name(cls) -> str:
        return cls.ARCHITECTURE.name  # "arm64"

    def function(self, name: str) -> lambda_.Function:
        return self.functions[name]

    def _function(self, entry: Function, code: lambda_.Code, environment: Mapping[str, str]) -> lambda_.Function:
        construct_id = entry.name.title().replace("_", "")
        log_group = logs.LogGroup(
            self, f"{construct_id}Logs", retention=self.LOG_RETENTION, removal_policy=RemovalPolicy.DESTROY
        )
        # An own role instead of AWSLambdaBasicExecutionRole: writes to this function's log group only.
        role = iam.Role(self, f"{construct_id}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
        log_group.grant_write(role)
        function = lambda_.Function(
            self,
            construct_id,
            code=code,
            handler=entry.handler,
            runtime=self._runtime,
            architecture=self.ARCHITECTURE,
            memory_size=entry.memory_mb,
            timeout=Duration.seconds(entry.timeout_seconds),
            tracing=lambda_.Tracing.ACTIVE if self._tracing else lambda_.Tracing.DISABLED,
            logging_format=self.LOG_FORMAT,
            system_log_level_v2=self.SYSTEM_LOG_LEVEL,
            application_log_level_v2=self.APPLICATION_LOG_LEVEL,
            reserved_concurrent_executions=self._reserved.get(entry.name),
            log_group=log_group,
            role=role,
            environment={
                **INTERPRETER_ENVIRONMENT,
                **self._powertools_environment(entry.name),
                **environment,
                **self._resource_environment(entry.access),
            },
        )
        self._grant(function, entry.access)
        self._trigger(function, entry, construct_id)
        newest = newest_python_runtime()
        if self._runtime.name != newest.name:  # cdk-nag's L1 asks for the newest runtime aws-cdk-lib lists
            acknowledge(
                function,
                "AwsSolutions-L1",
                f"{self._runtime.name} is this deployment's chosen runtime (CDK context lambda_runtime, "
                f"stacks/config.py); -c lambda_runtime={newest.name} deploys the newest, and the asset is built for "
                "either from any Python the deployer has (scripts/build_lambda_asset.py).",
            )
        # Tracing's statement lands on the role or, with the createNewPoliciesWithAddToRolePolicy flag, in a
        # policy under the function: acknowledge it on both, for this one wildcard only.
        for construct in (role, function) if self._tracing else ():
            acknowledge(
                construct,
                "AwsSolutions-IAM5[Resource::*]",
                "X-Ray tracing (xray:PutTraceSegments, xray:PutTelemetryRecords) does not support resource-level "
                "permissions; every other statement of this role names its resources.",
            )
        return function

    def _trigger(self, function: lambda_.Function, entry: Function, construct_id: str) -> None:
        """SQS event sources and schedules; the API construct wires API routes and the authorizer."""
        trigger = entry.trigger
        if isinstance(trigger, QueueTrigger):
            function.add_event_source(
                event_sources.SqsEventSource(
                    self._queues.queue(trigger.queue),
                    batch_size=trigger.batch_size,
                    max_concurrency=trigger.max_concurrency or self._max_concurrency.get(entry.name),
                    report_batch_item_failures=True,
                )
            )
        elif isinstance(trigger, Schedule):
            minutes = trigger.every_seconds // 60
            events.Rule(
                self,
                f"{construct_id}Schedule",
                description=f"Runs the {entry.name} function every {minutes} minutes",
                schedule=events.Schedule.rate(Duration.minutes(minutes)),
                targets=[targets.LambdaFunction(function)],
            )

    @staticmethod
    def _acknowledge_executions(function: lambda_.Function, reason: str) -> None:
        acknowledge(
            function.role,
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:"
            '{"Fn::Select":[6,{"Fn::Split":[":",{"Ref":"RetryWorkflowStateMachineE5633325"}]}]}:*]',
            reason,
        )

    @staticmethod
    def _acknowledge_index_grants(function: lambda_.Function, table: dynamodb.Table) -> None:
        table_id = Stack.of(table).get_logical_id(table.node.default_child)
        acknowledge(
            function.role,
            f"AwsSolutions-IAM5[Resource::<{table_id}.Arn>/index/*]",
            "CDK's table grants also cover the table's own global secondary indexes (<table>/index/*): deliveries "
            "by tenant, status, endpoint and event, failing endpoints; nothing outside this table.",
        )

    def _powertools_environment(self, name: str) -> dict[str, str]:
        return {
            "POWERTOOLS_SERVICE_NAME": name,
            "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
            "POWERTOOLS_LOG_LEVEL": self.APPLICATION_LOG_LEVEL.value,
            # Read by handlers/tracing.py at import: "true" means no Tracer and no X-Ray SDK at all.
            "POWERTOOLS_TRACE_DISABLED": "false" if self._tracing else "true",
        }

    def _resource_environment(self, access: Access) -> dict[str, str]:
        """The names of exactly the resources the function may touch."""
        env = {spec.env_var: self._storage.table(spec).table_name for spec in access.tables}
        for spec in (*access.sends_to, *access.drains):
            env[spec.env_var] = self._queues.queue(spec).queue_url
        if access.starts_retries or access.answers_retries:
            env[schema.RETRY_STATE_MACHINE_ARN] = self._retry_workflow.state_machine_arn
        for topic in access.publishes:
            env[topic.env_var] = self._notices.topic(topic).topic_arn
        return env

    def _grant(self, function: lambda_.Function, access: Access) -> None:
        for spec, mode in access.tables.items():
            table = self._storage.table(spec)
            if spec.indexes:
                self._acknowledge_index_grants(function, table)
            if mode is TableAccess.READ:
                table.grant_read_data(function)
            elif mode is TableAccess.WRITE:
                table.grant_write_data(function)
            elif mode is TableAccess.READ_WRITE:
                table.grant_read_write_data(function)
            elif mode is TableAccess.READ_UPDATE:
                table.grant_read_data(function)
                table.grant(function, "dynamodb:UpdateItem")
            elif mode is TableAccess.READ_REWRITE:
                table.grant_read_data(function)
                table.grant(function, "dynamodb:PutItem", "dynamodb:UpdateItem")
        for spec in access.sends_to:
            self._queues.queue(spec).grant_send_messages(function)
        for spec in access.drains:
            self._queues.queue(spec).grant_consume_messages(function)
        for topic in access.publishes:
            self._notices.topic(topic).grant_publish(function)  # with kms:GenerateDataKey* and Decrypt on its key
        if access.publishes:
            acknowledge(
                function.role,
                "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]",
                "Publishing to an SNS topic encrypted with a customer-managed key needs kms:GenerateDataKey* (as AWS "
                "documents it) on that one key, which is the statement's only resource.",
            )
        if access.starts_retries:
            self._retry_workflow.grant_start_execution(function)
        if access.watches_probes:
            self._retry_workflow.grant_execution(function, "states:DescribeExecution")
            self._acknowledge_executions(
                function,
                "DescribeExecution of the retry workflow's own executions (named per endpoint and step, so not known "
                "at deploy time): the sweep checks that an open circuit's probe workflow still runs.",
            )
        if access.stops_retries:
            self._retry_workflow.grant_execution(function, "states:StopExecution")
            self._acknowledge_executions(
                function,
                "StopExecution of the retry workflow's own executions (named per delivery, so not known at deploy "
                "time): a retry execution whose delivery was parked when the circuit opened ends at once.",
            )
        if access.answers_retries:
            # Step Functions authorizes task-token calls against the state machine whose task issued the token
            # (AccessDenied messages name `...:stateMachine:<name>`), so this scopes them to our workflow;
            # No `states:*`, no wildcard resource, and no SendTaskHeartbeat (CDK's grant_task_response would add
            # it): the delivery Lambda only ever reports an attempt's outcome.
            self._retry_workflow.grant(function, "states:SendTaskSuccess", "states:SendTaskFailure")
