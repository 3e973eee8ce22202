"""The tables, queues, topics and environment names: one definition for the CDK stack, the local stack and the tests."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from hookrelay.domain import classification, pacing
from hookrelay.domain.queues import DeliveryLane, check_shards


@dataclass(frozen=True)
class IndexSpec:
    """A global secondary index. It projects its keys, the table's key and `include`, never the whole item:
    an index that projected ALL would be rewritten by every update of the item, whatever it changed, and
    each copy billed as a write. So `include` holds only attributes that never change while an item is in
    the index (or change only when its key moves anyway), and readers fetch the items themselves."""

    name: str
    partition_key: str
    sort_key: str
    include: tuple[str, ...] = ()

    @property
    def non_key_attributes(self) -> tuple[str, ...]:
        """`include` less the index's own keys, which every index projects (and DynamoDB refuses to list)."""
        return tuple(name for name in self.include if name not in (self.partition_key, self.sort_key))

    @property
    def projection(self) -> str:
        return "INCLUDE" if self.non_key_attributes else "KEYS_ONLY"


@dataclass(frozen=True)
class TableSpec:
    logical_name: str
    env_var: str
    partition_key: str
    sort_key: str | None = None
    ttl_attribute: str | None = None
    indexes: tuple[IndexSpec, ...] = field(default_factory=tuple)


