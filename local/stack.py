"""`python -m local`: the whole system on 127.0.0.1, no AWS account, no Docker.

moto's servers stand in for AWS, each in its own process (`local.aws_endpoint`: DynamoDB in one, the other
services in the other; tables, queues and the retry state machine, created
from the same definitions the CDK stack uses, the ASL run by moto's interpreter); the API is served on
localhost through `local.gateway`, which calls the real authorizer and handlers; SQS event sources feed the
real delivery and redrive functions. This process serves the API and polls the queues; every invocation
runs in a worker process of its function (`local.function_workers`), so the work spreads over the cores.
State lives as long as the process; every process it started stops with it (`local.processes`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import signal
import sys
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any, TextIO

from hookrelay import functions, wiring
from hookrelay.adapters import aws as aws_clients
from hookrelay.adapters import schema
from hookrelay.adapters.telemetry import METRICS_NAMESPACE
from hookrelay.domain import portal
from hookrelay.domain.limits import limit_from_config
from hookrelay.domain.rate_limit import DEFAULT_PER_KEY_PER_SECOND
from hookrelay.domain.schedule import PROFILES
from hookrelay.services.auto_disable import WARNINGS
from local import gateway, lambda_runtime, trust
from local.as_deployed import LocalDeployment, local_deployment, local_settings
from local.aws_endpoint import AwsEndpoints, start_aws_endpoints, use_utc
from local.function_workers import FunctionWorkers
from local.http_api import ApiServer
from local.processes import keep_what_is_loaded, name_this_process, wait_for_signal
from local.provision import delivery_queue_urls, provision, queue_urls
from local.schedule import ScheduledFunction
from local.sqs_source import EventSource, stop_all
from scripts.create_admin_key import create_admin_key

log = logging.getLogger("hookrelay.local")

DEFAULT_PORT = 8080
# Delivery invocations at once, by default. Lambda runs a FIFO queue's message groups side by side (the
# delivery function sets no maximum), and an attempt at a hanging endpoint holds its invocation for the whole
# attempt timeout: enough slots that a hanging endpoint's groups leave room for everyone else's.
DEFAULT_DELIVERY_CONCURRENCY = 32
# What API Gateway's functions (authorizer and routes) may run at once here; Lambda's limit is the account's.
API_CONCURRENCY = 16
# How long a stop waits for invocations still running (a sweep of a long backlog, an attempt at a hanging
# endpoint) before the workers are ended, as Lambda ends an environment: the whole stop stays within seconds.
STOP_GRACE_SECONDS = 2.0


# The table of functions' schedules (`hookrelay.functions`), sooner here: a minute, and in --fast mode a few
# seconds, with the endpoint-health policy's "day" shortened to FAST_HEALTH_DAY_SECONDS (the same shape in
# seconds instead of days), so an endpoint can be watched being warned and disabled.
SWEEP_EVERY_SECONDS = 60
FAST_SWEEP_EVERY_SECONDS = 2
FAST_HEALTH_DAY_SECONDS = 30  # warned at 30 s and 90 s, disabled at 150 s: a walkthrough fits before it


@dataclass(frozen=True)
class Keys:
    admin_key: str
    producer_key: str
    tenant_id: str
    tenant_key: str


def _log_shards(raw: str) -> int:
    """--log-shards, checked as synth checks the CDK context (the same rule)."""
    try:
        return limit_from_config("log_shards", raw, schema.DEFAULT_LOG_SHARDS, schema.MAX_LOG_SHARDS)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m local", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="serve the API on this port (0: any free port)")
    parser.add_argument(
        "--fast",
        action="store_true",
        help="the fast retry schedule: seconds instead of minutes and hours, the same shape (watch retries happen)",
    )
    parser.add_argument(
        "--block-private",
        action="store_true",
        help="the deployed destination guard: endpoints must be https:// on public addresses and allowed ports"
        " (the demo consumer on 127.0.0.1 is then refused)",
    )
    parser.add_argument(
        "--api-key-rate",
        type=int,
        default=DEFAULT_PER_KEY_PER_SECOND,
        metavar="N",
        help=f"each API key's requests a second, as deployed (default {DEFAULT_PER_KEY_PER_SECOND}, the deployed"
        " default; 0: no per-key limit, for load tests from one key)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="once ready, print one line of JSON (api_url, admin_key, producer_key, tenant_id, tenant_key,"
        " aws_endpoint_url, dynamodb_endpoint_url, portal_url, delivery_role_arn), and nothing else, on stdout",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_DELIVERY_CONCURRENCY,
        help="delivery function invocations at once, per delivery queue (each its own event source, as deployed;"
        f" default {DEFAULT_DELIVERY_CONCURRENCY})",
    )
    parser.add_argument(
        "--authorizer-cache-seconds",
        type=float,
        default=functions.authorizer_cache_seconds(),
        help="keep the authorizer's answer per Authorization header this long, as API Gateway does (default"
        f" {functions.authorizer_cache_seconds()}, as deployed; 0: check every request, revocations at once)",
    )
    parser.add_argument(
        "--log-shards",
        type=_log_shards,
        default=schema.DEFAULT_LOG_SHARDS,
        metavar="N",
        help=f"the delivery log's write shards, as the CDK context log_shards (default {schema.DEFAULT_LOG_SHARDS},"
        f" at most {schema.MAX_LOG_SHARDS}): every log read queries each",
    )
    parser.add_argument(
        "--log-level",
        default=os.environ.get("POWERTOOLS_LOG_LEVEL", "INFO"),
        help="log level of the Lambda functions and the local stack, logged to stderr (default INFO)",
    )
    return parser.parse_args(argv)


def configure_process(log_level: str) -> TextIO:
    """Set up the process the way a Lambda environment is; returns the stream for this command's own output.

    The functions log to stdout, as in Lambda; here stdout is kept for what this command prints (in
    `--json` mode, exactly one line), so everything else, their logs included, goes to stderr: file
    descriptor 1 itself is pointed at stderr, so every process started from here inherits that too.
    """
    use_utc()
    sys.stdout.flush()
    console = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    for name, value in functions.INTERPRETER_ENVIRONMENT.items():  # as every deployed function's environment sets them
        os.environ.setdefault(name, value)
    os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "hookrelay-local")
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", METRICS_NAMESPACE)
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ["POWERTOOLS_LOG_LEVEL"] = log_level.upper()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("hookrelay").setLevel(log_level.upper())
    return console


def call_api(method: str, path: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
    response = gateway.handle(
        method,
        path,
        "",
        {"authorization": f"Bearer {token}", "content-type": "application/json"},
        json.dumps(body).encode(),
    )
    if response.status >= 300:
        raise RuntimeError(f"{method} {path} answered {response.status}: {response.body.decode(errors='replace')}")
    return response.json()


def issue_keys(api_keys_table: str) -> Keys:
    """The first admin key the documented way, then a tenant and a producer key through the API itself."""
    admin = create_admin_key(api_keys_table, "local stack admin").token
    tenant = call_api("POST", "/v1/tenants", admin, {"name": "local tenant"})
    producer = call_api("POST", "/v1/api-keys", admin, {"role": "producer", "description": "local stack producer"})
    return Keys(admin, producer["token"], tenant["tenant_id"], tenant["api_key"]["token"])


def open_portal(api_url: str, tenant_key: str) -> str:
    """The demo tenant's consumer portal link, opened the documented way (POST /v1/portal-sessions), for as long
    as a session may last and with every capability, so that each of the page's buttons can be tried (a link a
    tenant forwards has view and recover by default); the API builds it against the address it listens on."""
    lifetime = int(portal.MAX_LIFETIME.total_seconds())
    body = {"ttl_seconds": lifetime, "capabilities": [c.value for c in portal.Capability]}
    link: str = call_api("POST", "/v1/portal-sessions", tenant_key, body)["portal_url"]
    assert link.startswith(api_url), (link, api_url)
    return link


@dataclass
class LocalStack:
    aws: AwsEndpoints
    api: ApiServer
    triggers: list[EventSource]
    keys: Keys
    schedule_name: str
    timers: list[ScheduledFunction]
    workers: FunctionWorkers
    portal_url: str

    def ready_document(self) -> dict[str, str]:
        # What a script needs to drive the API, plus where moto listens, to look inside "AWS".
        return {
            "api_url": self.api.url,
            **asdict(self.keys),
            "aws_endpoint_url": self.aws.url,
            "dynamodb_endpoint_url": self.aws.dynamodb.url,
            "portal_url": self.portal_url,
            # What a role for an AWS destination trusts here, as the stack's DeliveryRoleArn output in AWS.
            "delivery_role_arn": trust.caller_role(functions.DELIVERY.name),
        }

    def stop(self) -> None:
        # Outside in: no new requests, then no new invocations, then AWS itself.
        self.api.stop()
        for timer in self.timers:
            timer.stop(grace_seconds=STOP_GRACE_SECONDS)
        stop_all(self.triggers, grace_seconds=STOP_GRACE_SECONDS)
        self.workers.stop()
        self.aws.stop()


def concurrency_limits(concurrency: int) -> dict[str, int]:
    """Each function's invocations at once: its event source's maximum from the table of functions, else
    `concurrency` for a queue's function; one at a time for a schedule's; API_CONCURRENCY for the API's."""
    limits = {function.name: API_CONCURRENCY for function in functions.FUNCTIONS}
    for function, trigger in functions.queue_triggered():
        limits[function.name] = trigger.max_concurrency or concurrency
    for function, _ in functions.scheduled():
        limits[function.name] = 1
    return limits


