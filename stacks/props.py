"""HookRelayProps: what an embedding CDK app sets on the HookRelay construct (stacks/construct.py).

Every setting the stage files also hold (stacks/config.py) keeps the context's name and default here, and is
checked by the same reader: `resolve()` hands the props to stacks/config.py in context form, so a value refused in
deploy/<stage>.json is refused here, with the same message. `from_context` is the other direction: what the app's
own stack (stacks/hookrelay_stack.py) builds from its stage file and `-c` values. docs/embedding.md's table of
props is generated from the fields' `doc` metadata (`props_table`, tested against the page).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from aws_cdk import RemovalPolicy, Token
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_sns as sns
from constructs import Construct, Node

from hookrelay.adapters.schema import DEFAULT_LOG_SHARDS
from hookrelay.domain.addresses import DEFAULT_ENDPOINT_PORTS, EndpointPorts
from hookrelay.domain.lanes import DEFAULT_SLOW_LANE_AFTER_MS
from hookrelay.domain.limits import DEFAULT_MAX_ENDPOINTS_PER_TENANT, DEFAULT_MAX_FILTERS_PER_ENDPOINT, TenantLimits
from hookrelay.domain.queues import DEFAULT_DELIVERY_SHARDS
from hookrelay.domain.rate_limit import DEFAULT_PER_KEY_PER_SECOND
from hookrelay.domain.schedule import RetrySchedule
from hookrelay.services.auto_disable import DEFAULT_DISABLE_AFTER_DAYS, AutoDisablePolicy
from stacks import config
from stacks.stage import Settings

RetryScheduleSetting = str | Sequence[int] | Mapping[str, Any]


def _doc(text: str) -> dict[str, str]:
    return {"doc": text}


@dataclass(frozen=True)
class HookRelayProps:
    """The HookRelay construct's settings; each defaults to what deploy/dev.json's absence of it means."""

    name_prefix: str | None = field(
        default=None,
        metadata=_doc(
            "Starts every explicit physical name (the retry workflow's log group, the HTTP API, the dashboard, the "
            "alarms), so two instances in one account never collide. Unset: the stack's name for the log group "
            "and no other explicit names (the app's own stack)."
        ),
    )
    retry_schedule: RetryScheduleSetting = field(
        default=config.DEFAULT_RETRY_SCHEDULE,
        metadata=_doc(
            '`"default"`, `"short"`, a list of gaps in seconds starting with 0, or `{gaps, repeat_every, horizon}`.'
        ),
    )
    auto_disable_after_days: float = field(
        default=DEFAULT_DISABLE_AFTER_DAYS,
        metadata=_doc("Days of failure with no success before an endpoint is disabled."),
    )
    delivery_shards: int = field(
        default=DEFAULT_DELIVERY_SHARDS,
        metadata=_doc("Delivery queue shards (a fast and a slow lane each); may only grow once deployed."),
    )
    log_shards: int = field(
        default=DEFAULT_LOG_SHARDS,
        metadata=_doc("Write shards of the delivery log's indexes (1..256); never lower it once deployed."),
    )
    slow_lane_after_ms: int = field(
        default=DEFAULT_SLOW_LANE_AFTER_MS,
        metadata=_doc("An attempt slower than this moves its endpoint to its shard's slow lane."),
    )
    delivery_max_concurrency: int = field(
        default=config.DEFAULT_DELIVERY_MAX_CONCURRENCY,
        metadata=_doc("Maximum concurrency of each delivery event source (2..1000)."),
    )
    reserved_concurrency: Mapping[str, int] = field(
        default_factory=lambda: dict(config.DEFAULT_RESERVED_CONCURRENCY),
        metadata=_doc('Reserved concurrency by function name, e.g. `{"authorizer": 30, "ingest": 30}`.'),
    )
    api_key_rate_per_second: int | None = field(
        default=DEFAULT_PER_KEY_PER_SECOND, metadata=_doc("Requests a second per API key; None: no per-key limit.")
    )
    enforce_event_catalogue: bool = field(
        default=False, metadata=_doc("Endpoint filters must name a registered event type (while any is).")
    )
    endpoint_ports: str = field(
        default=DEFAULT_ENDPOINT_PORTS.value,
        metadata=_doc(
            '`"wide"` (443, 8443, 1024-65535) or `"narrow"` (443 and 8443): the ports endpoint URLs may name.'
        ),
    )
    max_endpoints_per_tenant: int = field(
        default=DEFAULT_MAX_ENDPOINTS_PER_TENANT, metadata=_doc("Endpoints one tenant may have.")
    )
    max_filters_per_endpoint: int = field(
        default=DEFAULT_MAX_FILTERS_PER_ENDPOINT, metadata=_doc("Event type filters one endpoint may have.")
    )
    lambda_runtime: str = field(
        default=config.DEFAULT_LAMBDA_RUNTIME,
        metadata=_doc(f"The functions' Python runtime: one of {', '.join(config.LAMBDA_PYTHON_RUNTIMES)}."),
    )
    workflow_log_level: str = field(
        default=config.DEFAULT_WORKFLOW_LOG_LEVEL,
        metadata=_doc(f"The retry workflow's execution log level: one of {', '.join(config.WORKFLOW_LOG_LEVELS)}."),
    )
    xray_tracing: bool = field(
        default=config.DEFAULT_XRAY_TRACING == "sampled",
        metadata=_doc("X-Ray tracing of the functions and the workflow, sampled by the account's rules."),
    )
    alarm_email: str | None = field(
        default=None, metadata=_doc("Subscribed to the construct's own alarm topic (not with `alarm_topic`).")
    )
    alarm_topic: sns.ITopic | None = field(
        default=None,
        metadata=_doc("An existing topic (on-call's) every alarm notifies instead of a topic of the construct's own."),
    )
    domain_name: str | None = field(
        default=None,
        metadata=_doc("The API's own domain (e.g. `hooks.example.com`): needs `certificate` or `hosted_zone`."),
    )
    certificate: acm.ICertificate | None = field(
        default=None, metadata=_doc("An ACM certificate for `domain_name`, in the stack's region.")
    )
    hosted_zone: route53.IHostedZone | None = field(
        default=None,
        metadata=_doc(
            "The Route 53 zone of `domain_name`: its alias record goes there and, without `certificate`, a "
            "DNS-validated certificate is made in it."
        ),
    )
    table_removal_policy: RemovalPolicy = field(
        default=RemovalPolicy.RETAIN,
        metadata=_doc("The DynamoDB tables' removal policy (they hold the 30-day record)."),
    )
    table_deletion_protection: bool = field(
        default=True, metadata=_doc("DynamoDB's own deletion protection on the tables.")
    )
    log_removal_policy: RemovalPolicy = field(
        default=RemovalPolicy.DESTROY,
        metadata=_doc("The log groups' removal policy (functions, API access log, retry workflow)."),
    )

    def context(self) -> dict[str, Any]:
        """The settings stacks/config.py reads, in the form the stage files give them."""
        values: dict[str, Any] = {
            name: getattr(self, name) for name in (f.name for f in fields(self)) if name in config.setting_names()
        }
        values[config.RETRY_SCHEDULE_CONTEXT] = _context_schedule(self.retry_schedule)
        values[config.RESERVED_CONCURRENCY_CONTEXT] = dict(self.reserved_concurrency)
        values[config.API_KEY_RATE_CONTEXT] = (
            0 if self.api_key_rate_per_second is None else self.api_key_rate_per_second
        )
        values[config.XRAY_TRACING_CONTEXT] = "sampled" if self.xray_tracing else "off"
        return values

    def resolve(self) -> Resolved:
        """Every setting checked as the stage file's are (InvalidConfiguration names the one that is wrong)."""
        if self.name_prefix is not None:
            config.check_name_prefix(self.name_prefix)
        config.check_alarm_destination(topic_given=self.alarm_topic is not None, email=self.alarm_email or None)
        if self.domain_name is not None:
            # "": a zone whose name is a token (made in the same app), so only the deploy can check the domain is in it
            zone_name = None if self.hosted_zone is None else (_plain(self.hosted_zone.zone_name) or "")
            config.check_domain_name(
                self.domain_name, has_certificate=self.certificate is not None, zone_name=zone_name
            )
        elif self.certificate is not None or self.hosted_zone is not None:
            raise config.InvalidConfiguration("certificate or hosted_zone given without domain_name")
        return Resolved.from_node(Settings(self.context()))

    @classmethod
    def from_context(cls, scope: Construct) -> HookRelayProps:
        """The props of the app's own stack: its context (stage file, then `-c`), checked by stacks/config.py. The
        alarm topic, certificate and zone named by ARN or ID are imported into `scope` (no resources)."""
        node = scope.node
        resolved = Resolved.from_node(node)
        topic_arn = config.alarm_topic_arn(node)
        domain = config.custom_domain(node)
        return cls(
            retry_schedule=_raw_schedule(node),
            auto_disable_after_days=resolved.auto_disable.disable_after_days,
            delivery_shards=resolved.shards,
            log_shards=resolved.log_shards,
            slow_lane_after_ms=resolved.slow_lane_after_ms,
            delivery_max_concurrency=resolved.concurrency.delivery_max_concurrency,
            reserved_concurrency=dict(resolved.concurrency.reserved),
            api_key_rate_per_second=resolved.api_key_rate,
            enforce_event_catalogue=resolved.enforce_event_catalogue,
            endpoint_ports=resolved.endpoint_ports.value,
            max_endpoints_per_tenant=resolved.limits.max_endpoints_per_tenant,
            max_filters_per_endpoint=resolved.limits.max_filters_per_endpoint,
            lambda_runtime=resolved.runtime.name,
            workflow_log_level=resolved.telemetry.workflow_log_level,
            xray_tracing=resolved.telemetry.xray_tracing,
            alarm_email=resolved.alarm_email,
            alarm_topic=sns.Topic.from_topic_arn(scope, "AlarmTopic", topic_arn) if topic_arn else None,
            **_domain_props(scope, domain),
        )