TENANTS = TableSpec("Tenants", "TENANTS_TABLE", partition_key="id")
API_KEYS = TableSpec("ApiKeys", "API_KEYS_TABLE", partition_key="key_id")
# `failing` is set ("1") only while an enabled endpoint is failing, so the index is sparse: the health
# sweeper reads exactly the failing endpoints, longest failing first, and never scans the table.
FAILING_ENDPOINTS_INDEX = IndexSpec("failing", "failing", "failing_since")
# `circuit_mark` is set ("1") only while an endpoint's circuit is open or draining: the sweeper reads exactly
# those (to end parked deliveries past their horizon and restart a lost probe workflow), never a scan.
OPEN_CIRCUITS_INDEX = IndexSpec("open_circuits", "circuit_mark", "circuit_opened_at")
ENDPOINTS = TableSpec(
    "Endpoints",
    "ENDPOINTS_TABLE",
    partition_key="tenant_id",
    sort_key="id",
    indexes=(FAILING_ENDPOINTS_INDEX, OPEN_CIRCUITS_INDEX),
)
# Events also hold the per-(tenant, ordering key) sequence counters, under `seq#` keys with no TTL.
EVENTS = TableSpec("Events", "EVENTS_TABLE", partition_key="id", ttl_attribute="expires_at")
# The event log (adapters/event_log.py): each event ingest stores without an idempotency key, with the endpoints it
# fanned out to, in its tenant's log shard (`<tenant>#<shard>`, the delivery log's shards), ordered by when its
# deliveries were created. The delivery log reads it as the `by_tenant` index's other half, so an event's fan-out
# writes no index entry: one write unit per event for the event and its place in the log (issue 28). An event with
# an idempotency key (not time-ordered), a replay's and everything stored before this table are in EVENTS.
EVENT_LOG = TableSpec(
    "EventLog", "EVENT_LOG_TABLE", partition_key="tenant_shard", sort_key="log_order", ttl_attribute="expires_at"
)
# The delivery log's indexes project the attributes a read filters on before it fetches the page's items:
# the owner and the ids never change. `tenant_status` is sparse: set only while a delivery is in one of the
# statuses a reader looks for among many delivered ones (`adapters.dynamodb.STATUS_INDEXED`), so the happy
# path never writes that index, and its completion attributes are projected because they are set when a
# delivery enters it. `event_extra` is sparse too: an event's fan-out deliveries have ids derived from the
# event and their endpoints (`domain.lifecycle.fan_out_id`), so the log finds them from the event and the
# tenant's endpoints with no index; only the event's other deliveries (replays) are indexed by event.
#
# One log index serves the tenant's log and each endpoint's: `by_tenant`, whose entries project the endpoint, read
# newest first and filtered on it (a bounded read: `adapters.dynamodb.MAX_PAGES_PER_READ` pages of entries per call,
# then a cursor). A second index by endpoint cost one more write unit per delivery, on every delivery, for a read
# that is rare next to them (issue 28: 4 write units per event); an endpoint's dead, retrying and cancelled
# deliveries are still read from the status index, where they are few.
#
# The tenant-wide and per-status indexes are sharded: a delivery's entry is under
# `<owner>#<shard>`, the shard a stable hash of the delivery id (`adapters.dynamodb.shard_of`), so one large
# tenant's writes spread over the log's shards instead of one partition (whose 1,000 write units
# a second, with a creation-time sort key that adaptive capacity cannot split writes across, would otherwise bound
# a tenant's deliveries a second); a read queries every shard and merges them.
#
# How many shards is a deployment setting (CDK context `log_shards`, stacks/config.py; DELIVERY_LOG_SHARDS in the
# environment of every function with the deliveries table). The rule (bench/capacity.py sizes it per workload):
# shards >= the largest owner's index writes a second / 1,000, with headroom; an entry is one write unit, so a
# tenant's deliveries a second (events x fan-out x its share) / 1,000 x 1.25. The default, 4, fits the default
# stage: its API throttle (200 requests a second) at a fan-out of 10 is 2,000 entries a second for one tenant,
# 2 shards, doubled. Every read queries every shard: a page costs about one Query (0.5 read units) per shard
# plus its items, so the most (MAX_LOG_SHARDS) keeps a page's reads bounded. Raising the count needs no
# migration (new entries spread wider; reads cover every shard up to the new count, so the old ones too, and a
# cursor is a position in the merged order, not a shard's); lowering it would hide the entries of the shards
# dropped until they expire (synth cannot see the deployed count to refuse it): only ever raise it.
DELIVERY_LOG_SHARDS = "DELIVERY_LOG_SHARDS"
DEFAULT_LOG_SHARDS = 4
MAX_LOG_SHARDS = 256
_LOG_ATTRIBUTES = ("tenant_id", "endpoint_id", "event_id")
EVENT_EXTRAS_INDEX = IndexSpec("event_extras", "event_extra", "created_at", include=_LOG_ATTRIBUTES)
# The tenant's log. Deliveries written together share one entry, a log page's (adapters/log_pages.py).
DELIVERY_LOG_INDEX = IndexSpec("by_tenant", "tenant_shard", "created_at", include=_LOG_ATTRIBUTES)
DELIVERIES = TableSpec(
    "Deliveries",
    "DELIVERIES_TABLE",
    partition_key="id",
    ttl_attribute="expires_at",
    indexes=(
        DELIVERY_LOG_INDEX,
        IndexSpec(
            "by_tenant_status",
            "tenant_status",
            "created_at",
            include=(*_LOG_ATTRIBUTES, "completed_at", "expires_at"),
        ),
        EVENT_EXTRAS_INDEX,
    ),
)
# The attribute of a delivery record that marks it parked, naming the endpoint it waits behind.
PARKED_MARK = "parked_endpoint"
# The deliveries parked behind each endpoint's circuit, in event order: one small entry per parked delivery
# (`slot` is domain.circuit.park_order, then the delivery id), beside the delivery's own `parked_endpoint`
# mark. A table, not an index, so that reading an endpoint's lot is strongly consistent: the circuit closes
# only on a lot read empty after the close began (services/parking.py), with no count kept per park.
PARKING_LOT = TableSpec("ParkingLot", "PARKING_LOT_TABLE", partition_key="endpoint_id", sort_key="slot")
# The lot is write-sharded by message group: an entry's partition key is `<endpoint>#<shard>`, the shard a stable
# hash of its delivery's message group (adapters/circuit.py, `lot_partition`). While an endpoint's circuit is open,
# ingest writes an entry per event it accepts for it, and a partition key whose sort key only grows takes at most
# 1,000 write units a second (adaptive capacity cannot split such writes): one partition would cap how fast a busy
# endpoint's outage can be taken in, and its throttled writes would hold ingest's shared concurrency. A message group
# is the unit of order, so each group's entries stay in one partition, in order, read by one strongly consistent
# Query; a read merges the shards by slot. A constant, not a deployment setting: every reader must know every
# partition an entry can be in, whatever was deployed when it was written. Entries written before the lot was
# sharded are under the endpoint's own id, which reads merge in too. 32: an endpoint sent 10,000 events a second
# (the busiest of docs/capacity.md's 100,000/s workloads) has that many parked a second in its outage (ingest parks
# them as they come, whatever the endpoint's max_in_flight), which 16 shards took at up to 1,424 write units a
# second on the hottest (bench/capacity.py). Earlier counts are kept in EARLIER_LOT_SHARDS: a larger count
# names every partition of a smaller one, so reads find their entries; a delivery's later writes look for its entry
# in the current count's shard and so miss one parked under an earlier count, which the drain then releases once
# more and its refused claim drops wherever it can be (adapters/circuit.py, `_drop_everywhere`).
LOT_SHARDS = 32
EARLIER_LOT_SHARDS = (16,)
# Pull delivery's mailboxes (domain/mailbox.py): per poll endpoint, its deliveries waiting for the consumer, in the
# order they were posted (`seq`, zero-padded so that it sorts as a string), each removed when the consumer's cursor
# passes it, or by TTL at its delivery's retention end.
MAILBOXES = TableSpec(
    "Mailboxes", "MAILBOXES_TABLE", partition_key="endpoint_id", sort_key="seq", ttl_attribute="expires_at"
)
# Redrive jobs: one record per redrive (progress and the resume cursor), kept for the retention window.
REDRIVES = TableSpec("Redrives", "REDRIVES_TABLE", partition_key="id", ttl_attribute="expires_at")
# Powertools idempotency's default layout.
IDEMPOTENCY = TableSpec("Idempotency", "IDEMPOTENCY_TABLE", partition_key="id", ttl_attribute="expiration")