def event_sources(env: dict[str, str], concurrency: int) -> list[EventSource]:
    """The table of functions' SQS event sources (each delivery queue's, at its lane's batch size); `concurrency`
    bounds those the table leaves unbounded."""
    sqs = aws_clients.client("sqs")
    limits = concurrency_limits(concurrency)
    urls = queue_urls(env)
    return [
        EventSource(
            sqs,
            urls[source.queue],
            function=source.function.name,
            batch_size=source.batch_size,
            concurrency=limits[source.function.name],
        )
        for source in functions.event_sources(delivery_queue_urls(env).shards)
    ]


def scheduled_functions(*, fast: bool) -> list[ScheduledFunction]:
    """The table of functions' schedules, run sooner here (SWEEP_EVERY_SECONDS). The reconciler reads from its
    checkpoint, so however often it runs here it reads each delivery once, as deployed (services/reconcile.py)."""
    every = FAST_SWEEP_EVERY_SECONDS if fast else SWEEP_EVERY_SECONDS
    return [ScheduledFunction(function.name, every) for function, _ in functions.scheduled()]


def local_only_environment(*, fast: bool, block_private: bool) -> dict[str, str]:
    """`as_deployed.LOCAL_ONLY`'s values: endpoints on 127.0.0.1 (the demo consumer) receive webhooks, unless
    --block-private asks for the deployed guard (spelt out as "false", what an unset variable means, so that a
    value in the caller's shell cannot turn it back on); unsigned and unchecked calls to moto (adapters/aws.py);
    --fast's short endpoint-health day."""
    env = {
        schema.ALLOW_PRIVATE_DESTINATIONS: "false" if block_private else "true",
        aws_clients.LOCAL_MOTO_CALLS: "true",
    }
    if fast:
        env[schema.ENDPOINT_HEALTH_DAY_SECONDS] = str(FAST_HEALTH_DAY_SECONDS)
    return env


