"""Deployment configuration read from CDK context, validated at synth time with the runtime's own code."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from constructs import Node

from hookrelay.adapters.schema import DEFAULT_LOG_SHARDS, MAX_LOG_SHARDS
from hookrelay.domain.addresses import EndpointPorts, endpoint_ports_from_config
from hookrelay.domain.lanes import DEFAULT_SLOW_LANE_AFTER_MS, check_slow_lane_after_ms
from hookrelay.domain.limits import (
    DEFAULT_MAX_ENDPOINTS_PER_TENANT,
    DEFAULT_MAX_FILTERS_PER_ENDPOINT,
    MAX_ENDPOINTS_PER_TENANT_CEILING,
    TenantLimits,
    limit_from_config,
)
from hookrelay.domain.matching import MAX_FILTERS
from hookrelay.domain.queues import DEFAULT_DELIVERY_SHARDS, check_shards
from hookrelay.domain.rate_limit import DEFAULT_PER_KEY_PER_SECOND, per_key_limit_from_config
from hookrelay.domain.schedule import RetrySchedule, schedule_from_config
from hookrelay.functions import BY_NAME
from hookrelay.services.auto_disable import (
    MAX_DISABLE_AFTER_DAYS,
    WARNINGS,
    AutoDisablePolicy,
    InvalidPolicy,
    policy_from_config,
)
from hookrelay.services.event_types import enforce_from_config

RETRY_SCHEDULE_CONTEXT = "retry_schedule"
AUTO_DISABLE_CONTEXT = "auto_disable_after_days"
DEFAULT_RETRY_SCHEDULE = "default"


class InvalidConfiguration(ValueError):
    pass


def retry_schedule(node: Node) -> RetrySchedule:
    """The `retry_schedule` context: a profile name, a JSON list of gaps, or {gaps, repeat_every, horizon}."""
    raw: Any = node.try_get_context(RETRY_SCHEDULE_CONTEXT)
    try:
        return schedule_from_config(DEFAULT_RETRY_SCHEDULE if raw is None else raw)
    except (ValueError, TypeError) as error:  # InvalidSchedule and bad JSON are ValueErrors
        raise InvalidConfiguration(
            f"CDK context {RETRY_SCHEDULE_CONTEXT}={raw!r} is not a valid retry schedule: {error}. "
            'Use "default", "short", a JSON list of gaps in seconds starting with 0 (e.g. [0, 60, 300]), '
            'or {"gaps": [...], "repeat_every": seconds, "horizon": seconds}.'
        ) from error


def auto_disable_policy(node: Node) -> AutoDisablePolicy:
    """The `auto_disable_after_days` context: days of failure with no success before an endpoint is disabled."""
    raw: Any = node.try_get_context(AUTO_DISABLE_CONTEXT)
    if isinstance(raw, bool):  # a JSON true is not a number of days
        raw = "not a number"
    try:
        return policy_from_config(raw)
    except InvalidPolicy as error:
        raise InvalidConfiguration(
            f"CDK context {AUTO_DISABLE_CONTEXT}={raw!r} is not valid: {error}. Give a number of days after the "
            f"last warning ({WARNINGS[-1][0]:g} days) and at most {MAX_DISABLE_AFTER_DAYS:g}, "
            "e.g. -c auto_disable_after_days=7."
        ) from error


# --- The Lambda runtime: the Python the functions run on, whatever Python deploys them ---

LAMBDA_RUNTIME_CONTEXT = "lambda_runtime"
# Lambda's Python runtimes the code supports: python3.11 is both the oldest the code in lambdas/ runs on (its
# tests run there; pyproject's requires-python) and the oldest Lambda still offers; python3.14 the newest Lambda
# (and this aws-cdk-lib) offers. scripts/build_lambda_asset.py builds the asset for any of them from any of them.
LAMBDA_PYTHON_RUNTIMES = ("python3.11", "python3.12", "python3.13", "python3.14")
DEFAULT_LAMBDA_RUNTIME = "python3.13"


@dataclass(frozen=True)
class LambdaRuntime:
    name: str  # Lambda's identifier, "python3.13"

    @property
    def python_version(self) -> str:
        return self.name.removeprefix("python")  # "3.13"


def lambda_runtime(node: Node) -> LambdaRuntime:
    """`lambda_runtime`: the functions' Python runtime, one of LAMBDA_PYTHON_RUNTIMES (default python3.13)."""
    raw: Any = node.try_get_context(LAMBDA_RUNTIME_CONTEXT)
    name = DEFAULT_LAMBDA_RUNTIME if raw in (None, "") else raw
    if name not in LAMBDA_PYTHON_RUNTIMES:
        raise InvalidConfiguration(
            f"CDK context {LAMBDA_RUNTIME_CONTEXT}={raw!r} is not a Lambda runtime this code supports: give one of "
            f"{', '.join(LAMBDA_PYTHON_RUNTIMES)}, e.g. -c {LAMBDA_RUNTIME_CONTEXT}={DEFAULT_LAMBDA_RUNTIME}."
        )
    return LambdaRuntime(name)