# Per-key request counters (domain/rate_limit.py): one item per key and second, expired by TTL.
RATE_LIMITS = TableSpec("RateLimits", "RATE_LIMITS_TABLE", partition_key="id", ttl_attribute="expires_at")
# Consumer portal sessions (domain/portal.py): one item per portal link, removed by TTL after it expires.
PORTAL_SESSIONS = TableSpec("PortalSessions", "PORTAL_SESSIONS_TABLE", partition_key="id", ttl_attribute="expires_at")

# Where a scheduled sweep has got to (adapters/checkpoints.py): one item per sweep, e.g. the reconciler's end of the
# delivery log it has read, so that each run reads each delivery once and a failed run's span is read by the next.
CHECKPOINTS = TableSpec("Checkpoints", "CHECKPOINTS_TABLE", partition_key="name")

# Per message group, the last message forwarded to its endpoint's slow lane and not yet settled there
# (domain/lanes.py, adapters/slow_tails.py): an item per group, keyed by the group's id (an endpoint's id and a
# slot), so a busy slow endpoint's forwards spread over as many partitions as it has groups and write nothing of
# its endpoint's item; expired by TTL once no message it could name is still queued.
SLOW_TAILS = TableSpec("SlowTails", "SLOW_TAILS_TABLE", partition_key="group_id", ttl_attribute="expires_at")

# The event-type catalogue (adapters/event_types.py): one partition, a type per name.
EVENT_TYPES = TableSpec("EventTypes", "EVENT_TYPES_TABLE", partition_key="catalogue", sort_key="name")

ALL_TABLES: tuple[TableSpec, ...] = (
    TENANTS,
    API_KEYS,
    ENDPOINTS,
    EVENTS,
    EVENT_LOG,
    DELIVERIES,
    PARKING_LOT,
    MAILBOXES,
    IDEMPOTENCY,
    REDRIVES,
    RATE_LIMITS,
    EVENT_TYPES,
    PORTAL_SESSIONS,
    CHECKPOINTS,
    SLOW_TAILS,
)

# Other environment the functions read (each queue's and topic's variable is on its spec).
# Set by Lambda's runtime itself (not by the template): the function's name. The wiring keeps each function's
# services apart by it where several functions share a process (the integration tier).
FUNCTION_NAME = "AWS_LAMBDA_FUNCTION_NAME"
RETRY_STATE_MACHINE_ARN = "RETRY_STATE_MACHINE_ARN"
# The API's own base URL, as deployed (no trailing slash): where a portal link points, never a request's headers.
API_URL = "API_URL"
RETRY_SCHEDULE = "RETRY_SCHEDULE"
# Powertools' tracing switch: "false" exactly when the deployment turns X-Ray tracing on (CDK context `xray_tracing`).
# Read by handlers/tracing.py, and by ingest for the sampled flag of the traces it starts (domain/trace_context.py).
TRACE_SWITCH = "POWERTOOLS_TRACE_DISABLED"


def tracing_on(environ: Mapping[str, str]) -> bool:
    """Whether the platform's own tracing is on in this environment (unset: off, as the local stack and tests run)."""
    return environ.get(TRACE_SWITCH, "true").strip().lower() in ("false", "0")


