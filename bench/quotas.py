"""The quotas one deployment runs into, in one place: AWS's defaults (each with its source) and the limits the
stack sets itself (each read from the code or the CDK context that sets it, never copied).

AWS's figures are the published defaults for us-east-1 as read on QUOTAS_READ; most are adjustable per account
(`adjustable`), and an account's own values are in the Service Quotas console. Where the published table gives
a token bucket, `limit` is the refill rate (the sustained rate) and `burst` the bucket size.

Used by `bench/capacity.py` (the model, which prints them) and `bench/simulation.py` (token buckets).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.common import stack_constant
from hookrelay import functions
from hookrelay.functions import AUTHORIZER, INGEST

ROOT = Path(__file__).resolve().parents[1]
QUOTAS_READ = "2026-12-01"
REGION = "us-east-1"


@dataclass(frozen=True)
class Quota:
    key: str
    service: str
    what: str
    limit: float  # per second for rates; a count for concurrency and open executions
    unit: str
    source: str  # where the figure comes from: a documentation page, or this repository's file
    adjustable: str  # how to raise it
    burst: float | None = None  # a token bucket's size, where the quota is one


# The stage the capacity model sizes: a production deployment's settings, as its stage file commits them (the
# default stage, deploy/dev.json, is sized to deploy on a new account's concurrency quota instead).
CAPACITY_STAGE = "production"


def stage_context() -> dict[str, object]:
    """The capacity stage's settings, as its stage file commits them."""
    return _context()


def _context() -> dict[str, object]:
    from stacks.stage import load

    return dict(load(CAPACITY_STAGE))


def _stage_throttle() -> tuple[float, float]:
    """The HTTP API stage's throttle (rate, burst), as the API construct sets it."""
    rate = stack_constant(r"ThrottleSettings\(rate_limit=(\d+), burst_limit=\d+\)")
    burst = stack_constant(r"ThrottleSettings\(rate_limit=\d+, burst_limit=(\d+)\)")
    return float(rate), float(burst)


def authorizer_cache_seconds() -> float:
    """How long API Gateway caches the authorizer's answer for a key, as the API construct sets it."""
    return max(1.0, float(functions.authorizer_cache_seconds()))


def _max_in_flight() -> float:
    """The largest max_in_flight the API accepts (the bound on the request model's field)."""
    import typing

    from hookrelay.handlers.schemas import MaxInFlight

    (bound,) = [m.le for m in typing.get_args(MaxInFlight)[1].metadata if hasattr(m, "le")]
    return float(bound)


def aws_quotas() -> list[Quota]:
    lambda_scaling = "https://docs.aws.amazon.com/lambda/latest/dg/scaling-behavior.html"
    sfn = "https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html"
    sqs = "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html"
    ddb = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html"
    return [
        Quota(
            "apigw_account_rps",
            "API Gateway",
            "requests per second, per account and region (all APIs)",
            10_000,
            "requests/s",
            "https://docs.aws.amazon.com/apigateway/latest/developerguide/limits.html",
            "quota increase (Service Quotas: API Gateway throttle rate)",
            burst=5_000,
        ),
        Quota(
            "lambda_concurrency",
            "Lambda",
            "concurrent executions, per account and region (all functions)",
            1_000,
            "executions",
            "https://docs.aws.amazon.com/lambda/latest/dg/lambda-concurrency.html",
            "quota increase (tens of thousands are granted)",
        ),
        Quota(
            "lambda_scaling",
            "Lambda",
            "new execution environments per function (1,000 every 10 s)",
            100,
            "environments/s",
            lambda_scaling,
            "not adjustable: ramp traffic, or provisioned concurrency",
        ),
        Quota(
            "sqs_fifo_ht_tps",
            "SQS",
            "FIFO high-throughput queue: API calls per second per action (SendMessage[Batch], ReceiveMessage,"
            " DeleteMessage[Batch]) in us-east-1",
            70_000,
            "calls/s per action",
            sqs,
            "quota increase; batches of 10 carry 10x the messages",
        ),
        Quota(
            "sqs_fifo_tps",
            "SQS",
            "FIFO queue without high throughput: API calls per second per action",
            300,
            "calls/s per action",
            sqs,
            "turn on high throughput (QueueSpec.high_throughput: the delivery queue has it)",
        ),
        Quota(
            "sqs_fifo_group_tps",
            "SQS",
            "FIFO high-throughput queue: calls per second per partition (one message group is on one partition)",
            300,
            "calls/s per partition",
            sqs,
            "more message groups (an endpoint's max_in_flight)",
        ),
        Quota(
            "dynamodb_table_wru",
            "DynamoDB",
            "on-demand table throughput: write request units per second per table",
            40_000,
            "WRU/s",
            ddb,
            "quota increase (table-level on-demand maximum)",
        ),
        Quota(
            "dynamodb_table_rru",
            "DynamoDB",
            "on-demand table throughput: read request units per second per table",
            40_000,
            "RRU/s",
            ddb,
            "quota increase (table-level on-demand maximum)",
        ),
        Quota(
            "dynamodb_partition_wcu",
            "DynamoDB",
            "writes per second to one partition (one partition key value is on one partition)",
            1_000,
            "WCU/s",
            "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html",
            "not adjustable: shard the key",
        ),
        Quota(
            "dynamodb_partition_rcu",
            "DynamoDB",
            "reads per second of one item (one partition key and sort key: a hot item is never split)",
            3_000,
            "RCU/s",
            "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html",
            "not adjustable: read it less (a cache), or eventually consistent (half the units)",
        ),
        Quota(
            "sqs_event_source_concurrency",
            "Lambda",
            "an SQS event source's maximum concurrency (the most a delivery queue's lane can be given)",
            1_000,
            "executions per event source",
            "https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html",
            "not adjustable: more delivery queue shards (delivery_shards), each with its own event sources",
        ),
        Quota(
            "sfn_start_execution",
            "Step Functions",
            "StartExecution (Standard), token bucket per account and region",
            300,
            "calls/s",
            sfn,
            "quota increase",
            burst=1_300,
        ),
        Quota(
            "sfn_state_transitions",
            "Step Functions",
            "state transitions (Standard), token bucket per account and region",
            5_000,
            "transitions/s",
            sfn,
            "quota increase",
            burst=5_000,
        ),
        Quota(
            "sfn_send_task",
            "Step Functions",
            "SendTaskSuccess/SendTaskFailure, token bucket per account and region",
            500,
            "calls/s",
            sfn,
            "quota increase",
            burst=3_000,
        ),
        Quota(
            "sfn_open_executions",
            "Step Functions",
            "open executions (Standard) per account and region",
            1_000_000,
            "executions",
            sfn,
            "quota increase",
        ),
        Quota(
            "sns_publish",
            "SNS",
            "Publish per second, per account (us-east-1)",
            30_000,
            "messages/s",
            "https://docs.aws.amazon.com/general/latest/gr/sns.html",
            "quota increase",
        ),
    ]


