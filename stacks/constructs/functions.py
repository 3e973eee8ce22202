"""The Lambda functions, one per entry of the table of functions (`hookrelay.functions`), all from one asset.

Each entry's `Access` becomes its role's statements (hookrelay/function_permissions.py) and its environment
(hookrelay/function_environment.py), its trigger an SQS event source or an EventBridge rule (API routes and the
authorizer are the API construct's).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from aws_cdk import ArnFormat, Duration, Fn, RemovalPolicy, Stack, Token
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from hookrelay.adapters import schema
from hookrelay.domain.destinations import ROLE_NAME_PREFIX
from hookrelay.function_environment import LOG_LEVEL, Resources, Settings, environment
from hookrelay.function_permissions import Arns, statements
from hookrelay.functions import FUNCTIONS, Function, QueueTrigger, Schedule, event_sources
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
    APPLICATION_LOG_LEVEL = lambda_.ApplicationLogLevel[LOG_LEVEL]

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        runtime: lambda_.Runtime,
        storage: Storage,
        queues: Queues,
        shards: int,
        notices: Notices,
        retry_workflow: sfn.IStateMachine,
        api_url: str,
        settings: Settings,
        entries: Iterable[Function] = FUNCTIONS,
        reserved_concurrency: Mapping[str, int] | None = None,
        event_source_max_concurrency: Mapping[str, int] | None = None,
        xray_tracing: bool = False,
        log_removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
    ):
        """`reserved_concurrency` and `event_source_max_concurrency` (by function name) are deployment settings
        (stacks/config.py): they override nothing in the table of functions but what its entries leave open.
        `xray_tracing`: Lambda Active tracing (sampled by X-Ray's rules) and Powertools' Tracer; off, the handlers
        never import the X-Ray SDK (handlers/tracing.py)."""
        super().__init__(scope, construct_id)
        self._runtime = runtime
        self._tracing = xray_tracing
        self._log_removal_policy = log_removal_policy
        self._storage, self._queues, self._notices, self._retry_workflow = storage, queues, notices, retry_workflow
        self._queue_specs = schema.all_queues(shards)
        self._event_sources = event_sources(shards)
        self._api_url = api_url  # `api_url`: the HTTP API's endpoint (a token: the API is made after the functions)
        self._reserved = dict(reserved_concurrency or {})
        self._max_concurrency = dict(event_source_max_concurrency or {})
        self._settings = settings
        self._log_groups: dict[str, logs.LogGroup] = {}
        self.functions: dict[str, lambda_.Function] = {entry.name: self._function(entry, code) for entry in entries}

    @classmethod
    def architecture_name(cls) -> str:
        return cls.ARCHITECTURE.name  # "arm64"

    def function(self, name: str) -> lambda_.Function:
        return self.functions[name]

    def _function(self, entry: Function, code: lambda_.Code) -> lambda_.Function:
        construct_id = entry.name.title().replace("_", "")
        log_group = logs.LogGroup(
            self, f"{construct_id}Logs", retention=self.LOG_RETENTION, removal_policy=self._log_removal_policy
        )
        self._log_groups[entry.name] = log_group
        # An own role instead of AWSLambdaBasicExecutionRole: writes to this function's log group only (_grant).
        role = iam.Role(self, f"{construct_id}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
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
            environment=environment(entry, self._resources(), self._settings),
        )
        self._grant(role, entry)
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
            for source in (s for s in self._event_sources if s.function.name == entry.name):
                # A mapping, not CDK's SqsEventSource: that one grants the queue's whole consume bundle (GetQueueUrl,
                # ChangeMessageVisibility) on its own; the event source's actions are in the role's statements.
                # The trigger's own queue's mapping keeps the id it had before the delivery queues were sharded.
                own = source.queue is trigger.queue
                lambda_.EventSourceMapping(
                    self,
                    f"{construct_id}EventSource" + ("" if own else source.queue.logical_name),
                    target=function,
                    event_source_arn=self._queues.queue(source.queue).queue_arn,
                    batch_size=source.batch_size,
                    # Each event source's own maximum: the delivery function's is per queue, 2 x shards of them.
                    max_concurrency=source.max_concurrency or self._max_concurrency.get(entry.name),
                    report_batch_item_failures=True,
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

    def _acknowledge_executions(self, role: iam.Role, reason: str) -> None:
        # The finding names the state machine by its logical ID, which depends on where the construct sits.
        state_machine = self._retry_workflow.node.default_child
        assert isinstance(state_machine, sfn.CfnStateMachine)
        stack = Stack.of(self)
        logical_id = stack.get_logical_id(state_machine)
        # An environment-agnostic stack's region and account are pseudo parameters; a stack with an env, literals.
        region = "<AWS::Region>" if Token.is_unresolved(stack.region) else stack.region
        account = "<AWS::AccountId>" if Token.is_unresolved(stack.account) else stack.account
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:{region}:{account}:execution:"
            f'{{"Fn::Select":[6,{{"Fn::Split":[":",{{"Ref":"{logical_id}"}}]}}]}}:*]',
            reason,
        )

    def _arns(self) -> Arns:
        """The ARNs the table of functions' statements name, as CloudFormation tokens."""
        return Arns(
            tables={spec: self._storage.table(spec).table_arn for spec in schema.ALL_TABLES},
            queues={spec: self._queues.queue(spec).queue_arn for spec in self._queue_specs},
            topics={spec: self._notices.topic(spec).topic_arn for spec in schema.ALL_TOPICS},
            topic_key=self._notices.key.key_arn,
            retry_state_machine=self._retry_workflow.state_machine_arn,
            retry_executions=self._executions_arn(),
            log_groups={name: group.log_group_arn for name, group in self._log_groups.items()},
            partition=Stack.of(self).partition,
        )

    def _executions_arn(self) -> str:
        """Every execution of the retry workflow (named per delivery or probe, so not known at deploy time)."""
        stack = Stack.of(self)
        name = Fn.select(6, Fn.split(":", self._retry_workflow.state_machine_arn))
        return stack.format_arn(
            service="states", resource="execution", resource_name=f"{name}:*", arn_format=ArnFormat.COLON_RESOURCE_NAME
        )

    def _resources(self) -> Resources:
        return Resources(
            table_names={spec: self._storage.table(spec).table_name for spec in schema.ALL_TABLES},
            queue_urls={spec: self._queues.queue(spec).queue_url for spec in self._queue_specs},
            topic_arns={spec: self._notices.topic(spec).topic_arn for spec in schema.ALL_TOPICS},
            retry_state_machine_arn=self._retry_workflow.state_machine_arn,
            api_url=self._api_url,
        )

    def _grant(self, role: iam.Role, entry: Function) -> None:
        """The role's policy: exactly the table of functions' statements (hookrelay/function_permissions.py)."""
        for statement in statements(entry, self._arns()):
            # One policy per role (its default policy), not one per statement.
            role.add_to_principal_policy(
                iam.PolicyStatement(actions=list(statement.actions), resources=list(statement.resources))
            )
        if entry.access.publishes:
            acknowledge(
                role,
                "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]",
                "Publishing to an SNS topic encrypted with a customer-managed key needs kms:GenerateDataKey* (as AWS "
                "documents it) on that one key, which is the statement's only resource.",
            )
        if entry.access.watches_probes or entry.access.stops_retries:
            self._acknowledge_executions(
                role,
                "DescribeExecution (a lost probe) and StopExecution (a retry whose delivery parked) of the retry "
                "workflow's own executions, which are named per delivery and probe, so not known at deploy time.",
            )
        if entry.access.assumes_destination_roles:
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:iam::*:role/{ROLE_NAME_PREFIX}*]",
                "AWS destinations: sts:AssumeRole on consumers' roles in their own accounts, not known at deploy time; "
                f"only roles named {ROLE_NAME_PREFIX}*, each assumed with its tenant's external ID, which the delivery "
                "function refuses to send without (domain/destinations.py).",
            )