# --- Concurrency, fairness and alarms: what one noisy tenant may take, and who hears about it ---

DELIVERY_MAX_CONCURRENCY_CONTEXT = "delivery_max_concurrency"
RESERVED_CONCURRENCY_CONTEXT = "reserved_concurrency"
API_KEY_RATE_CONTEXT = "api_key_rate_per_second"
ALARM_EMAIL_CONTEXT = "alarm_email"

# Each delivery event source's maximum concurrency: on a FIFO queue Lambda scales with active message groups, so
# a burst of slow endpoints could otherwise take the account's concurrency (and throttled receives count toward
# maxReceiveCount, pushing messages to the poison queue). SQS event sources accept 2..1000. There are two event
# sources per delivery shard (its fast and slow lane), so the default is SQS's least: on one shard (the dev stage
# file) its 2 x 2 fit the smallest quota a new account is given (10) at most half of it, the API's functions
# sharing the rest. An account with the usual 1,000 raises it in its stage file (deploy/production.json: 100 on
# 2 shards); `make deploy` says what fits.
DEFAULT_DELIVERY_MAX_CONCURRENCY = 2
# Reserved concurrency: guaranteed to (and the ceiling of) the functions every request needs. None by default:
# Lambda keeps 100 of the account's concurrency unreserved, so on a quota of 10 any reservation fails the deploy.
# deploy/production.json reserves 30 + 30 (the stage's 200 requests a second at about 100 ms each, 20 at once,
# with room for cold starts).
DEFAULT_RESERVED_CONCURRENCY: dict[str, int] = {}


@dataclass(frozen=True)
class Concurrency:
    delivery_max_concurrency: int
    reserved: Mapping[str, int]  # function name -> reserved concurrent executions


SLOW_LANE_AFTER_MS_CONTEXT = "slow_lane_after_ms"


def slow_lane_after_ms(node: Node) -> int:
    """`slow_lane_after_ms` (>= MIN_SLOW_LANE_AFTER_MS, default DEFAULT_SLOW_LANE_AFTER_MS): an attempt in a fast
    lane slower than this moves its endpoint to the slow lane; one in the slow lane within half of it moves it back
    (domain/lanes.py)."""
    raw: Any = node.try_get_context(SLOW_LANE_AFTER_MS_CONTEXT)
    value = DEFAULT_SLOW_LANE_AFTER_MS if raw is None else raw
    try:
        return check_slow_lane_after_ms(int(value) if isinstance(value, str) and value.isdigit() else value)
    except ValueError as error:
        raise InvalidConfiguration(f"CDK context {SLOW_LANE_AFTER_MS_CONTEXT}={raw!r} is not valid: {error}") from error


