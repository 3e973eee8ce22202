"""Alarms on what must never pile up silently (dead letters, poison messages, failing functions and workflows,
throttled tables), an encrypted SNS topic they notify, and a dashboard."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from hookrelay.adapters import schema
from hookrelay.adapters.telemetry import METRICS_NAMESPACE, attempts_metric, dead_metric
from hookrelay.domain.queues import DeliveryLane
from hookrelay.domain.status import DeadReason, DeliveryStatus
from hookrelay.functions import DELIVERY, INGEST, RECONCILER
from hookrelay.services.delivery import FAILING_SPELL_ERRORS
from hookrelay.services.ports import INTAKE_METRICS

PERIOD = Duration.minutes(5)
# The throttling causes of an on-demand table (docs.aws.amazon.com/amazondynamodb/latest/developerguide/
# TroubleshootingThrottling-cloudwatch.html): a partition's limit (a hot key) and the account's per-table quota.
THROTTLE_CAUSES = ("KeyRangeThroughput", "AccountLimit")


class Observability(Construct):
    # Six runs of the reconciler, which empties the dead-letter and poison queues every 5 minutes.
    SURFACING_MAX_AGE = Duration.minutes(30)
    # A first attempt normally leaves the delivery queue within seconds; one waiting this long sits behind an
    # endpoint's backlog (its message groups are all busy), which retries and auto-disable should be seen to.
    DELIVERY_QUEUE_MAX_AGE = Duration.hours(1)

    def _backlog_alarms(self, queues: Mapping[str, sqs.IQueue]) -> list[cloudwatch.Alarm]:
        """The oldest message's age across each lane's queues (every shard's): one alarm for the fast lanes, which
        keeps the one delivery queue's alarm of before shards, and one for the slow lanes. One alarm per lane, not
        per queue: a deployment's number of queues is a setting, its alarms (and runbook sections) are not."""
        lanes = {
            "DeliveryBacklogAging": (DeliveryLane.FAST, "an endpoint's backlog is building"),
            "SlowLaneBacklogAging": (DeliveryLane.SLOW, "a probing, draining or slow endpoint's backlog is building"),
        }
        return [
            self._alarm(
                name,
                self._oldest_of(
                    [queues[spec.logical_name] for spec in self._delivery_queues(queues) if spec.lane is lane]
                ),
                threshold=self.DELIVERY_QUEUE_MAX_AGE.to_seconds(),
                description=f"A {lane.value}-lane delivery message has waited over an hour: {why}.",
            )
            for name, (lane, why) in lanes.items()
        ]

    @staticmethod
    def _oldest_of(queues: list[sqs.IQueue]) -> cloudwatch.IMetric:
        """The largest age of oldest message among `queues` (metric math: CloudWatch allows 10 metrics an alarm,
        and MAX_DELIVERY_SHARDS keeps each lane's queues within them)."""
        metrics = {
            f"q{index}": queue.metric_approximate_age_of_oldest_message(period=PERIOD, statistic="Maximum")
            for index, queue in enumerate(queues)
        }
        if len(metrics) == 1:
            return next(iter(metrics.values()))
        return cloudwatch.MathExpression(
            expression=f"MAX([{', '.join(metrics)}])", using_metrics=metrics, period=PERIOD, label="oldest message"
        )

    def _throttle_alarms(self, throttles: Mapping[str, cloudwatch.IMetric]) -> list[cloudwatch.Alarm]:
        """One alarm per table on the throttles the capacity model predicts (bench/capacity.py, docs/capacity.md): a
        partition past its 1,000 write or 3,000 read units a second (a hot key), and the table past the account's
        per-table quota, on the table itself and on each of its indexes (a throttled index holds back the table's
        writes). On-demand tables have no provisioned throughput to exceed, so these causes are the ones to watch."""
        return [
            self._alarm(
                f"{name}TableThrottled",
                metric,
                threshold=0,
                description=f"DynamoDB throttled requests to the {name} table: a hot key or its quota.",
            )
            for name, metric in throttles.items()
        ]

    @classmethod
    def _throttles(cls, tables: Mapping[str, dynamodb.ITable]) -> dict[str, cloudwatch.IMetric]:
        """Each table's summed throttle events, by its logical name, in the schema's order."""
        return {
            spec.logical_name: cls._throttles_of(tables[spec.logical_name], spec)
            for spec in schema.ALL_TABLES
            if spec.logical_name in tables
        }

    @staticmethod
    def _throttles_of(table: dynamodb.ITable, spec: schema.TableSpec) -> cloudwatch.IMetric:
        """The table's and its indexes' throttle events by cause, summed (at most 10 metrics an alarm: the table's
        four, and each index's two write causes; an index is read by sweeps and log pages, never per event)."""
        causes = [
            (f"{operation}{cause}ThrottleEvents", None) for operation in ("Read", "Write") for cause in THROTTLE_CAUSES
        ] + [(f"Write{cause}ThrottleEvents", index.name) for index in spec.indexes for cause in THROTTLE_CAUSES]
        metrics = {
            f"{spec.logical_name.lower()}{number}": table.metric(
                name,
                period=PERIOD,
                statistic="Sum",
                dimensions_map={"TableName": table.table_name} | ({"GlobalSecondaryIndexName": index} if index else {}),
            )
            for number, (name, index) in enumerate(causes)
        }
        return cloudwatch.MathExpression(
            expression=" + ".join(f"FILL({name}, 0)" for name in metrics),
            using_metrics=metrics,
            period=PERIOD,
            label=f"{spec.logical_name} throttle events",
        )

    @staticmethod
    def _delivery_queues(queues: Mapping[str, sqs.IQueue]) -> list[schema.QueueSpec]:
        shards = 0
        while schema.delivery_queue(shards, DeliveryLane.FAST).logical_name in queues:
            shards += 1
        return list(schema.delivery_queues(shards))

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        queues: Mapping[str, sqs.IQueue],
        functions: Mapping[str, lambda_.IFunction],
        retry_workflow: sfn.IStateMachine,
        tables: Mapping[str, dynamodb.ITable] | None = None,
        alarm_email: str | None = None,
        alarm_topic: sns.ITopic | None = None,
        name_prefix: str | None = None,
    ):
        """`alarm_topic`: an existing topic (on-call's) the alarms notify instead of one of the stack's own.
        `name_prefix`: names the alarms and the dashboard after it (default: names CloudFormation makes up)."""
        super().__init__(scope, construct_id)
        self._name_prefix = name_prefix
        throttles = self._throttles(tables or {})
        self.topic: sns.ITopic = alarm_topic if alarm_topic is not None else self._alarm_topic()
        if alarm_email:  # the address gets a confirmation mail from SNS first
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        dead_letters = queues[schema.DEAD_LETTER_QUEUE.logical_name]
        poison = queues[schema.POISON_QUEUE.logical_name]
        self.alarms: list[cloudwatch.Alarm] = [
            # The reconciler surfaces both queues every 5 minutes (services/reconcile.py): a message older than this
            # means surfacing is broken, not that a delivery died (deaths are records, counted by reason).
            self._alarm(
                "DeadLettersAging",
                dead_letters.metric_approximate_age_of_oldest_message(period=PERIOD, statistic="Maximum"),
                threshold=self.SURFACING_MAX_AGE.to_seconds(),
                description="A dead letter has not been surfaced for 30 minutes: the reconciler is not running.",
            ),
            self._alarm(
                "PoisonMessagesAging",
                poison.metric_approximate_age_of_oldest_message(period=PERIOD, statistic="Maximum"),
                threshold=self.SURFACING_MAX_AGE.to_seconds(),
                description="A poison message has not been surfaced for 30 minutes: the reconciler is not running.",
            ),
            *self._backlog_alarms(queues),
            self._alarm(
                "RedriveJobsFailed",
                queues[
                    schema.REDRIVE_JOBS_DEAD_LETTER_QUEUE.logical_name
                ].metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum"),
                threshold=0,
                description="A redrive job failed repeatedly (a bug): the reconciler ends its redrive failed.",
            ),
            self._alarm(
                "FailingSpellBookkeeping",
                self._delivery_metric(FAILING_SPELL_ERRORS),
                threshold=0,
                description="The delivery path could not record an endpoint's failing spell: auto-disable may lag.",
            ),
            # Deliveries the platform killed: a bug (poison) or lost attempts, never a consumer's outage. A tenant's
            # endpoint failing is a metric on the dashboard (DeliveriesDead_exhausted), not a page.
            self._alarm(
                "PoisonMessages",
                self._metric(dead_metric(DeadReason.POISON), RECONCILER.name),
                threshold=0,
                description="Delivery messages failed processing repeatedly (a bug, not a consumer outage).",
            ),
            self._alarm(
                "AttemptsLost",
                self._metric(dead_metric(DeadReason.ATTEMPT_LOST), RECONCILER.name),
                threshold=0,
                description="Retry workflows gave up on unanswered attempts: those deliveries are dead.",
            ),
            self._alarm(
                "RetryWorkflowFailed",
                retry_workflow.metric_failed(period=PERIOD, statistic="Sum"),
                threshold=0,
                description="A retry workflow execution failed.",
            ),
            self._alarm(
                "RetryWorkflowTimedOut",
                retry_workflow.metric_timed_out(period=PERIOD, statistic="Sum"),
                threshold=0,
                description="A retry workflow execution timed out.",
            ),
            *self._throttle_alarms(throttles),
            # Per function: errors, and throttles (a function out of its reserved concurrency or the account's:
            # API callers get 5xx, and a throttled delivery receive counts toward the poison queue's
            # maxReceiveCount).
            *(
                self._alarm(f"{name.title()}{kind}", metric, threshold=0, description=description)
                for name, function in functions.items()
                for kind, metric, description in (
                    (
                        "Errors",
                        function.metric_errors(period=PERIOD, statistic="Sum"),
                        f"The {name} function raised errors.",
                    ),
                    (
                        "Throttled",
                        function.metric_throttles(period=PERIOD, statistic="Sum"),
                        f"The {name} function was throttled: it is out of concurrency.",
                    ),
                )
            ),
        ]
        self.dashboard = self._dashboard(queues, functions, retry_workflow, throttles)

    def _alarm_topic(self) -> sns.Topic:
        # A customer-managed key: CloudWatch cannot publish to a topic under the AWS-managed aws/sns key.
        key = kms.Key(self, "AlarmTopicKey", enable_key_rotation=True, description="Hookrelay alarm notifications")
        key.grant(iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey*")
        return sns.Topic(self, "AlarmTopic", master_key=key, enforce_ssl=True)

    def _alarm(self, construct_id: str, metric: cloudwatch.IMetric, *, threshold: float, description: str):
        alarm = cloudwatch.Alarm(
            self,
            construct_id,
            metric=metric,
            threshold=threshold,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"{description} Runbook: docs/runbook.md, {construct_id}.",
            alarm_name=f"{self._name_prefix}-{construct_id}" if self._name_prefix else None,
        )
        alarm.add_alarm_action(actions.SnsAction(self.topic))
        return alarm

    @classmethod
    def _delivery_metric(cls, name: str) -> cloudwatch.Metric:
        """A count the delivery function emits through Powertools Metrics (EMF), summed per period."""
        return cls._metric(name, DELIVERY.name)

    @staticmethod
    def _metric(name: str, service: str) -> cloudwatch.Metric:
        """A count a function emits through Powertools Metrics (EMF), summed per period."""
        return cloudwatch.Metric(
            namespace=METRICS_NAMESPACE,
            metric_name=name,
            dimensions_map={"service": service},
            statistic="Sum",
            period=PERIOD,
        )

    def _dashboard(
        self,
        queues: Mapping[str, sqs.IQueue],
        functions: Mapping[str, lambda_.IFunction],
        retry_workflow: sfn.IStateMachine,
        throttles: Mapping[str, cloudwatch.IMetric],
    ) -> cloudwatch.Dashboard:
        dashboard = cloudwatch.Dashboard(
            self, "Dashboard", dashboard_name=f"{self._name_prefix}-Dashboard" if self._name_prefix else None
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Intake: events accepted, deliveries created, batch items refused",
                left=[self._metric(name, INGEST.name) for name in INTAKE_METRICS],
                width=24,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Delivery attempts by outcome",
                left=[
                    self._delivery_metric(attempts_metric(status))
                    for status in (DeliveryStatus.DELIVERED, DeliveryStatus.RETRYING, DeliveryStatus.DEAD)
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Queue depth",
                left=[
                    queue.metric_approximate_number_of_messages_visible(period=PERIOD, label=name)
                    for name, queue in queues.items()
                ],
                width=12,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Oldest message age (s)",
                left=[
                    queue.metric_approximate_age_of_oldest_message(period=PERIOD, label=name)
                    for name, queue in queues.items()
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Retry workflows",
                left=[
                    retry_workflow.metric_started(period=PERIOD),
                    retry_workflow.metric_succeeded(period=PERIOD),
                    retry_workflow.metric_failed(period=PERIOD),
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Function errors",
                left=[function.metric_errors(period=PERIOD, label=name) for name, function in functions.items()],
                width=8,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Deliveries dead, by reason",
                left=[
                    self._metric(dead_metric(reason), service)
                    for reason in DeadReason
                    for service in (DELIVERY.name, RECONCILER.name)
                ],
                width=24,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Function duration p99 (ms)",
                left=[
                    function.metric_duration(period=PERIOD, statistic="p99", label=name)
                    for name, function in functions.items()
                ],
                width=24,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="DynamoDB throttle events by table (hot keys, quotas)",
                left=list(throttles.values()),
                width=24,
            ),
        )
        return dashboard