def provision_environment(
    schedule_name: str,
    api_url: str,
    *,
    fast: bool,
    block_private: bool = False,
    api_key_rate: int | None = DEFAULT_PER_KEY_PER_SECOND,
    log_shards: int = schema.DEFAULT_LOG_SHARDS,
) -> tuple[dict[str, str], LocalDeployment]:
    """Create every resource on moto; each function's environment and statements as deployed on them
    (local/as_deployed.py: its worker processes get exactly that environment, and their calls are checked against
    those statements); and this process's own environment: every resource's variable (for the stack itself, which
    polls the queues and keys the demo), and `LOCAL_ONLY`'s, which every worker keeps."""
    resources = {**provision(retry_schedule=schedule_name), schema.API_URL: api_url}
    settings = local_settings(schedule_name, api_key_rate_per_second=api_key_rate, log_shards=log_shards)
    deployment = local_deployment(resources, settings)
    env = {**deployment.every_variable(), **local_only_environment(fast=fast, block_private=block_private)}
    os.environ.update(env)
    wiring.reset()  # clients are made from now on, against moto
    return env, deployment


def start(
    port: int,
    *,
    fast: bool,
    concurrency: int,
    log_level: str = "INFO",
    authorizer_cache_seconds: float = functions.authorizer_cache_seconds(),
    block_private: bool = False,
    api_key_rate: int | None = DEFAULT_PER_KEY_PER_SECOND,
    log_shards: int = schema.DEFAULT_LOG_SHARDS,
) -> LocalStack:
    schedule_name = "fast" if fast else "default"
    aws = start_aws_endpoints()
    workers: FunctionWorkers | None = None
    api: ApiServer | None = None
    try:
        # Bound first (serving starts last): its address is the API's URL the functions are deployed with.
        api = ApiServer(port, gateway.AuthorizerCache(authorizer_cache_seconds))  # 0 s: keeps nothing
        env, deployment = provision_environment(
            schedule_name,
            api.url,
            fast=fast,
            block_private=block_private,
            api_key_rate=api_key_rate,
            log_shards=log_shards,
        )
        # The delivery function keeps a spare worker ready: its event sources run invocations side by side, and one
        # held by a hanging endpoint must not make the next healthy batch wait for a fork (bench/isolation.py).
        workers = FunctionWorkers(
            concurrency_limits(concurrency), log_level.upper(), deployment, spares=[functions.DELIVERY.name]
        )
        lambda_runtime.use_workers(workers)
        workers.warm_up([function.name for function in functions.FUNCTIONS])
        keys = issue_keys(env[schema.API_KEYS.env_var])
        portal_url = open_portal(api.url, keys.tenant_key)
        triggers = event_sources(env, concurrency)
    except BaseException:
        if workers is not None:
            workers.stop()
        if api is not None:
            api.httpd.server_close()  # bound, never served: nothing to shut down
        aws.stop()
        raise
    timers = scheduled_functions(fast=fast)
    for trigger in triggers:
        trigger.start()
    for timer in timers:
        timer.start()
    api.start()
    return LocalStack(aws, api, triggers, keys, schedule_name, timers, workers, portal_url)