DELIVERY_SHARDS_CONTEXT = "delivery_shards"
# The stack's output naming its delivery shards: scripts/deploy.py reads it back before the next deploy.
DELIVERY_SHARDS_OUTPUT = "DeliveryShards"
# The delivery role's ARN: what a consumer's role for an AWS destination trusts (the consumer guide).
DELIVERY_ROLE_OUTPUT = "DeliveryRoleArn"


def delivery_shards(node: Node) -> int:
    """`delivery_shards` (1..MAX_DELIVERY_SHARDS, default DEFAULT_DELIVERY_SHARDS): the delivery queues' shards, each
    a fast and a slow lane (domain/queues.py), sized by the capacity model (bench/quotas.py). It may only grow: each
    endpoint keeps the shard it was given when it was created, so a lower number would strand the endpoints of the
    shards taken away (scripts/deploy.py refuses it against the deployed stack's `DeliveryShards` output)."""
    raw: Any = node.try_get_context(DELIVERY_SHARDS_CONTEXT)
    value = DEFAULT_DELIVERY_SHARDS if raw is None else raw
    try:
        return check_shards(int(value) if isinstance(value, str) and value.isdigit() else value)
    except ValueError as error:
        raise InvalidConfiguration(
            f"CDK context {DELIVERY_SHARDS_CONTEXT}={raw!r} is not valid: {error}. It may only grow once deployed."
        ) from error


def concurrency(node: Node) -> Concurrency:
    """`delivery_max_concurrency` (2..1000) and `reserved_concurrency` ({function: n}, n >= 1; {} for none)."""
    raw_max: Any = node.try_get_context(DELIVERY_MAX_CONCURRENCY_CONTEXT)
    maximum = DEFAULT_DELIVERY_MAX_CONCURRENCY if raw_max is None else raw_max
    if isinstance(maximum, bool) or not isinstance(maximum, int | str) or not str(maximum).isdigit():
        raise InvalidConfiguration(f"CDK context {DELIVERY_MAX_CONCURRENCY_CONTEXT}={raw_max!r} is not a number")
    if not 2 <= int(maximum) <= 1000:
        raise InvalidConfiguration(
            f"CDK context {DELIVERY_MAX_CONCURRENCY_CONTEXT}={raw_max!r}: an SQS event source's maximum concurrency "
            "is 2..1000"
        )
    raw_reserved: Any = node.try_get_context(RESERVED_CONCURRENCY_CONTEXT)
    reserved = DEFAULT_RESERVED_CONCURRENCY if raw_reserved is None else raw_reserved
    if isinstance(reserved, str):
        try:
            reserved = json.loads(reserved)  # `-c reserved_concurrency='{"ingest": 50}'` arrives as a string
        except ValueError:
            reserved = None
    if not isinstance(reserved, dict) or not all(
        name in BY_NAME and isinstance(n, int) and not isinstance(n, bool) and n >= 1 for name, n in reserved.items()
    ):
        raise InvalidConfiguration(
            f"CDK context {RESERVED_CONCURRENCY_CONTEXT}={raw_reserved!r} is not valid: give a JSON object of "
            f'function names ({", ".join(BY_NAME)}) to whole numbers >= 1, e.g. {{"authorizer": 30, "ingest": 30}}, '
            "or {} for none"
        )
    return Concurrency(delivery_max_concurrency=int(maximum), reserved=dict(reserved))


def api_key_rate(node: Node) -> int | None:
    """`api_key_rate_per_second`: each API key's requests a second (domain/rate_limit.py); 0 turns it off."""
    raw: Any = node.try_get_context(API_KEY_RATE_CONTEXT)
    if raw is None:
        return DEFAULT_PER_KEY_PER_SECOND
    if raw in (0, "0"):
        return None
    try:
        return per_key_limit_from_config(raw)
    except (ValueError, TypeError) as error:
        raise InvalidConfiguration(
            f"CDK context {API_KEY_RATE_CONTEXT}={raw!r} is not valid: {error}. Give requests per second per key "
            "(e.g. -c api_key_rate_per_second=100), or 0 for no per-key limit."
        ) from error


