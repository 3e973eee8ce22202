"""Each function's environment, as deployed: one definition for the CDK stack, the local stack and the tests.

A function's environment is what its entry in the table of functions (`hookrelay.functions`) implies: the names of
exactly the resources its `Access` lets it touch, and the deployment settings it reads. The CDK stack
(`stacks/constructs/functions.py`) calls `environment` with CloudFormation tokens for the resources; the local
stack and the integration tier (`local/function_scope.py`) call it with moto's names, and run each function with
that environment and nothing of another function's. tests/infrastructure/test_as_deployed.py holds the synthesized
template to this module, variable by variable.

Plain Python (no aws_cdk): the local stack and the functions import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hookrelay.adapters import schema
from hookrelay.adapters.telemetry import METRICS_NAMESPACE
from hookrelay.domain.addresses import DEFAULT_ENDPOINT_PORTS, EndpointPorts
from hookrelay.domain.lanes import DEFAULT_SLOW_LANE_AFTER_MS
from hookrelay.domain.limits import DEFAULT_MAX_ENDPOINTS_PER_TENANT, DEFAULT_MAX_FILTERS_PER_ENDPOINT
from hookrelay.functions import API, DELIVERY, INTERPRETER_ENVIRONMENT, ROUTES, Function

# The functions that serve the API's routes.
SERVING_ROUTES = frozenset(function.name for function in ROUTES.values())
# The route that mints portal links (which carry the API's URL).
OPENS_PORTAL_SESSIONS = "POST /v1/portal-sessions"
# The functions that hold endpoint URLs to the destination rule: the API registers and changes them, the delivery
# function checks them again on every attempt, probes included.
CHECKING_ENDPOINT_URLS = frozenset({API.name, DELIVERY.name})
# The level of the functions' own log lines (Lambda's application log level, and Powertools').
LOG_LEVEL = "INFO"


@dataclass(frozen=True)
class Resources:
    """Where the resources are, as a function reads them: table names, queue URLs, topic and state machine ARNs.

    CloudFormation tokens in the stack, moto's names in the local stack."""

    table_names: Mapping[schema.TableSpec, str]
    queue_urls: Mapping[schema.QueueSpec, str]  # every queue's, each shard's delivery queues included
    topic_arns: Mapping[schema.TopicSpec, str]
    retry_state_machine_arn: str
    api_url: str  # the API's base URL, no trailing slash (the HTTP API's endpoint; the local gateway's address)


@dataclass(frozen=True)
class Settings:
    """The deployment settings the functions read (stacks/config.py validates them from CDK context)."""

    retry_schedule: str  # JSON of the schedule's config, or a profile's name
    attempt_timeout_seconds: int
    auto_disable_after_days: str
    api_key_rate_per_second: int | None  # None: no per-key limit
    enforce_event_catalogue: bool
    xray_tracing: bool = False
    endpoint_ports: EndpointPorts = DEFAULT_ENDPOINT_PORTS
    max_endpoints_per_tenant: int = DEFAULT_MAX_ENDPOINTS_PER_TENANT  # per-tenant limits (domain/limits.py)
    max_filters_per_endpoint: int = DEFAULT_MAX_FILTERS_PER_ENDPOINT
    slow_lane_after_ms: int = DEFAULT_SLOW_LANE_AFTER_MS  # the delivery lanes' threshold (domain/lanes.py)
    log_shards: int = schema.DEFAULT_LOG_SHARDS  # the delivery log's write shards (adapters/schema.py)


def environment(function: Function, resources: Resources, settings: Settings) -> dict[str, str]:
    """Every variable `function` is deployed with, and no other."""
    return {
        **INTERPRETER_ENVIRONMENT,
        **_powertools(function, settings),
        **_settings(function, settings),
        **resource_environment(function, resources),
    }


def resource_environment(function: Function, resources: Resources) -> dict[str, str]:
    """The names of exactly the resources the function may touch."""
    access = function.access
    env = {spec.env_var: resources.table_names[spec] for spec in access.tables}
    for queue in (*access.sends_to, *access.drains):
        # Every delivery queue's URL in one variable (a message goes to its endpoint's shard's lane).
        is_delivery = schema.is_delivery_queue(queue)
        url = schema.encode_delivery_queues(resources.queue_urls) if is_delivery else resources.queue_urls[queue]
        env[queue.env_var] = url
    if access.starts_retries or access.answers_retries:
        env[schema.RETRY_STATE_MACHINE_ARN] = resources.retry_state_machine_arn
    for topic in access.publishes:
        env[topic.env_var] = resources.topic_arns[topic]
    if OPENS_PORTAL_SESSIONS in _routes(function):  # its links point at the API as deployed, not as a caller says
        env[schema.API_URL] = resources.api_url
    return env


def _routes(function: Function) -> frozenset[str]:
    return frozenset(route.route_key for route, serving in ROUTES.items() if serving.name == function.name)


def _powertools(function: Function, settings: Settings) -> dict[str, str]:
    return {
        "POWERTOOLS_SERVICE_NAME": function.name,
        "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
        "POWERTOOLS_LOG_LEVEL": LOG_LEVEL,
        # Read by handlers/tracing.py at import: "true" means no Tracer and no X-Ray SDK at all.
        schema.TRACE_SWITCH: "false" if settings.xray_tracing else "true",
    }


def _settings(function: Function, settings: Settings) -> dict[str, str]:
    env = {
        schema.RETRY_SCHEDULE: settings.retry_schedule,
        schema.ATTEMPT_TIMEOUT_SECONDS: str(settings.attempt_timeout_seconds),
        schema.AUTO_DISABLE_AFTER_DAYS: settings.auto_disable_after_days,
    }
    # Counted by the functions that serve the API's routes (handlers/http.py), which see every request.
    if settings.api_key_rate_per_second is not None and function.name in SERVING_ROUTES:
        env[schema.API_KEY_RATE_PER_SECOND] = str(settings.api_key_rate_per_second)
    if function.name == API.name:  # only the API function registers and changes endpoints' filters
        env[schema.ENFORCE_EVENT_CATALOGUE] = "true" if settings.enforce_event_catalogue else "false"
        # ... and counts a tenant's endpoints against its limit.
        env[schema.MAX_ENDPOINTS_PER_TENANT] = str(settings.max_endpoints_per_tenant)
        env[schema.MAX_FILTERS_PER_ENDPOINT] = str(settings.max_filters_per_endpoint)
    if function.name in CHECKING_ENDPOINT_URLS:
        env[schema.ENDPOINT_PORTS] = settings.endpoint_ports.value
    if function.name == DELIVERY.name:  # the only one that makes attempts, and so moves endpoints between lanes
        env[schema.SLOW_LANE_AFTER_MS] = str(settings.slow_lane_after_ms)
    # Every function that may write or read the delivery log: one that wrote with another count than the readers
    # read with would put entries where no read looks.
    if schema.DELIVERIES in function.access.tables:
        env[schema.DELIVERY_LOG_SHARDS] = str(settings.log_shards)
    return env