ALLOW_PRIVATE_DESTINATIONS = "ALLOW_PRIVATE_DESTINATIONS"
ATTEMPT_TIMEOUT_SECONDS = "ATTEMPT_TIMEOUT_SECONDS"
SLOW_LANE_AFTER_MS = "SLOW_LANE_AFTER_MS"  # the delivery lanes' threshold (domain/lanes.py); the delivery function's
AUTO_DISABLE_AFTER_DAYS = "AUTO_DISABLE_AFTER_DAYS"
API_KEY_RATE_PER_SECOND = "API_KEY_RATE_PER_SECOND"  # the authorizer's per-key limit; unset: none
# The length of the endpoint-health policy's "day" in seconds: 86400 except in the local stack's --fast mode.
ENDPOINT_HEALTH_DAY_SECONDS = "ENDPOINT_HEALTH_DAY_SECONDS"
# "true": every endpoint filter must match a registered event type, while any is registered (services/event_types.py).
ENFORCE_EVENT_CATALOGUE = "ENFORCE_EVENT_CATALOGUE"
# The ports endpoint URLs may name, "wide" or "narrow" (domain/addresses.py): read where URLs are registered and sent.
ENDPOINT_PORTS = "ENDPOINT_PORTS"
# The per-tenant limits (domain/limits.py), read by the API function, which creates and changes endpoints.
MAX_ENDPOINTS_PER_TENANT = "MAX_ENDPOINTS_PER_TENANT"
MAX_FILTERS_PER_ENDPOINT = "MAX_FILTERS_PER_ENDPOINT"


@dataclass(frozen=True)
class TopicSpec:
    logical_name: str
    env_var: str  # the variable holding the topic's ARN


# Notices to platform teams about failing endpoints (warnings, then the auto-disable), with message
# attributes tenant_id, endpoint_id and kind for subscription filter policies.
ENDPOINT_NOTICES_TOPIC = TopicSpec("EndpointNoticesTopic", "ENDPOINT_NOTICES_TOPIC_ARN")
ALL_TOPICS: tuple[TopicSpec, ...] = (ENDPOINT_NOTICES_TOPIC,)

# SQS's most messages per call (ReceiveMessage, SendMessageBatch, DeleteMessageBatch), and so the largest batch
# Lambda's event source hands a function from a FIFO queue.
SQS_MAX_BATCH = 10


@dataclass(frozen=True)
class QueueSpec:
    logical_name: str
    env_var: str  # the variable holding the queue's URL
    fifo: bool
    visibility_timeout_seconds: int = 30
    retention_seconds: int = 14 * 24 * 3600
    content_based_deduplication: bool = False
    dead_letter: str | None = None  # logical name of the queue poison messages move to
    max_receive_count: int | None = None
    # FIFO high throughput: limits per message group instead of per queue (300 calls/s per action otherwise);
    # deduplication is then per group too, which holds since every id we deduplicate on stays in one group.
    high_throughput: bool = False
    # Set on the delivery queues only: which shard and lane the queue is (`delivery_queues`).
    shard: int | None = None
    lane: DeliveryLane | None = None


# --- The delivery function's timeout, its claims' and its queue's visibility timeout: one derivation ---
#
# What a crash costs: an invocation that dies (or times out) leaves its message in flight, and with it its whole
# message group (the endpoint's slot), until the queue's visibility timeout has passed; then the message comes back
# and takes the dead invocation's claim over. So these are as short as correctness allows, from the attempt timeout:
#
# - The function's timeout: one message's longest path, as if it had a batch to itself. It reads the endpoint, claims
#   the delivery, makes the attempt (ATTEMPT_TIMEOUT_SECONDS at most, the whole request), records it and hands it
#   over: about a dozen AWS calls on the longest path (a failed attempt that opens the circuit and parks), a few ms
#   each. A throttled call retries (adapters/aws.py) and backs off up to AWS_CALL_BACKOFF_SECONDS before it raises;
#   allowed: two such calls (a throttle is a table's or the account's, so the next call may meet it too) and half a
#   second for each of the others. A fast lane's batch attempts its message groups at once, and one group's messages
#   one after another (handlers/delivery.py), each attempted only while a whole message path still fits
#   (DELIVERY_MESSAGE_SECONDS): one that does not is forwarded to its slow lane instead (two quick calls,
#   domain/lanes.py), never handed back to count toward the queue's maxReceiveCount.
# - A claim older than the function's timeout is abandoned: Lambda has ended the invocation that made it by then.
# - The visibility timeout: at least the function's timeout (Lambda refuses an SQS event source whose queue's is
#   shorter: CreateEventSourceMapping, at deploy time; CDK does not check it at synth, so `functions` does), and long
#   enough that a message that comes back finds its dead invocation's claim abandoned: a claim is made within the
#   invocation, so within one function timeout of the receive, and abandoned one more later. Twice the timeout.
#   AWS's advice is six times, to leave room for retries when the function is throttled: every receive counts toward
#   the queue's maxReceiveCount (5) even when Lambda could not invoke, so a message throttled five times in a row
#   (some 7 minutes here, against 36 at six times) goes to the poison queue, where the reconciler surfaces its delivery
#   as dead (poison), redrivable, never silently lost. The trade: a crash holds its groups for 1.5 minutes, not 6.
# The attempt timeout can be lowered by deployment (ATTEMPT_TIMEOUT_SECONDS); these are sized for the contract's.
AWS_CALL_TRIES = 5  # every AWS call's tries in all, the first included (adapters/aws.py configures botocore so)