def alarm_email(node: Node) -> str | None:
    """`alarm_email`: the address the alarm topic is subscribed to (it must confirm); unset or empty: none."""
    raw: Any = node.try_get_context(ALARM_EMAIL_CONTEXT)
    if raw in (None, ""):
        return None
    if not isinstance(raw, str) or not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", raw):
        raise InvalidConfiguration(f"CDK context {ALARM_EMAIL_CONTEXT}={raw!r} is not an email address")
    return raw


ENFORCE_EVENT_CATALOGUE_CONTEXT = "enforce_event_catalogue"


def enforce_event_catalogue(node: Node) -> bool:
    """`enforce_event_catalogue`: endpoint filters must match a registered event type (while any is); off by default."""
    raw: Any = node.try_get_context(ENFORCE_EVENT_CATALOGUE_CONTEXT)
    try:
        return enforce_from_config(raw)
    except ValueError as error:
        raise InvalidConfiguration(
            f"CDK context {ENFORCE_EVENT_CATALOGUE_CONTEXT}={raw!r} is not valid: {error}. "
            "Give true or false, e.g. -c enforce_event_catalogue=true."
        ) from error


ENDPOINT_PORTS_CONTEXT = "endpoint_ports"


def endpoint_ports(node: Node) -> EndpointPorts:
    """`endpoint_ports`: the ports endpoint URLs may name, `wide` (443, 8443, 1024-65535; the default) or `narrow`
    (443 and 8443 only)."""
    raw: Any = node.try_get_context(ENDPOINT_PORTS_CONTEXT)
    try:
        return endpoint_ports_from_config(raw)
    except ValueError as error:
        raise InvalidConfiguration(
            f"CDK context {ENDPOINT_PORTS_CONTEXT}={raw!r} is not valid: {error}. Give wide (443, 8443 and "
            "1024-65535) or narrow (443 and 8443 only), e.g. -c endpoint_ports=narrow."
        ) from error


# --- Per-tenant limits: what one tenant's keys may make every event of theirs cost (domain/limits.py) ---

MAX_ENDPOINTS_PER_TENANT_CONTEXT = "max_endpoints_per_tenant"
MAX_FILTERS_PER_ENDPOINT_CONTEXT = "max_filters_per_endpoint"


def tenant_limits(node: Node) -> TenantLimits:
    """`max_endpoints_per_tenant` (1..10,000, default 1,000) and `max_filters_per_endpoint` (1..100, default 20)."""
    values: dict[str, int] = {}
    for context, default, ceiling in (
        (MAX_ENDPOINTS_PER_TENANT_CONTEXT, DEFAULT_MAX_ENDPOINTS_PER_TENANT, MAX_ENDPOINTS_PER_TENANT_CEILING),
        (MAX_FILTERS_PER_ENDPOINT_CONTEXT, DEFAULT_MAX_FILTERS_PER_ENDPOINT, MAX_FILTERS),
    ):
        raw: Any = node.try_get_context(context)
        try:
            values[context] = limit_from_config(context, raw, default, ceiling)
        except ValueError as error:
            raise InvalidConfiguration(
                f"CDK context {context}={raw!r} is not valid: {error}. Give a whole number from 1 to {ceiling:,}, "
                f"e.g. -c {context}={default}."
            ) from error
    return TenantLimits(
        max_endpoints_per_tenant=values[MAX_ENDPOINTS_PER_TENANT_CONTEXT],
        max_filters_per_endpoint=values[MAX_FILTERS_PER_ENDPOINT_CONTEXT],
    )


# --- The delivery log's write shards: how many partitions one tenant's (one endpoint's) log entries spread over ---

LOG_SHARDS_CONTEXT = "log_shards"


