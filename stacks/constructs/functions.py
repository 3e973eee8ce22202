"""The Lambda functions, one per `routes.HANDLERS` entry, all from one asset, each with exactly the access in ACCESS."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar

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
from hookrelay.adapters.schema import QueueSpec, TableSpec, TopicSpec
from hookrelay.handlers import routes
from stacks.constructs.notices import Notices
from stacks.constructs.queues import Queues, queue_url_env
from stacks.constructs.storage import Storage
from stacks.nag import acknowledge


class TableAccess(Enum):
    READ = "read"
    WRITE = "write"
    READ_WRITE = "read_write"
    READ_UPDATE = "read_update"  # read, and UpdateItem only: no puts, no deletes
    READ_REWRITE = "read_rewrite"  # read, PutItem and UpdateItem: rewrites records, never deletes them


@dataclass(frozen=True)
class Access:
    """What one function may touch. Its IAM grants and the environment naming those resources follow from this."""

    tables: Mapping[TableSpec, TableAccess] = field(default_factory=dict)
    sends_to: tuple[QueueSpec, ...] = ()
    consumes: QueueSpec | None = None  # the queue whose messages invoke the function (SQS event source)
    drains: tuple[QueueSpec, ...] = ()  # queues the function receives from and deletes from itself
    starts_retries: bool = False  # states:StartExecution on the retry workflow
    answers_retries: bool = False  # states:SendTask{Success,Failure} for the workflow's task tokens
    publishes: tuple[TopicSpec, ...] = ()  # SNS topics the function publishes to
    runs_every_seconds: int | None = None  # invoked on this schedule (an EventBridge rule), in whole minutes


# The one place each function's permissions are decided: a new function is a new entry here.
ACCESS: dict[str, Access] = {
    "authorizer": Access(tables={schema.API_KEYS: TableAccess.READ}),
    "ingest": Access(
        tables={
            schema.TENANTS: TableAccess.READ,
            schema.ENDPOINTS: TableAccess.READ,
            schema.EVENTS: TableAccess.WRITE,  # the event, and the per-ordering-key sequence counter
            schema.DELIVERIES: TableAccess.WRITE,
            schema.IDEMPOTENCY: TableAccess.READ_WRITE,  # Powertools idempotency records
        },
        sends_to=(schema.DELIVERY_QUEUE,),
    ),
    "api": Access(
        # Records are created and changed, never deleted (keys are revoked, endpoints soft-deleted).
        tables={
            schema.TENANTS: TableAccess.READ_REWRITE,
            schema.API_KEYS: TableAccess.READ_REWRITE,
            schema.ENDPOINTS: TableAccess.READ_REWRITE,
            schema.DELIVERIES: TableAccess.READ_REWRITE,  # the delivery log, and replays' new deliveries
            schema.EVENTS: TableAccess.READ_REWRITE,  # test events are written; replays extend expiry
            schema.REDRIVES: TableAccess.READ_REWRITE,
            schema.IDEMPOTENCY: TableAccess.READ_WRITE,  # Powertools idempotency deletes a failed request's record
        },
        sends_to=(schema.DELIVERY_QUEUE, schema.REDRIVE_JOBS_QUEUE),  # replays; redrive jobs
    ),
    "delivery": Access(
        tables={
            schema.ENDPOINTS: TableAccess.READ_UPDATE,  # the failing spell (mark_failing / mark_recovered)
            schema.EVENTS: TableAccess.READ_UPDATE,  # extend_expiry when a delivery ends
            schema.DELIVERIES: TableAccess.READ_UPDATE,  # claims, attempts and status changes are conditional updates
        },
        sends_to=(schema.DEAD_LETTER_QUEUE,),
        consumes=schema.DELIVERY_QUEUE,
        starts_retries=True,
        answers_retries=True,
    ),
    "redrive": Access(
        tables={
            schema.ENDPOINTS: TableAccess.READ,
            schema.EVENTS: TableAccess.READ_UPDATE,
            schema.DELIVERIES: TableAccess.READ_REWRITE,  # replays' new deliveries; the drain's dead mark
            schema.REDRIVES: TableAccess.READ_REWRITE,
        },
        sends_to=(schema.DELIVERY_QUEUE, schema.REDRIVE_JOBS_QUEUE),  # replays; the next page of a redrive
        consumes=schema.REDRIVE_JOBS_QUEUE,
        drains=(schema.DEAD_LETTER_QUEUE, schema.POISON_QUEUE),
    ),
    "sweeper": Access(
        tables={
            # The failing-endpoints index, the notice markers (UpdateItem) and the disable (the PutItem of the
            # endpoint service's conditional read-change-write); never a delete.
            schema.ENDPOINTS: TableAccess.READ_REWRITE,
            schema.DELIVERIES: TableAccess.READ,  # a notice's last failure
        },
        publishes=(schema.ENDPOINT_NOTICES_TOPIC,),
        runs_every_seconds=schema.SWEEPER_INTERVAL_SECONDS,
    ),
}


class Functions(Construct):
    """Every function shares these defaults; per-function differences are the dictionaries below."""

    RUNTIME = lambda_.Runtime.PYTHON_3_14  # the newest Lambda Python; the code also runs on 3.11
    ARCHITECTURE = lambda_.Architecture.ARM_64
    MEMORY_MB = 512
    TIMEOUT = Duration.seconds(10)
    LOG_RETENTION = logs.RetentionDays.ONE_MONTH
    TRACING = lambda_.Tracing.ACTIVE
    METRICS_NAMESPACE = "Hookrelay"

    TIMEOUTS: ClassVar[dict[str, Duration]] = {
        "delivery": Duration.seconds(schema.DELIVERY_FUNCTION_TIMEOUT_SECONDS),
        "redrive": Duration.seconds(schema.REDRIVE_FUNCTION_TIMEOUT_SECONDS),
        "sweeper": Duration.seconds(schema.SWEEPER_FUNCTION_TIMEOUT_SECONDS),
    }
    BATCH_SIZES: ClassVar[dict[str, int]] = {
        "delivery": schema.DELIVERY_BATCH_SIZE,
        "redrive": schema.REDRIVE_BATCH_SIZE,
    }

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        storage: Storage,
        queues: Queues,
        notices: Notices,
        retry_workflow: sfn.IStateMachine,
        environment: Mapping[str, str],
        handlers: Mapping[str, str] = routes.HANDLERS,
        access: Mapping[str, Access] = ACCESS,
    ):
        super().__init__(scope, construct_id)
        if set(handlers) != set(access):
            raise ValueError(
                f"every function needs an ACCESS entry and every ACCESS entry a handler: "
                f"handlers {sorted(handlers)}, access {sorted(access)}"
            )
        self._storage, self._queues, self._notices, self._retry_workflow = storage, queues, notices, retry_workflow
        self.functions: dict[str, lambda_.Function] = {
            name: self._function(name, handler, code, access[name], environment) for name, handler in handlers.items()
        }

    @classmethod
    def python_version(cls) -> str:
        return cls.RUNTIME.name.removeprefix("python")  # "python3.13" -> "3.13"

    @classmethod
    def architecture_name(cls) -> str:
        return cls.ARCHITECTURE.name  # "arm64"

    def function(self, name: str) -> lambda_.Function:
        return self.functions[name]

    def _function(
        self, name: str, handler: str, code: lambda_.Code, access: Access, environment: Mapping[str, str]
    ) -> lambda_.Function:
        construct_id = name.title().replace("_", "")
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
            handler=handler,
            runtime=self.RUNTIME,
            architecture=self.ARCHITECTURE,
            memory_size=self.MEMORY_MB,
            timeout=self.TIMEOUTS.get(name, self.TIMEOUT),
            tracing=self.TRACING,
            log_group=log_group,
            role=role,
            environment={**self._powertools_environment(name), **environment, **self._resource_environment(access)},
        )
        self._grant(function, access)
        if access.consumes is not None:
            function.add_event_source(
                event_sources.SqsEventSource(
                    self._queues.queue(access.consumes),
                    batch_size=self.BATCH_SIZES.get(name, 10),
                    report_batch_item_failures=True,
                )
            )
        if access.runs_every_seconds is not None:
            events.Rule(
                self,
                f"{construct_id}Schedule",
                description=f"Runs the {name} function every {access.runs_every_seconds // 60} minutes",
                schedule=events.Schedule.rate(Duration.minutes(access.runs_every_seconds // 60)),
                targets=[targets.LambdaFunction(function)],
            )
        # Tracing's statement lands on the role or, with the createNewPoliciesWithAddToRolePolicy flag, in a
        # policy under the function: acknowledge it on both, for this one wildcard only.
        for construct in (role, function):
            acknowledge(
                construct,
                "AwsSolutions-IAM5[Resource::*]",
                "X-Ray tracing (xray:PutTraceSegments, xray:PutTelemetryRecords) does not support resource-level "
                "permissions; every other statement of this role names its resources.",
            )
        return function

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
            "POWERTOOLS_METRICS_NAMESPACE": self.METRICS_NAMESPACE,
            "POWERTOOLS_LOG_LEVEL": "INFO",
        }

    def _resource_environment(self, access: Access) -> dict[str, str]:
        """The names of exactly the resources the function may touch."""
        env = {spec.env_var: self._storage.table(spec).table_name for spec in access.tables}
        for spec in (*access.sends_to, *access.drains):
            env[queue_url_env(spec)] = self._queues.queue(spec).queue_url
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
        if access.answers_retries:
            # Step Functions authorizes task-token calls against the state machine whose task issued the token
            # (AccessDenied messages name `...:stateMachine:<name>`), so this scopes them to our workflow;
            # No `states:*`, no wildcard resource, and no SendTaskHeartbeat (CDK's grant_task_response would add
            # it): the delivery Lambda only ever reports an attempt's outcome.
            self._retry_workflow.grant(function, "states:SendTaskSuccess", "states:SendTaskFailure")
