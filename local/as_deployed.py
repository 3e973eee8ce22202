"""Each function as the template deploys it, on moto: its own environment, and its own role's statements.

The integration tier and the local stack provision one set of resources (`local.provision`) and then run every
function with exactly what its entry in the table of functions gives it in AWS: the environment of
`hookrelay.function_environment` and the IAM statements of `hookrelay.function_permissions`, both resolved to
moto's names and ARNs (tests/infrastructure/test_as_deployed.py holds the synthesized template to the same two
modules). A function sees nothing of another function's environment (`local.function_scope` in the integration
tier's one process; in the local stack each function's worker processes are its own, `local.function_workers`), and
a call its statements do not allow fails as AWS fails it (`local.iam_check`).

What a local function has beyond its template's environment is named here and nowhere else: `LOCAL_ONLY`, set
by the local stack and the tests for every function alike (tests/infrastructure/test_as_deployed.py checks no
deployed function has any of them), and the variables Lambda's runtime sets itself (the function's name, the
region, credentials), which the local processes inherit.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from hookrelay import functions
from hookrelay.adapters import aws, schema
from hookrelay.domain.addresses import DEFAULT_ENDPOINT_PORTS, EndpointPorts
from hookrelay.domain.classification import ATTEMPT_TIMEOUT_SECONDS
from hookrelay.domain.lanes import DEFAULT_SLOW_LANE_AFTER_MS
from hookrelay.domain.limits import DEFAULT_LIMITS, TenantLimits
from hookrelay.domain.queues import DEFAULT_DELIVERY_SHARDS
from hookrelay.domain.schedule import schedule_from_config
from hookrelay.function_environment import Resources, Settings, environment
from hookrelay.function_permissions import Arns, Statement, statements
from hookrelay.services.auto_disable import policy_from_config
from local.provision import queue_urls

# Set for every local function alike, and never in AWS: endpoints on 127.0.0.1 (the demo consumer), unsigned and
# unchecked calls to moto (adapters/aws.py), and --fast mode's short "day" of the endpoint-health policy.
LOCAL_ONLY = (schema.ALLOW_PRIVATE_DESTINATIONS, aws.LOCAL_MOTO_CALLS, schema.ENDPOINT_HEALTH_DAY_SECONDS)
ACCOUNT = "123456789012"  # moto's default account
# The API's URL where no server listens (the integration tier calls the gateway in its process, and the template's
# checks need one): a name that resolves nowhere (RFC 6761's .test), so a link minted there is never followed.
TEST_API_URL = "https://api.hookrelay.test"


def function_name(function: str) -> str:
    """The local stand-in for a deployed function's name."""
    return f"hookrelay-{function}"


def local_settings(
    retry_schedule: str = "default",
    *,
    attempt_timeout_seconds: int = ATTEMPT_TIMEOUT_SECONDS,
    api_key_rate_per_second: int | None = None,
    enforce_event_catalogue: bool = False,
    endpoint_ports: EndpointPorts = DEFAULT_ENDPOINT_PORTS,
    limits: TenantLimits = DEFAULT_LIMITS,
    slow_lane_after_ms: int = DEFAULT_SLOW_LANE_AFTER_MS,
    log_shards: int = schema.DEFAULT_LOG_SHARDS,
) -> Settings:
    """The local settings, as a stage's. The per-key rate limit is off unless asked for (the integration tier sends
    from one key as fast as the machine goes); the local stack asks for the deployed default (`--api-key-rate`)."""
    return Settings(
        retry_schedule=json.dumps(schedule_from_config(retry_schedule).to_config()),
        attempt_timeout_seconds=attempt_timeout_seconds,
        auto_disable_after_days=f"{policy_from_config(None).disable_after_days:g}",
        api_key_rate_per_second=api_key_rate_per_second,
        enforce_event_catalogue=enforce_event_catalogue,
        endpoint_ports=endpoint_ports,
        max_endpoints_per_tenant=limits.max_endpoints_per_tenant,
        max_filters_per_endpoint=limits.max_filters_per_endpoint,
        slow_lane_after_ms=slow_lane_after_ms,
        log_shards=log_shards,
    )