def log_shards(node: Node) -> int:
    """`log_shards` (1..256, default 4): the delivery log indexes' write shards (adapters/schema.py says the rule:
    shards >= the largest tenant's deliveries a second / 1,000, with headroom; `make capacity` gives it per
    workload). Only ever raise it: a lower count hides the entries of the shards dropped."""
    raw: Any = node.try_get_context(LOG_SHARDS_CONTEXT)
    try:
        return limit_from_config(LOG_SHARDS_CONTEXT, raw, DEFAULT_LOG_SHARDS, MAX_LOG_SHARDS)
    except ValueError as error:
        raise InvalidConfiguration(
            f"CDK context {LOG_SHARDS_CONTEXT}={raw!r} is not valid: {error}. Give a whole number from 1 to "
            f"{MAX_LOG_SHARDS}, at least the largest tenant's deliveries a second / 1,000 x 1.25, e.g. -c "
            f"{LOG_SHARDS_CONTEXT}=64 for a tenant sending 50,000 a second; never lower than it was."
        ) from error


# --- Logs and traces: what the bill shows per event (bench/cost.py prices each setting) ---

WORKFLOW_LOG_LEVEL_CONTEXT = "workflow_log_level"
XRAY_TRACING_CONTEXT = "xray_tracing"
# ERROR: one log record per failed or timed-out execution, not one per history event. At ALL (with execution
# data) every delivery that enters the retry workflow writes about 3 KB per state transition, 45 KB for one
# that dies after its attempts: the biggest single line of a bad night's log bill.
DEFAULT_WORKFLOW_LOG_LEVEL = "ERROR"
WORKFLOW_LOG_LEVELS = ("OFF", "FATAL", "ERROR", "ALL")
# "off": no X-Ray (no traces billed, the X-Ray SDK never imported). "sampled": Lambda Active tracing and the
# workflow's tracing, sampled by the account's X-Ray sampling rules (X-Ray's default rule records the first
# request each second and 5% of the rest; a rule of your own changes that, see bench/README.md).
DEFAULT_XRAY_TRACING = "off"
XRAY_TRACING_MODES = ("off", "sampled")


@dataclass(frozen=True)
class Telemetry:
    workflow_log_level: str  # one of WORKFLOW_LOG_LEVELS; execution data is logged only at ALL
    xray_tracing: bool

    @property
    def workflow_execution_data(self) -> bool:
        return self.workflow_log_level == "ALL"


DEFAULT_TELEMETRY = Telemetry(DEFAULT_WORKFLOW_LOG_LEVEL, xray_tracing=DEFAULT_XRAY_TRACING == "sampled")


def telemetry(node: Node) -> Telemetry:
    """`workflow_log_level` (OFF, FATAL, ERROR, ALL; default ERROR) and `xray_tracing` (off, sampled; default off)."""
    raw_level: Any = node.try_get_context(WORKFLOW_LOG_LEVEL_CONTEXT)
    level = DEFAULT_WORKFLOW_LOG_LEVEL if raw_level in (None, "") else str(raw_level).upper()
    if level not in WORKFLOW_LOG_LEVELS:
        raise InvalidConfiguration(
            f"CDK context {WORKFLOW_LOG_LEVEL_CONTEXT}={raw_level!r} is not one of {', '.join(WORKFLOW_LOG_LEVELS)}"
        )
    raw_tracing: Any = node.try_get_context(XRAY_TRACING_CONTEXT)
    tracing = DEFAULT_XRAY_TRACING if raw_tracing in (None, "") else str(raw_tracing).lower()
    if tracing not in XRAY_TRACING_MODES:
        raise InvalidConfiguration(
            f"CDK context {XRAY_TRACING_CONTEXT}={raw_tracing!r} is not one of {', '.join(XRAY_TRACING_MODES)}"
        )
    return Telemetry(workflow_log_level=level, xray_tracing=tracing == "sampled")


# --- The deployment itself: the stack's name and where its alarms go ---