def aws_call_backoff_cap(retry: int) -> float:
    """The longest backoff before the `retry`th retry (from 0) of an AWS call: botocore's standard retries back off
    up to 1, 2, 4, 8 … s (doubling, capped at 20), with full jitter; a batch's unprocessed items wait the same."""
    return min(2.0**retry, 20.0)


AWS_CALL_BACKOFF_SECONDS = sum(aws_call_backoff_cap(retry) for retry in range(AWS_CALL_TRIES - 1))
DELIVERY_AWS_CALLS = 12  # on an invocation's longest path
DELIVERY_THROTTLED_CALLS = 2
# A rate-limited endpoint's send may first wait for its slot (domain/pacing.py): WAIT_SECONDS at most, but a slow
# lane's first attempt (pacing.SLOW_LANE_WAIT_SECONDS, its second half out of the throttled calls' allowance).
DELIVERY_FUNCTION_TIMEOUT_SECONDS = math.ceil(
    classification.ATTEMPT_TIMEOUT_SECONDS
    + pacing.WAIT_SECONDS
    + DELIVERY_THROTTLED_CALLS * AWS_CALL_BACKOFF_SECONDS
    + (DELIVERY_AWS_CALLS - DELIVERY_THROTTLED_CALLS) * 0.5
)
# One message's longest path unthrottled: a batch's next message of a group starts only while this much is left.
DELIVERY_MESSAGE_SECONDS = classification.ATTEMPT_TIMEOUT_SECONDS + DELIVERY_AWS_CALLS * 0.5
DELIVERY_CLAIM_TIMEOUT_SECONDS = DELIVERY_FUNCTION_TIMEOUT_SECONDS
DELIVERY_VISIBILITY_TIMEOUT_SECONDS = DELIVERY_FUNCTION_TIMEOUT_SECONDS + DELIVERY_CLAIM_TIMEOUT_SECONDS

# Messages that fail delivery processing this many times (a bug, not a consumer outage: consumer
# failures are recorded attempts, not processing errors) move to the poison-message queue.
POISON_QUEUE = QueueSpec("PoisonQueue", "POISON_QUEUE_URL", fifo=True)
# The delivery queues: a FAST and a SLOW lane per shard (domain/queues.py), every one made from this spec, which is
# shard 0's fast lane itself: it keeps the one delivery queue's logical id of before shards, so an upgrade keeps the
# live queue and what it holds. `env_var` names the one variable that holds every delivery queue's URL
# (`encode_delivery_queues`); a function that sends to one delivery queue may send to all (`Access.sends_to`).
DELIVERY_QUEUE = QueueSpec(
    "DeliveryQueue",
    "DELIVERY_QUEUES",
    fifo=True,
    visibility_timeout_seconds=DELIVERY_VISIBILITY_TIMEOUT_SECONDS,  # derived above
    # SQS's maximum: a first attempt queued behind a hanging endpoint's backlog waits until the endpoint is
    # disabled (5 days by default) and is then recorded cancelled, never dropped by SQS unrecorded.
    retention_seconds=14 * 24 * 3600,
    dead_letter=POISON_QUEUE.logical_name,
    max_receive_count=5,
    high_throughput=True,
    shard=0,
    lane=DeliveryLane.FAST,
)


