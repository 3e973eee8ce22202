"""The Hookrelay stack: thin composition of one construct per concern."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import CfnOutput, IStableStringProducer, Lazy, Stack
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from hookrelay.adapters import schema
from hookrelay.domain.classification import ATTEMPT_TIMEOUT_SECONDS
from hookrelay.function_environment import Settings
from hookrelay.functions import DELIVERY
from scripts import build_lambda_asset
from stacks import config
from stacks.constructs.api import Api
from stacks.constructs.functions import Functions
from stacks.constructs.notices import Notices
from stacks.constructs.observability import Observability
from stacks.constructs.queues import Queues
from stacks.constructs.retry_workflow import RetryWorkflow
from stacks.constructs.storage import Storage


def lambda_asset(runtime: config.LambdaRuntime) -> Path:
    """The one asset directory of every function, built (or reused) for the functions' runtime and architecture."""
    return build_lambda_asset.build(runtime.python_version, Functions.architecture_name())


def cdk_runtime(runtime: config.LambdaRuntime) -> lambda_.Runtime:
    """aws-cdk-lib's own constant for the runtime (it knows every runtime of LAMBDA_PYTHON_RUNTIMES: tested)."""
    (known,) = (candidate for candidate in lambda_.Runtime.ALL if candidate.name == runtime.name)
    return known


@jsii.implements(IStableStringProducer)
class _Later:
    """A value read when the template is written, not when the construct is made."""

    def __init__(self, produce: Callable[[], str]) -> None:
        self._produce = produce

    def produce(self) -> str:
        return self._produce()


class HookrelayStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        # First: bad configuration fails synth before anything is built.
        schedule = config.retry_schedule(self.node)
        auto_disable = config.auto_disable_policy(self.node)
        concurrency = config.concurrency(self.node)
        api_key_rate = config.api_key_rate(self.node)
        alarm_email = config.alarm_email(self.node)
        alarm_topic_arn = config.alarm_topic_arn(self.node)
        enforce_event_catalogue = config.enforce_event_catalogue(self.node)
        endpoint_ports = config.endpoint_ports(self.node)
        limits = config.tenant_limits(self.node)
        telemetry = config.telemetry(self.node)
        runtime = config.lambda_runtime(self.node)
        shards = config.delivery_shards(self.node)
        slow_lane_after_ms = config.slow_lane_after_ms(self.node)
        log_shards = config.log_shards(self.node)

        # What the functions' environments carry of the settings (hookrelay/function_environment.py); the local
        # stack and its tests build the same environments from the same settings.
        self.function_settings = Settings(
            retry_schedule=json.dumps(schedule.to_config()),
            attempt_timeout_seconds=ATTEMPT_TIMEOUT_SECONDS,
            auto_disable_after_days=f"{auto_disable.disable_after_days:g}",
            api_key_rate_per_second=api_key_rate,
            enforce_event_catalogue=enforce_event_catalogue,
            xray_tracing=telemetry.xray_tracing,
            endpoint_ports=endpoint_ports,
            max_endpoints_per_tenant=limits.max_endpoints_per_tenant,
            max_filters_per_endpoint=limits.max_filters_per_endpoint,
            slow_lane_after_ms=slow_lane_after_ms,
            log_shards=log_shards,
        )
        storage = Storage(self, "Storage")
        queues = Queues(self, "Queues", specs=schema.all_queues(shards))
        notices = Notices(self, "Notices")
        retry = RetryWorkflow(
            self,
            "RetryWorkflow",
            delivery_queue=queues.queue(schema.DELIVERY_QUEUE),
            dead_letter_queue=queues.queue(schema.DEAD_LETTER_QUEUE),
            delivery_queues=[queues.queue(spec) for spec in schema.delivery_queues(shards)],
            telemetry=telemetry,
        )
        functions = Functions(
            self,
            "Functions",
            code=lambda_.Code.from_asset(str(lambda_asset(runtime))),
            runtime=cdk_runtime(runtime),
            storage=storage,
            queues=queues,
            shards=shards,
            notices=notices,
            retry_workflow=retry.state_machine,
            # The API is made after its functions (its routes need them); its endpoint is read once it exists.
            api_url=Lazy.string(_Later(lambda: api.url)),
            settings=self.function_settings,
            reserved_concurrency=concurrency.reserved,
            event_source_max_concurrency={DELIVERY.name: concurrency.delivery_max_concurrency},
            xray_tracing=telemetry.xray_tracing,
        )
        api = Api(self, "Api", functions=functions.functions)
        observability = Observability(
            self,
            "Observability",
            queues=queues.queues,
            functions=functions.functions,
            retry_workflow=retry.state_machine,
            alarm_email=alarm_email,
            alarm_topic_arn=alarm_topic_arn,
        )

        CfnOutput(self, "ApiUrl", value=api.url, description="Base URL of the HTTP API")
        CfnOutput(
            self,
            "ApiKeysTableName",
            value=storage.table(schema.API_KEYS).table_name,
            description="For scripts/create_admin_key.py --table",
        )
        for name, queue in queues.queues.items():
            CfnOutput(self, f"{name}Url", value=queue.queue_url)
        CfnOutput(self, "RetryStateMachineArn", value=retry.state_machine.state_machine_arn)
        delivery_role = functions.function(DELIVERY.name).role
        assert delivery_role is not None  # each function has its own role (constructs/functions.py)
        CfnOutput(
            self,
            config.DELIVERY_ROLE_OUTPUT,
            value=delivery_role.role_arn,
            description="AWS destinations: the principal a consumer's role trusts, with its tenant's external ID",
        )
        CfnOutput(
            self,
            config.DELIVERY_SHARDS_OUTPUT,
            value=str(shards),
            description="The delivery queues' shards: scripts/deploy.py refuses a lower delivery_shards than this",
        )
        CfnOutput(
            self,
            "AlarmTopicArn",
            value=observability.topic.topic_arn,
            description="Every operator alarm notifies this topic (docs/runbook.md); a stage's alarm_email subscribes",
        )
        for name, topic in notices.topics.items():
            CfnOutput(self, f"{name}Arn", value=topic.topic_arn, description="Subscribe to endpoint health notices")