STACK_NAME_CONTEXT = "stack_name"
ALARM_TOPIC_ARN_CONTEXT = "alarm_topic_arn"
DEFAULT_STACK_NAME = "Hookrelay"
# CloudFormation's rule for a stack name.
_STACK_NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,127}")
_TOPIC_ARN = re.compile(r"arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?")


def stack_name(node: Node) -> str:
    """`stack_name`: the CloudFormation stack (another name deploys a second stack beside the first)."""
    raw: Any = node.try_get_context(STACK_NAME_CONTEXT)
    if raw in (None, ""):
        return DEFAULT_STACK_NAME
    if not isinstance(raw, str) or not _STACK_NAME.fullmatch(raw):
        raise InvalidConfiguration(
            f"CDK context {STACK_NAME_CONTEXT}={raw!r} is not a CloudFormation stack name: a letter, then letters, "
            "digits and hyphens, at most 128 characters"
        )
    return raw


def alarm_topic_arn(node: Node) -> str | None:
    """`alarm_topic_arn`: an existing SNS topic (on-call's) the alarms notify instead of a topic of the stack's own."""
    raw: Any = node.try_get_context(ALARM_TOPIC_ARN_CONTEXT)
    if raw in (None, ""):
        return None
    if not isinstance(raw, str) or not _TOPIC_ARN.fullmatch(raw):
        raise InvalidConfiguration(f"CDK context {ALARM_TOPIC_ARN_CONTEXT}={raw!r} is not an SNS topic ARN")
    check_alarm_destination(topic_given=True, email=alarm_email(node))
    return raw


def check_alarm_destination(*, topic_given: bool, email: str | None) -> None:
    """An existing alarm topic and an alarm address exclude each other (the CDK context and the construct's props)."""
    if topic_given and email is not None:
        # The stack cannot subscribe an address to a topic it does not own: whoever owns it subscribes on-call.
        raise InvalidConfiguration(
            f"{ALARM_TOPIC_ARN_CONTEXT} (an existing alarm topic) and {ALARM_EMAIL_CONTEXT} are both set: give one "
            "(subscribe the address to your own topic)"
        )


# --- Names: what keeps two deployments in one account apart ---

# Explicit physical names (the workflow's log group, and with a prefix the API, the dashboard and the alarms)
# start with it: letters, digits and hyphens, short enough for every one of those names' limits.
_NAME_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,39}")


def check_name_prefix(prefix: str) -> str:
    """A name prefix (the construct's `name_prefix`; the stack's own is its name, `stack_name`)."""
    if not _NAME_PREFIX.fullmatch(prefix):
        raise InvalidConfiguration(
            f"name prefix {prefix!r} is not valid: a letter, then letters, digits and hyphens, at most 40 characters"
        )
    return prefix


# --- A custom domain for the API (and so for the portal links it hands out) ---

DOMAIN_NAME_CONTEXT = "domain_name"
CERTIFICATE_ARN_CONTEXT = "certificate_arn"
HOSTED_ZONE_ID_CONTEXT = "hosted_zone_id"
HOSTED_ZONE_NAME_CONTEXT = "hosted_zone_name"
_DOMAIN_NAME = re.compile(r"(?=.{4,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]")
_CERTIFICATE_ARN = re.compile(r"arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate/[0-9a-f-]{36}")
_HOSTED_ZONE_ID = re.compile(r"Z[A-Z0-9]{1,31}")


@dataclass(frozen=True)
class CustomDomain:
    """The API's own domain (stage file / context form): a certificate of ACM's, or a Route 53 zone the stack
    validates a new certificate in and adds the domain's alias record to (both: the certificate, and the record)."""

    domain_name: str
    certificate_arn: str | None
    hosted_zone_id: str | None
    hosted_zone_name: str | None