def delivery_queue(shard: int, lane: DeliveryLane) -> QueueSpec:
    """The delivery queue of `shard`'s `lane`: DELIVERY_QUEUE's settings (and poison queue) under its own name."""
    if shard == 0 and lane is DeliveryLane.FAST:
        return DELIVERY_QUEUE
    suffix = "Slow" if lane is DeliveryLane.SLOW else ""
    return replace(DELIVERY_QUEUE, logical_name=f"DeliveryQueueShard{shard}{suffix}", shard=shard, lane=lane)


def delivery_queues(shards: int) -> tuple[QueueSpec, ...]:
    """Every delivery queue of a deployment with `shards` shards, shard by shard, fast lane first."""
    check_shards(shards)
    return tuple(delivery_queue(shard, lane) for shard in range(shards) for lane in DeliveryLane)


def is_delivery_queue(spec: QueueSpec) -> bool:
    return spec.shard is not None


def encode_delivery_queues(urls: Mapping[QueueSpec, str]) -> str:
    """The value of DELIVERY_QUEUE.env_var: a JSON list, one object per shard, of its lanes' URLs, from every
    delivery queue's URL in `urls` (other queues' are ignored). `adapters.sqs.DeliveryQueueUrls` reads it."""
    lanes: dict[int, dict[str, str]] = {}
    for spec, url in urls.items():
        if spec.shard is not None and spec.lane is not None:
            lanes.setdefault(spec.shard, {})[spec.lane.value] = url
    if sorted(lanes) != list(range(len(lanes))) or any(len(each) != len(DeliveryLane) for each in lanes.values()):
        raise ValueError(f"the delivery queues are not every lane of shards 0..n-1: {sorted(lanes)}")
    return json.dumps([lanes[shard] for shard in range(len(lanes))], separators=(",", ":"))


# One message per dead delivery: what operators watch and alarm on.
DEAD_LETTER_QUEUE = QueueSpec("DeadLetterQueue", "DEAD_LETTER_QUEUE_URL", fifo=False)

REDRIVE_FUNCTION_TIMEOUT_SECONDS = 120
# Redrive jobs that keep failing (a bug) park here instead of cycling for the queue's whole retention.
REDRIVE_JOBS_DEAD_LETTER_QUEUE = QueueSpec(
    "RedriveJobsDeadLetterQueue", "REDRIVE_JOBS_DEAD_LETTER_QUEUE_URL", fifo=False
)
# One message per page of a redrive (the redrive Lambda re-enqueues the next), or per dead-letter drain.
REDRIVE_JOBS_QUEUE = QueueSpec(
    "RedriveJobsQueue",
    "REDRIVE_JOBS_QUEUE_URL",
    fifo=False,
    visibility_timeout_seconds=6 * REDRIVE_FUNCTION_TIMEOUT_SECONDS,
    dead_letter=REDRIVE_JOBS_DEAD_LETTER_QUEUE.logical_name,
    max_receive_count=5,
)


@dataclass(frozen=True)
class DeliveryQueueUrls:
    """Every delivery queue's URL, by shard and lane: what DELIVERY_QUEUE.env_var holds (`encode_delivery_queues`)."""

    lanes: tuple[Mapping[DeliveryLane, str], ...]

    @classmethod
    def parse(cls, text: str) -> DeliveryQueueUrls:
        shards = json.loads(text)
        return cls(tuple({lane: str(shard[lane.value]) for lane in DeliveryLane} for shard in shards))

    @property
    def shards(self) -> int:
        return len(self.lanes)

    def url(self, shard: int, lane: DeliveryLane = DeliveryLane.FAST) -> str:
        if not 0 <= shard < self.shards:
            # A stored shard beyond the deployment's: N was lowered, which the stack refuses (domain/queues.py).
            raise LookupError(f"no delivery queue for shard {shard}: this deployment has {self.shards} shards")
        return self.lanes[shard][lane]

    def all(self) -> list[str]:
        """Every delivery queue's URL, shard by shard, fast lane first."""
        return [lanes[lane] for lanes in self.lanes for lane in DeliveryLane]


# The queues other than the delivery queues, in the order they are made (a dead-letter queue before its source).
OTHER_QUEUES: tuple[QueueSpec, ...] = (
    POISON_QUEUE,
    DEAD_LETTER_QUEUE,
    REDRIVE_JOBS_DEAD_LETTER_QUEUE,
    REDRIVE_JOBS_QUEUE,
)


def all_queues(shards: int) -> tuple[QueueSpec, ...]:
    """Every queue of a deployment with `shards` delivery shards, each after its dead-letter queue."""
    return (*OTHER_QUEUES, *delivery_queues(shards))
