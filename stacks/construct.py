"""HookRelay, the whole system as one construct (an L3): usable inside any Stack of any CDK app.

The app's own stack (stacks/hookrelay_stack.py) is this construct under the id DEFAULT_ID, which the CDK leaves out
of logical IDs: its resources keep the IDs they had before the construct existed (a changed ID replaces a table).
Two instances in one account differ by their `name_prefix` (props) wherever a physical name is explicit.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import jsii
from aws_cdk import CfnOutput, IStableStringProducer, Lazy
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from constructs import Construct

from hookrelay.adapters import schema
from hookrelay.domain.classification import ATTEMPT_TIMEOUT_SECONDS
from hookrelay.domain.portal import PAGE_PATH
from hookrelay.function_environment import Settings
from hookrelay.functions import DELIVERY
from stacks import config, lambda_asset
from stacks.constructs.api import Api
from stacks.constructs.domain import CustomDomain
from stacks.constructs.functions import Functions
from stacks.constructs.notices import Notices
from stacks.constructs.observability import Observability
from stacks.constructs.queues import Queues
from stacks.constructs.retry_workflow import RetryWorkflow
from stacks.constructs.storage import Storage
from stacks.props import HookRelayProps, Resolved

# The CDK drops a path component of this id from logical IDs (and from their hash).
DEFAULT_ID = "Default"


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


class HookRelay(Construct):
    """Tables, queues, the retry workflow, the functions, the HTTP API (on its own domain if given), alarms and
    a dashboard, with the stack outputs the deploy script and the runbook read."""

    def __init__(self, scope: Construct, construct_id: str, props: HookRelayProps | None = None) -> None:
        super().__init__(scope, construct_id)
        self.props = props if props is not None else HookRelayProps()
        # First: bad configuration fails synth before anything is built.
        resolved = self.props.resolve()
        self.resolved = resolved
        self.function_settings = self._function_settings(resolved)
        prefix = self.props.name_prefix
        self.storage = Storage(
            self,
            "Storage",
            removal_policy=self.props.table_removal_policy,
            deletion_protection=self.props.table_deletion_protection,
        )
        self.queues = Queues(self, "Queues", specs=schema.all_queues(resolved.shards))
        self.notices = Notices(self, "Notices")
        self.retry_workflow = RetryWorkflow(
            self,
            "RetryWorkflow",
            delivery_queue=self.queues.queue(schema.DELIVERY_QUEUE),
            dead_letter_queue=self.queues.queue(schema.DEAD_LETTER_QUEUE),
            delivery_queues=[self.queues.queue(spec) for spec in schema.delivery_queues(resolved.shards)],
            telemetry=resolved.telemetry,
            name_prefix=prefix,
            log_removal_policy=self.props.log_removal_policy,
        )
        self.functions = Functions(
            self,
            "Functions",
            code=lambda_.Code.from_asset(
                str(lambda_asset.build(resolved.runtime.python_version, Functions.architecture_name()))
            ),
            runtime=cdk_runtime(resolved.runtime),
            storage=self.storage,
            queues=self.queues,
            shards=resolved.shards,
            notices=self.notices,
            retry_workflow=self.retry_workflow.state_machine,
            # The API is made after its functions (its routes need them); its URL is read once it exists.
            api_url=Lazy.string(_Later(lambda: self.api_url)),
            settings=self.function_settings,
            reserved_concurrency=resolved.concurrency.reserved,
            event_source_max_concurrency={DELIVERY.name: resolved.concurrency.delivery_max_concurrency},
            xray_tracing=resolved.telemetry.xray_tracing,
            log_removal_policy=self.props.log_removal_policy,
        )
        self.api = Api(
            self,
            "Api",
            functions=self.functions.functions,
            api_name=f"{prefix}-Api" if prefix else None,
            log_removal_policy=self.props.log_removal_policy,
        )
        self.domain: CustomDomain | None = None
        if self.props.domain_name is not None:
            self.domain = CustomDomain(
                self,
                "Domain",
                domain_name=self.props.domain_name,
                http_api=self.api.http_api,
                stage=self.api.stage,
                certificate=self.props.certificate,
                hosted_zone=self.props.hosted_zone,
            )
        self.observability = Observability(
            self,
            "Observability",
            queues=self.queues.queues,
            functions=self.functions.functions,
            retry_workflow=self.retry_workflow.state_machine,
            tables=self.storage.tables,
            alarm_email=resolved.alarm_email,
            alarm_topic=self.props.alarm_topic,
            name_prefix=prefix,
        )
        self._outputs(resolved)

    @property
    def api_url(self) -> str:
        """The API's base URL, no trailing slash: the custom domain's when there is one, else execute-api's. The
        functions hand it out (portal links), so producers and consumers keep it across redeploys."""
        return self.domain.url if self.domain is not None else self.api.url

    @property
    def portal_url(self) -> str:
        """The consumer portal's page (a session's link adds its token: domain/portal.py)."""
        return f"{self.api_url}{PAGE_PATH}"

    @property
    def alarm_topic(self) -> sns.ITopic:
        return self.observability.topic

    @staticmethod
    def _function_settings(resolved: Resolved) -> Settings:
        """What the functions' environments carry of the settings (hookrelay/function_environment.py); the local
        stack and its tests build the same environments from the same settings."""
        return Settings(
            retry_schedule=json.dumps(resolved.schedule.to_config()),
            attempt_timeout_seconds=ATTEMPT_TIMEOUT_SECONDS,
            auto_disable_after_days=f"{resolved.auto_disable.disable_after_days:g}",
            api_key_rate_per_second=resolved.api_key_rate,
            enforce_event_catalogue=resolved.enforce_event_catalogue,
            xray_tracing=resolved.telemetry.xray_tracing,
            endpoint_ports=resolved.endpoint_ports,
            max_endpoints_per_tenant=resolved.limits.max_endpoints_per_tenant,
            max_filters_per_endpoint=resolved.limits.max_filters_per_endpoint,
            slow_lane_after_ms=resolved.slow_lane_after_ms,
            log_shards=resolved.log_shards,
        )

    def _outputs(self, resolved: Resolved) -> None:
        CfnOutput(self, "ApiUrl", value=self.api_url, description="Base URL of the HTTP API")
        CfnOutput(
            self,
            "PortalUrl",
            value=self.portal_url,
            description="The consumer portal's page (POST /v1/portal-sessions gives each consumer its link)",
        )
        CfnOutput(
            self,
            "ApiKeysTableName",
            value=self.storage.table(schema.API_KEYS).table_name,
            description="For scripts/create_admin_key.py --table",
        )
        for name, queue in self.queues.queues.items():
            CfnOutput(self, f"{name}Url", value=queue.queue_url)
        CfnOutput(self, "RetryStateMachineArn", value=self.retry_workflow.state_machine.state_machine_arn)
        delivery_role = self.functions.function(DELIVERY.name).role
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
            value=str(resolved.shards),
            description="The delivery queues' shards: scripts/deploy.py refuses a lower delivery_shards than this",
        )
        CfnOutput(
            self,
            "AlarmTopicArn",
            value=self.observability.topic.topic_arn,
            description="Every operator alarm notifies this topic (docs/runbook.md); a stage's alarm_email subscribes",
        )
        for name, topic in self.notices.topics.items():
            CfnOutput(self, f"{name}Arn", value=topic.topic_arn, description="Subscribe to endpoint health notices")