def check_domain_name(domain_name: str, *, has_certificate: bool, zone_name: str | None) -> str:
    """The one rule for a custom domain, from the stage file or the construct's props: a lower-case DNS name, a
    certificate or a hosted zone to make one in, and inside that zone. `zone_name`: None when no zone is given
    (or its name is not known until deploy)."""
    if not _DOMAIN_NAME.fullmatch(domain_name):
        raise InvalidConfiguration(
            f"{DOMAIN_NAME_CONTEXT}={domain_name!r} is not a domain name: lower-case labels of letters, digits and "
            "hyphens joined by dots, e.g. hooks.example.com"
        )
    if not has_certificate and zone_name is None:
        raise InvalidConfiguration(
            f"{DOMAIN_NAME_CONTEXT}={domain_name!r} needs a certificate ({CERTIFICATE_ARN_CONTEXT}: an ACM "
            f"certificate in the stack's region) or a Route 53 hosted zone ({HOSTED_ZONE_ID_CONTEXT} and "
            f"{HOSTED_ZONE_NAME_CONTEXT}) to create and DNS-validate one in"
        )
    zone = (zone_name or "").rstrip(".").lower()
    if zone and domain_name != zone and not domain_name.endswith(f".{zone}"):
        raise InvalidConfiguration(
            f"{DOMAIN_NAME_CONTEXT}={domain_name!r} is not in the hosted zone {zone!r}: the certificate is validated "
            "and the alias record made in that zone"
        )
    return domain_name


def custom_domain(node: Node) -> CustomDomain | None:
    """`domain_name` with `certificate_arn`, or `hosted_zone_id` and `hosted_zone_name` (or all three); unset or
    empty: the API is reached at its execute-api URL only."""
    raw = {
        name: node.try_get_context(name)
        for name in (DOMAIN_NAME_CONTEXT, CERTIFICATE_ARN_CONTEXT, HOSTED_ZONE_ID_CONTEXT, HOSTED_ZONE_NAME_CONTEXT)
    }
    given = {name: value for name, value in raw.items() if value not in (None, "")}
    for name, value in given.items():
        if not isinstance(value, str):
            raise InvalidConfiguration(f"CDK context {name}={value!r} is not a string")
    domain_name = given.get(DOMAIN_NAME_CONTEXT)
    if domain_name is None:
        if given:
            raise InvalidConfiguration(
                f"CDK context {', '.join(sorted(given))} set without {DOMAIN_NAME_CONTEXT}: give the domain name too, "
                "or none of them"
            )
        return None
    certificate_arn = given.get(CERTIFICATE_ARN_CONTEXT)
    if certificate_arn is not None and not _CERTIFICATE_ARN.fullmatch(certificate_arn):
        raise InvalidConfiguration(f"CDK context {CERTIFICATE_ARN_CONTEXT}={certificate_arn!r} is not an ACM ARN")
    zone_id, zone_name = given.get(HOSTED_ZONE_ID_CONTEXT), given.get(HOSTED_ZONE_NAME_CONTEXT)
    if (zone_id is None) != (zone_name is None):
        raise InvalidConfiguration(
            f"CDK context {HOSTED_ZONE_ID_CONTEXT} and {HOSTED_ZONE_NAME_CONTEXT} go together (no lookups: the "
            "zone is named by both)"
        )
    if zone_id is not None and not _HOSTED_ZONE_ID.fullmatch(zone_id):
        raise InvalidConfiguration(f"CDK context {HOSTED_ZONE_ID_CONTEXT}={zone_id!r} is not a Route 53 zone ID")
    check_domain_name(domain_name, has_certificate=certificate_arn is not None, zone_name=zone_name)
    return CustomDomain(domain_name, certificate_arn, zone_id, zone_name)


def setting_names() -> frozenset[str]:
    """Every deployment setting this module reads: the names a stage file (deploy/<stage>.json) may hold."""
    return frozenset(value for name, value in globals().items() if name.endswith("_CONTEXT") and isinstance(value, str))