def stack_limits() -> list[Quota]:
    """The limits this stack sets on itself: the first ones a growing deployment meets, and the cheapest to raise."""
    context = _context()
    rate, burst = _stage_throttle()
    reserved = dict(context.get("reserved_concurrency", {}))  # type: ignore[call-overload]
    delivery_max = float(context.get("delivery_max_concurrency", 0) or 0)  # type: ignore[arg-type]
    max_in_flight = _max_in_flight()
    return [
        Quota(
            "stage_throttle",
            "hookrelay",
            "the HTTP API stage's throttle (all callers)",
            rate,
            "requests/s",
            "stacks/constructs/api.py (Api.THROTTLE)",
            "raise Api.THROTTLE (and the account's API Gateway quota above it)",
            burst=burst,
        ),
        Quota(
            "api_key_rate",
            "hookrelay",
            "requests per second per API key (the per-producer fair share)",
            float(context["api_key_rate_per_second"]),  # type: ignore[arg-type]
            "requests/s per key",
            "deploy/production.json api_key_rate_per_second",
            "api_key_rate_per_second in the stage file, or more keys per producer; batch ingest carries 100 events"
            " a request",
        ),
        Quota(
            "authorizer_reserved",
            "hookrelay",
            "the authorizer's reserved concurrency",
            float(reserved[AUTHORIZER.name]),
            "executions",
            "deploy/production.json reserved_concurrency",
            "reserved_concurrency in the stage file (within the account's quota: make deploy checks)",
        ),
        Quota(
            "ingest_reserved",
            "hookrelay",
            "the ingest function's reserved concurrency",
            float(reserved[INGEST.name]),
            "executions",
            "deploy/production.json reserved_concurrency",
            "reserved_concurrency in the stage file (within the account's quota: make deploy checks)",
        ),
        Quota(
            "delivery_max_concurrency",
            "hookrelay",
            "each delivery event source's maximum concurrency (one per queue shard and lane: the fast lane's"
            " batches, the slow lane's single messages)",
            delivery_max,
            "executions per event source",
            "deploy/production.json delivery_max_concurrency",
            "delivery_max_concurrency in the stage file (at most 1,000 an event source); past that, more delivery"
            " queue shards (delivery_shards)",
        ),
        Quota(
            "endpoint_groups",
            "hookrelay",
            "an endpoint's message groups: its deliveries in flight at once"
            f" (max_in_flight, at most {max_in_flight:g})",
            max_in_flight,
            "deliveries in flight",
            "lambdas/hookrelay/handlers/schemas.py (MaxInFlight)",
            f"PATCH the endpoint's max_in_flight; past {max_in_flight:,.0f}, a design change (per-endpoint shards)",
        ),
    ]


def all_quotas() -> dict[str, Quota]:
    return {q.key: q for q in [*aws_quotas(), *stack_limits()]}