@dataclass(frozen=True)
class Resolved:
    """The checked settings, as the constructs take them."""

    schedule: RetrySchedule
    auto_disable: AutoDisablePolicy
    concurrency: config.Concurrency
    api_key_rate: int | None
    alarm_email: str | None
    enforce_event_catalogue: bool
    endpoint_ports: EndpointPorts
    limits: TenantLimits
    telemetry: config.Telemetry
    runtime: config.LambdaRuntime
    shards: int
    slow_lane_after_ms: int
    log_shards: int

    @classmethod
    def from_node(cls, node: Any) -> Resolved:
        """`node`: a construct's node, or stage.Settings (anything with try_get_context)."""
        return cls(
            schedule=config.retry_schedule(node),
            auto_disable=config.auto_disable_policy(node),
            concurrency=config.concurrency(node),
            api_key_rate=config.api_key_rate(node),
            alarm_email=config.alarm_email(node),
            enforce_event_catalogue=config.enforce_event_catalogue(node),
            endpoint_ports=config.endpoint_ports(node),
            limits=config.tenant_limits(node),
            telemetry=config.telemetry(node),
            runtime=config.lambda_runtime(node),
            shards=config.delivery_shards(node),
            slow_lane_after_ms=config.slow_lane_after_ms(node),
            log_shards=config.log_shards(node),
        )