def describe(stack: LocalStack) -> str:
    schedule = PROFILES[stack.schedule_name]
    keys = stack.keys
    exports = {
        "HOOKRELAY_API": stack.api.url,
        "HOOKRELAY_URL": stack.api.url,  # the CLI's variable (make cli)
        "ADMIN_KEY": keys.admin_key,
        "PRODUCER_KEY": keys.producer_key,
        "TENANT_ID": keys.tenant_id,
        "TENANT_KEY": keys.tenant_key,
    }
    first_event = json.dumps({"tenant_id": keys.tenant_id, "type": "order.created", "data": {"order_id": 1}})
    return "\n".join(
        [
            "hookrelay is running on 127.0.0.1 (no AWS account: moto's servers stand in for AWS)",
            "",
            f"  API            {stack.api.url}",
            f"  AWS endpoints  {stack.aws.url}, DynamoDB {stack.aws.dynamodb.url}   (moto's servers; to look inside:",
            "                 export " + " ".join(f"{k}={v}" for k, v in stack.aws.environment().items()) + ")",
            f"  retry schedule {schedule.name}: gaps {', '.join(map(str, schedule.gaps))} s"
            + (f", then every {schedule.repeat_every} s" if schedule.repeat_every else "")
            + f", horizon {schedule.horizon} s",
            f"  endpoint health {_health_policy()}",
            f"  destinations   {_destinations()}",
            f"  admin key      {keys.admin_key}",
            f"  producer key   {keys.producer_key}",
            f"  tenant         {keys.tenant_id}",
            f"  tenant key     {keys.tenant_key}",
            "",
            "The demo tenant's consumer portal (open it in a browser; the link works for an hour, and",
            "POST /v1/portal-sessions with the tenant key, or `make cli ARGS='portal open'`, makes another):",
            "",
            f"  {stack.portal_url}",
            "",
            "Keys are shown once. In another terminal, set them as variables:",
            "",
            "  export " + " ".join(f"{name}={shlex.quote(value)}" for name, value in exports.items()),
            "",
            "then send a first event (it is accepted; it reaches nobody until the tenant has an endpoint):",
            "",
            '  curl -sS -X POST "$HOOKRELAY_API/v1/events" -H "authorization: Bearer $PRODUCER_KEY" \\',
            f"    -H 'content-type: application/json' -d {shlex.quote(first_event)}",
            "",
            "State lives as long as this process. Stop with Ctrl-C.",
            "",
        ]
    )


def _destinations() -> str:
    """Where endpoints may point: local mode's 127.0.0.1, or the deployed guard (--block-private)."""
    ports = wiring.endpoint_ports().described
    if wiring.allow_private_destinations():
        return f"any host, http:// too, on ports {ports} (127.0.0.1 on any port); --block-private: as deployed"
    return f"public https:// hosts on ports {ports}, as deployed (--block-private: 127.0.0.1 is refused)"


def _health_policy() -> str:
    """When an endpoint failing throughout is warned and disabled (notices go to the SNS topic, and are logged)."""
    policy = wiring.auto_disable_policy()  # from the environment: --fast shortens its day
    if policy.day == timedelta(days=1):
        warned = " and ".join(f"{days:g}" for days, _ in WARNINGS)
        return f"failing endpoints warned at {warned} days, disabled at {policy.disable_after_days:g} days"
    warned = " and ".join(f"{(policy.day * days).total_seconds():g} s" for days, _ in WARNINGS)
    return f"failing endpoints warned at {warned}, disabled at {policy.disable_after.total_seconds():g} s"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    name_this_process("hookrelay-local")  # its moto servers and function workers are named too
    console = configure_process(args.log_level)
    try:
        stack = start(
            args.port,
            fast=args.fast,
            concurrency=args.concurrency,
            log_level=args.log_level,
            authorizer_cache_seconds=args.authorizer_cache_seconds,
            block_private=args.block_private,
            api_key_rate=args.api_key_rate or None,  # 0: none
            log_shards=args.log_shards,
        )
    except OSError as error:  # most likely the port is taken
        print(
            f"could not start the local stack: {error} (--port N picks another port, 0 any free one)", file=sys.stderr
        )
        return 1
    keep_what_is_loaded()
    if args.json:
        console.write(json.dumps(stack.ready_document()) + "\n")
    else:
        console.write(describe(stack))
    console.flush()
    number = wait_for_signal(signal.SIGINT, signal.SIGTERM)
    log.info("%s: stopping", signal.Signals(number).name)
    stack.stop()
    return 0