@dataclass(frozen=True)
class LocalDeployment:
    """Every function's environment and statements, resolved to the local resources."""

    environments: Mapping[str, Mapping[str, str]]
    policies: Mapping[str, tuple[Statement, ...]]
    names: frozenset[str] = field(default_factory=frozenset)  # every variable some function is deployed with

    def view(self, function: str, outer: Mapping[str, str]) -> dict[str, str]:
        """What `function` sees: `outer` (the process's own: PATH, the region, credentials, `LOCAL_ONLY`) with
        every function's variables taken out, then its own put in, as Lambda's runtime would."""
        base = {name: value for name, value in outer.items() if name not in self.names}
        return {**base, **self.environments[function], schema.FUNCTION_NAME: function_name(function)}

    def without(self, function: str, action: str) -> LocalDeployment:
        """The same deployment with `action` taken out of `function`'s statements (a grant removed)."""
        kept = tuple(
            Statement(tuple(a for a in s.actions if a != action), s.resources) for s in self.policies[function]
        )
        return replace(self, policies={**self.policies, function: tuple(s for s in kept if s.actions)})

    def every_variable(self) -> dict[str, str]:
        """All functions' variables at once: what the tests read resources' names from (never a function)."""
        return {name: value for env in self.environments.values() for name, value in env.items()}


def resources(env: Mapping[str, str]) -> Resources:
    """The resources `local.provision` made, from the environment it returned."""
    return Resources(
        table_names={spec: env[spec.env_var] for spec in schema.ALL_TABLES},
        queue_urls=queue_urls(env),
        topic_arns={spec: env[spec.env_var] for spec in schema.ALL_TOPICS},
        retry_state_machine_arn=env[schema.RETRY_STATE_MACHINE_ARN],
        api_url=env[schema.API_URL],
    )


def arns(env: Mapping[str, str], region: str | None = None) -> Arns:
    """moto's ARNs of the resources `local.provision` made."""
    region = region or os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
    state_machine = env[schema.RETRY_STATE_MACHINE_ARN]
    return Arns(
        tables={spec: f"arn:aws:dynamodb:{region}:{ACCOUNT}:table/{env[spec.env_var]}" for spec in schema.ALL_TABLES},
        queues={spec: queue_arn(url, region) for spec, url in queue_urls(env).items()},
        topics={spec: env[spec.env_var] for spec in schema.ALL_TOPICS},
        topic_key=f"arn:aws:kms:{region}:{ACCOUNT}:key/local-notices",
        retry_state_machine=state_machine,
        retry_executions=state_machine.replace(":stateMachine:", ":execution:") + ":*",
        log_groups={
            f.name: f"arn:aws:logs:{region}:{ACCOUNT}:log-group:/aws/lambda/{function_name(f.name)}"
            for f in functions.FUNCTIONS
        },
    )


def queue_arn(url: str, region: str) -> str:
    """A queue's ARN from its URL (`…/<account>/<name>`), as SQS makes it."""
    account, name = url.rstrip("/").split("/")[-2:]
    return f"arn:aws:sqs:{region}:{account}:{name}"


def local_deployment(env: Mapping[str, str], settings: Settings) -> LocalDeployment:
    """Every function as deployed with `settings`, on the resources of `env` (`local.provision`'s)."""
    found, granted = resources(env), arns(env)
    environments = {f.name: environment(f, found, settings) for f in functions.FUNCTIONS}
    return LocalDeployment(
        environments=environments,
        policies={f.name: tuple(statements(f, granted)) for f in functions.FUNCTIONS},
        names=frozenset(name for each in environments.values() for name in each),
    )


def placeholder_environment(shards: int = DEFAULT_DELIVERY_SHARDS) -> dict[str, str]:
    """Resources' variables with made-up names: for reading the statements' actions without provisioning."""
    env = {spec.env_var: f"hookrelay-{spec.logical_name}" for spec in schema.ALL_TABLES}
    urls = {spec: f"http://localhost/{ACCOUNT}/hookrelay-{spec.logical_name}" for spec in schema.all_queues(shards)}
    env |= {spec.env_var: url for spec, url in urls.items() if not schema.is_delivery_queue(spec)}
    env[schema.DELIVERY_QUEUE.env_var] = schema.encode_delivery_queues(urls)
    env |= {
        spec.env_var: f"arn:aws:sns:us-east-1:{ACCOUNT}:hookrelay-{spec.logical_name}" for spec in schema.ALL_TOPICS
    }
    env[schema.RETRY_STATE_MACHINE_ARN] = f"arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:hookrelay-retry"
    env[schema.API_URL] = TEST_API_URL
    return env