def _plain(value: str) -> str | None:
    """`value` unless it is a token (a zone made in the same app has no name until deploy)."""
    return None if Token.is_unresolved(value) else value


def _context_schedule(schedule: RetryScheduleSetting) -> str:
    return (
        schedule
        if isinstance(schedule, str)
        else json.dumps(schedule if isinstance(schedule, Mapping) else list(schedule))
    )


def _raw_schedule(node: Node) -> RetryScheduleSetting:
    raw: Any = node.try_get_context(config.RETRY_SCHEDULE_CONTEXT)
    config.retry_schedule(node)  # refused here, with the context's message, before it is a prop
    return config.DEFAULT_RETRY_SCHEDULE if raw is None else raw


def _domain_props(scope: Construct, domain: config.CustomDomain | None) -> dict[str, Any]:
    if domain is None:
        return {}
    props: dict[str, Any] = {"domain_name": domain.domain_name}
    if domain.certificate_arn:
        props["certificate"] = acm.Certificate.from_certificate_arn(scope, "Certificate", domain.certificate_arn)
    if domain.hosted_zone_id and domain.hosted_zone_name:
        props["hosted_zone"] = route53.HostedZone.from_hosted_zone_attributes(
            scope, "HostedZone", hosted_zone_id=domain.hosted_zone_id, zone_name=domain.hosted_zone_name
        )
    return props


def props_table() -> str:
    """docs/embedding.md's table of props: name, type, default, what it does."""
    rows = ["| Prop | Type | Default | What it sets |", "| --- | --- | --- | --- |"]
    for prop in fields(HookRelayProps):
        default = prop.default if prop.default is not MISSING else prop.default_factory()  # type: ignore[misc]
        shown = f"RemovalPolicy.{default.name}" if isinstance(default, RemovalPolicy) else repr(default)
        rows.append(f"| `{prop.name}` | `{_type_name(prop.type)}` | `{shown}` | {prop.metadata['doc']} |")
    return "\n".join(rows) + "\n"


def _type_name(annotation: Any) -> str:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    # A pipe inside a table cell splits it, even in code: GitHub's tables take it escaped.
    return text.replace("RetryScheduleSetting", "str | list[int] | dict").replace("|", "\\|")
