"""The table of functions: every Lambda function, its handler, what invokes it, its limits and what it may touch.

Why here, at the top of the package beside `wiring`: "what runs, when, and with what rights" is the first
question about a serverless system, asked before any handler is read, and three readers need one answer:

- the CDK stack (`stacks/constructs/functions.py`) makes each function from its entry: the handler, timeout and
  memory, the trigger (API routes, the authorizer, an SQS event source, an EventBridge schedule), the IAM
  grants its `Access` implies and the environment naming exactly those resources;
- the local stack (`local/stack.py`, `local/gateway.py`, `local/lambda_runtime.py`) serves the same routes,
  feeds the same queues at the same batch sizes and concurrency, runs the same schedules (sooner) and
  resolves the same handlers;
- the handlers, for their own names (Powertools' `service`).

So it is plain Python, importable without aws_cdk (neither the local stack nor a Lambda function loads CDK).
A new function is a new entry in `FUNCTIONS`; nothing else lists functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from hookrelay.adapters import schema
from hookrelay.domain.queues import SLOW_LANE_BATCH_SIZE, DeliveryLane

# Every function's unless its entry says otherwise.
DEFAULT_TIMEOUT_SECONDS = 10
MEMORY_MB = 512
# The functions on every event's path mostly wait (on DynamoDB, SQS, the endpoint): their own code takes a few ms
# of CPU per event (bench/delivery_overhead.py), so half the memory (and CPU share) halves their GB-s at the price
# of a slower cold start (import time scales with CPU); bench/cost.py prices both.
LIGHT_MEMORY_MB = 256
# Set in every function's environment, the local stack's and the cold-start benchmark's: interpreter settings that
# shorten a cold start and change nothing else. Pydantic looks for plugins in every installed distribution's entry
# points the first time it builds a model (importing importlib.metadata and reading each .dist-info); we use none.
INTERPRETER_ENVIRONMENT: Mapping[str, str] = {"PYDANTIC_DISABLE_PLUGINS": "__all__"}


class TableAccess(Enum):
    """What a function may do to a table's items; the IAM actions of each are `function_permissions.TABLE_ACTIONS`."""

    LOOKUP = "lookup"  # GetItem only: items by their key
    READ = "read"
    READ_SCAN = "read_scan"  # read, and Scan: a walk over every item
    READ_UPDATE = "read_update"  # read, and UpdateItem only: no puts, no deletes
    READ_REWRITE = "read_rewrite"  # read, PutItem and UpdateItem: rewrites records, never deletes them
    READ_BATCH_WRITE = "read_batch_write"  # READ_REWRITE and BatchWriteItem: records written many at a time
    READ_WRITE = "read_write"  # read, write and delete items
    READ_BATCH_WRITE_DELETE = "read_batch_write_delete"  # READ_WRITE and BatchWriteItem
    KEYED_PUT_DELETE = "keyed_put_delete"  # GetItem, PutItem and DeleteItem: items by their key, no query or update


@dataclass(frozen=True)
class Access:
    """What one function may touch. Its IAM grants and the environment naming those resources follow from this.

    Receiving from the queue that triggers a function is its trigger's business (the event source's grant),
    not listed here.
    """

    tables: Mapping[schema.TableSpec, TableAccess] = field(default_factory=dict)
    sends_to: tuple[schema.QueueSpec, ...] = ()
    drains: tuple[schema.QueueSpec, ...] = ()  # queues the function receives from and deletes from itself
    starts_retries: bool = False  # states:StartExecution on the retry workflow (retry and probe executions)
    stops_retries: bool = False  # states:StopExecution of its executions (a retry execution whose delivery parked)
    answers_retries: bool = False  # states:SendTask{Success,Failure} for the workflow's task tokens
    watches_probes: bool = False  # states:DescribeExecution on the retry workflow's executions (a lost probe)
    publishes: tuple[schema.TopicSpec, ...] = ()  # SNS topics the function publishes to
    assumes_destination_roles: bool = False  # sts:AssumeRole on consumers' roles (AWS destinations)


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # API Gateway syntax: /v1/endpoints/{endpoint_id}

    @property
    def route_key(self) -> str:
        return f"{self.method} {self.path}"


@dataclass(frozen=True)
class ApiRoutes:
    """Invoked by the HTTP API for these routes (each behind the authorizer)."""

    routes: tuple[Route, ...]


@dataclass(frozen=True)
class PublicRoutes:
    """Invoked by the HTTP API for these routes WITHOUT the authorizer: only the consumer portal's static page
    (HTML, CSS, JavaScript; no data). Everything the page shows it fetches from the API's authorized routes."""

    routes: tuple[Route, ...]


@dataclass(frozen=True)
class Authorizer:
    """Invoked by the HTTP API before every route: the API's Lambda authorizer.

    API Gateway keeps its answer per Authorization header for `cache_seconds` (the local stack's gateway too): a
    producer's steady stream costs one invocation per key and period instead of one per request (bench/cost.py
    prices both). The price: a revoked key or ended portal session keeps working up to that long (docs/deploying.md
    says so).
    """

    cache_seconds: int = 60


@dataclass(frozen=True)
class QueueTrigger:
    """Invoked by an SQS event source on `queue`, with partial batch responses."""

    queue: schema.QueueSpec
    batch_size: int
    max_concurrency: int | None = None  # the event source's maximum concurrency; None: Lambda's own limits

    def __post_init__(self) -> None:
        if not 1 <= self.batch_size <= schema.SQS_MAX_BATCH:
            raise ValueError(f"batch size {self.batch_size} is not within SQS's 1..{schema.SQS_MAX_BATCH}")
        if self.max_concurrency is not None and not 2 <= self.max_concurrency <= 1000:
            raise ValueError(f"an SQS event source's maximum concurrency is 2..1000, not {self.max_concurrency}")


@dataclass(frozen=True)
class Schedule:
    """Invoked on a schedule (an EventBridge rule in AWS, a timer in the local stack), in whole minutes."""

    every_seconds: int

    def __post_init__(self) -> None:
        if self.every_seconds <= 0 or self.every_seconds % 60:
            raise ValueError(f"a schedule runs every whole number of minutes, not {self.every_seconds} s")


Trigger = ApiRoutes | PublicRoutes | Authorizer | QueueTrigger | Schedule


@dataclass(frozen=True)
class Function:
    name: str
    handler: str  # "module.attribute", as Lambda resolves it
    trigger: Trigger
    access: Access
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    memory_mb: int = MEMORY_MB


AUTHORIZER = Function(
    "authorizer",
    "hookrelay.handlers.authorizer.handler",
    trigger=Authorizer(),
    memory_mb=LIGHT_MEMORY_MB,
    # The keys and portal sessions only: its answers are cached (stacks/constructs/api.py), so the per-key rate
    # limit is counted by the API functions, which see every request.
    access=Access(tables={schema.API_KEYS: TableAccess.LOOKUP, schema.PORTAL_SESSIONS: TableAccess.LOOKUP}),
)

INGEST = Function(
    "ingest",
    "hookrelay.handlers.ingest.handler",
    trigger=ApiRoutes((Route("POST", "/v1/events"), Route("POST", "/v1/events/batch"))),
    memory_mb=LIGHT_MEMORY_MB,
    access=Access(
        tables={
            schema.TENANTS: TableAccess.READ,
            # An open circuit's close held open by a delivery parked on arrival (services/parking.py).
            schema.ENDPOINTS: TableAccess.READ_UPDATE,
            # The event, and the per-ordering-key sequence counter; read back on a retry (services/ingest.py) whose
            # idempotency record is gone, and on the crash-recovery paths.
            schema.EVENTS: TableAccess.READ_BATCH_WRITE,
            # The events published without an idempotency key, with their fan-out: the deliveries' place in the log.
            schema.EVENT_LOG: TableAccess.READ_BATCH_WRITE,
            # Batch-written; a parked one taken back out is an update; read back as the events are.
            schema.DELIVERIES: TableAccess.READ_BATCH_WRITE,
            # Entries of deliveries parked on arrival, batch-written (and dropped again).
            schema.PARKING_LOT: TableAccess.READ_BATCH_WRITE_DELETE,
            schema.IDEMPOTENCY: TableAccess.READ_WRITE,  # Powertools idempotency records
            schema.EVENT_TYPES: TableAccess.READ,  # an event's data against its type's schema
            schema.RATE_LIMITS: TableAccess.READ_UPDATE,  # each key's request counter (handlers/http.py)
        },
        sends_to=(schema.DELIVERY_QUEUE,),
    ),
)

API = Function(
    "api",
    "hookrelay.handlers.api.handler",
    trigger=ApiRoutes(
        (
            Route("POST", "/v1/tenants"),
            Route("POST", "/v1/api-keys"),
            Route("POST", "/v1/portal-sessions"),
            Route("DELETE", "/v1/api-keys/{key_id}"),
            Route("POST", "/v1/endpoints"),
            Route("GET", "/v1/endpoints"),
            Route("GET", "/v1/endpoints/{endpoint_id}"),
            Route("PATCH", "/v1/endpoints/{endpoint_id}"),
            Route("DELETE", "/v1/endpoints/{endpoint_id}"),
            Route("POST", "/v1/endpoints/{endpoint_id}/disable"),
            Route("POST", "/v1/endpoints/{endpoint_id}/enable"),
            Route("POST", "/v1/endpoints/{endpoint_id}/rotate-secret"),
            Route("GET", "/v1/endpoints/{endpoint_id}/health"),
            Route("GET", "/v1/endpoints/{endpoint_id}/stats"),
            Route("GET", "/v1/endpoints/{endpoint_id}/messages"),
            Route("POST", "/v1/endpoints/{endpoint_id}/test"),
            Route("POST", "/v1/endpoints/{endpoint_id}/redrive"),
            Route("GET", "/v1/deliveries"),
            Route("GET", "/v1/deliveries/{delivery_id}"),
            Route("POST", "/v1/deliveries/{delivery_id}/replay"),
            Route("GET", "/v1/events/{event_id}"),
            Route("GET", "/v1/redrives/{redrive_id}"),
            Route("GET", "/v1/event-types"),
            Route("PUT", "/v1/event-types/{name}"),
            Route("GET", "/v1/event-types/{name}"),
            Route("DELETE", "/v1/event-types/{name}"),
        )
    ),
    access=Access(
        # Records are created and changed, never deleted (keys are revoked, endpoints soft-deleted); only an event
        # type is deleted, from the catalogue (nothing else refers to it).
        tables={
            schema.TENANTS: TableAccess.READ_REWRITE,
            schema.API_KEYS: TableAccess.READ_REWRITE,
            schema.ENDPOINTS: TableAccess.READ_REWRITE,
            schema.DELIVERIES: TableAccess.READ_REWRITE,  # the delivery log, and replays' new deliveries
            schema.EVENTS: TableAccess.READ_REWRITE,  # test events are written; replays extend expiry
            schema.EVENT_LOG: TableAccess.READ_UPDATE,  # the delivery log's other half; replays extend expiry
            schema.REDRIVES: TableAccess.READ_REWRITE,
            schema.IDEMPOTENCY: TableAccess.READ_WRITE,  # Powertools idempotency deletes a failed request's record
            schema.PARKING_LOT: TableAccess.READ,  # how many deliveries wait behind an open circuit
            schema.MAILBOXES: TableAccess.READ_WRITE,  # poll endpoints' messages read, and removed once acknowledged
            schema.EVENT_TYPES: TableAccess.READ_WRITE,  # the catalogue: admins register and delete types
            # Each key's request counter (handlers/http.py); the health route reads an endpoint's pacing item.
            schema.RATE_LIMITS: TableAccess.READ_UPDATE,
            schema.PORTAL_SESSIONS: TableAccess.READ_REWRITE,  # a new session is one conditional PutItem
        },
        sends_to=(schema.DELIVERY_QUEUE, schema.REDRIVE_JOBS_QUEUE),  # replays; redrive jobs
    ),
)

DELIVERY = Function(
    "delivery",
    "hookrelay.handlers.delivery.handler",
    # Every delivery queue (`event_sources`: each shard's two lanes). A fast lane's batches are SQS's largest, their
    # message groups attempted at once (handlers/delivery.py). A slow lane's are one message (domain/queues.py
    # SLOW_LANE_BATCH_SIZE): the event source deletes a batch's messages only when the whole invocation returns, so a
    # batch holding a hanging endpoint's message would keep the other messages' groups locked for up to the attempt
    # timeout; endpoints that are slow move to the slow lane (domain/lanes.py, docs/architecture.md).
    trigger=QueueTrigger(schema.DELIVERY_QUEUE, batch_size=schema.SQS_MAX_BATCH),
    timeout_seconds=schema.DELIVERY_FUNCTION_TIMEOUT_SECONDS,
    memory_mb=LIGHT_MEMORY_MB,
    access=Access(
        tables={
            schema.TENANTS: TableAccess.READ,  # platform events (circuit opened/closed, recovered) go through ingest
            schema.ENDPOINTS: TableAccess.READ_UPDATE,  # the failing spell and the circuit (conditional updates)
            # extend_expiry when a delivery ends; a platform event's conditional put and its sequence counter.
            schema.EVENTS: TableAccess.READ_REWRITE,
            schema.EVENT_LOG: TableAccess.READ_UPDATE,  # an ingested event read, and kept as long as its deliveries
            # Claims, attempts, status changes and the parked mark are conditional updates; a platform event's
            # deliveries are conditional puts (services/operational_events.py).
            schema.DELIVERIES: TableAccess.READ_REWRITE,
            schema.PARKING_LOT: TableAccess.READ_WRITE,  # entries put when parked, deleted when claimed
            schema.MAILBOXES: TableAccess.READ_REWRITE,  # poll endpoints' deliveries posted (domain/mailbox.py)
            # A rate-limited endpoint's next send slot (domain/pacing.py): conditional updates of one item each.
            schema.RATE_LIMITS: TableAccess.READ_UPDATE,
            # The slow lane's tails (domain/lanes.py): put around each forward, deleted when settled.
            schema.SLOW_TAILS: TableAccess.KEYED_PUT_DELETE,
        },
        sends_to=(schema.DELIVERY_QUEUE,),  # the drain's releases
        starts_retries=True,
        stops_retries=True,
        answers_retries=True,
        assumes_destination_roles=True,  # endpoints whose url is an SQS, SNS or EventBridge ARN
    ),
)

REDRIVE = Function(
    "redrive",
    "hookrelay.handlers.redrive.handler",
    # One redrive page (or dead-letter drain) per invocation keeps each within the timeout; two at a time keeps
    # a large redrive (recovery work) from crowding live deliveries out of the delivery queue and the tables.
    trigger=QueueTrigger(schema.REDRIVE_JOBS_QUEUE, batch_size=1, max_concurrency=2),
    timeout_seconds=schema.REDRIVE_FUNCTION_TIMEOUT_SECONDS,
    access=Access(
        tables={
            schema.TENANTS: TableAccess.READ,  # hookrelay.redrive.completed goes through ingest
            schema.ENDPOINTS: TableAccess.READ,
            schema.EVENTS: TableAccess.READ_REWRITE,  # extend_expiry; hookrelay.redrive.completed's event
            schema.EVENT_LOG: TableAccess.READ_UPDATE,  # the log a redrive pages through; extend_expiry
            schema.DELIVERIES: TableAccess.READ_REWRITE,  # replays' new deliveries
            schema.REDRIVES: TableAccess.READ_REWRITE,  # progress; the record itself if the API died before it
        },
        sends_to=(schema.DELIVERY_QUEUE, schema.REDRIVE_JOBS_QUEUE),  # replays; the next page of a redrive
    ),
)

SWEEPER = Function(
    "sweeper",
    "hookrelay.handlers.sweeper.handler",  # endpoint health: warnings about failing endpoints, and auto-disable
    trigger=Schedule(every_seconds=3600),
    timeout_seconds=300,
    access=Access(
        tables={
            # The failing-endpoints index, the notice markers (UpdateItem) and the disable (the PutItem of the
            # endpoint service's conditional read-change-write); never a delete.
            schema.ENDPOINTS: TableAccess.READ_REWRITE,
            schema.TENANTS: TableAccess.READ,  # the notices as platform events (hookrelay.endpoint.*), through ingest
            # A notice's last failure; parked deliveries ended past their horizon or for a disabled endpoint; a
            # platform event's deliveries (conditional puts).
            schema.DELIVERIES: TableAccess.READ_REWRITE,
            schema.PARKING_LOT: TableAccess.READ_WRITE,  # the lots of open circuits, and their ended entries
            # An ended delivery's event is kept for the redrive window; a platform event's put and sequence counter.
            schema.EVENTS: TableAccess.READ_REWRITE,
            schema.EVENT_LOG: TableAccess.READ_UPDATE,  # a notice's last failure (the log); extend_expiry
        },
        sends_to=(schema.DELIVERY_QUEUE,),  # a platform event's first messages
        publishes=(schema.ENDPOINT_NOTICES_TOPIC,),
        starts_retries=True,  # a lost probe workflow is started again
        watches_probes=True,
    ),
)

RECONCILER = Function(
    "reconciler",
    # services/reconcile.py: sends what was recorded and never enqueued (a crash between the two writes), and
    # surfaces the dead-letter and poison queues as dead deliveries, so both queues are empty in steady state.
    "hookrelay.handlers.reconciler.handler",
    trigger=Schedule(every_seconds=300),
    timeout_seconds=120,
    access=Access(
        tables={
            schema.TENANTS: TableAccess.READ_SCAN,  # the walk over tenants
            schema.DELIVERIES: TableAccess.READ_UPDATE,  # recent deliveries (by_tenant); the dead mark and reason
            schema.EVENTS: TableAccess.READ_UPDATE,  # a surfaced delivery's event is kept for the redrive window
            schema.EVENT_LOG: TableAccess.READ_UPDATE,  # recent deliveries (the log's other half); as EVENTS
            schema.REDRIVES: TableAccess.READ_UPDATE,  # a redrive whose job failed repeatedly ends failed
            # Deliveries parked on arrival and stranded: their entries read, their endpoints' circuits read, and each
            # taken back out (its entry deleted) to be sent.
            schema.PARKING_LOT: TableAccess.READ_WRITE,
            schema.ENDPOINTS: TableAccess.READ,
            schema.CHECKPOINTS: TableAccess.READ_UPDATE,  # how far its walk over the delivery log has got
        },
        # First messages never sent; a redrive's next page, when only the hand-over between two pages failed.
        sends_to=(schema.DELIVERY_QUEUE, schema.REDRIVE_JOBS_QUEUE),
        drains=(schema.DEAD_LETTER_QUEUE, schema.POISON_QUEUE, schema.REDRIVE_JOBS_DEAD_LETTER_QUEUE),
    ),
)

PORTAL = Function(
    "portal",
    "hookrelay.handlers.portal.handler",
    # The page and its files (/portal/app.js, app.css, favicon.svg), packaged with the code. It touches nothing:
    # the page carries no data, and its token (in the link's fragment) is never sent to these routes.
    trigger=PublicRoutes((Route("GET", "/portal"), Route("GET", "/portal/{asset}"))),
    access=Access(),
)

FUNCTIONS: tuple[Function, ...] = (AUTHORIZER, INGEST, API, DELIVERY, REDRIVE, SWEEPER, RECONCILER, PORTAL)


def _check_visibility(functions: tuple[Function, ...]) -> None:
    """Lambda refuses an SQS event source whose queue's visibility timeout is shorter than its function's timeout,
    but only when the stack is deployed (CreateEventSourceMapping); CDK does not check it at synth. Checked here, on
    import, so the stack, the local stack and every test refuse it first."""
    for function in functions:
        trigger = function.trigger
        if isinstance(trigger, QueueTrigger) and trigger.queue.visibility_timeout_seconds < function.timeout_seconds:
            raise ValueError(
                f"{trigger.queue.logical_name}'s visibility timeout ({trigger.queue.visibility_timeout_seconds} s) is"
                f" shorter than the {function.name} function's timeout ({function.timeout_seconds} s)"
            )


_check_visibility(FUNCTIONS)
BY_NAME: Mapping[str, Function] = {function.name: function for function in FUNCTIONS}

# Which function serves each API route (derived from the table: the order routes are matched in).
ROUTES: Mapping[Route, Function] = {
    route: function
    for function in FUNCTIONS
    if isinstance(function.trigger, ApiRoutes)
    for route in function.trigger.routes
}

# The routes served without the authorizer (only the portal page's).
PUBLIC_ROUTES: Mapping[Route, Function] = {
    route: function
    for function in FUNCTIONS
    if isinstance(function.trigger, PublicRoutes)
    for route in function.trigger.routes
}

# Every route the HTTP API serves, with or without the authorizer.
SERVED_ROUTES: Mapping[Route, Function] = {**ROUTES, **PUBLIC_ROUTES}


def authorizer() -> Function:
    """The function the HTTP API calls before every route."""
    [found] = [f for f in FUNCTIONS if isinstance(f.trigger, Authorizer)]
    return found


def authorizer_cache_seconds() -> int:
    """How long API Gateway keeps the authorizer's answer per Authorization header."""
    trigger = authorizer().trigger
    assert isinstance(trigger, Authorizer)
    return trigger.cache_seconds


def queue_trigger(function: Function) -> QueueTrigger:
    """The SQS event source of a function an SQS queue invokes."""
    if not isinstance(function.trigger, QueueTrigger):
        raise TypeError(f"the {function.name} function is not invoked from a queue")
    return function.trigger


def queue_triggered() -> list[tuple[Function, QueueTrigger]]:
    """The functions SQS event sources invoke, each with its event source."""
    return [(f, f.trigger) for f in FUNCTIONS if isinstance(f.trigger, QueueTrigger)]


@dataclass(frozen=True)
class EventSource:
    """One SQS event source: a queue feeding a function, `batch_size` messages at a time."""

    function: Function
    queue: schema.QueueSpec
    batch_size: int
    max_concurrency: int | None


def event_sources(shards: int) -> list[EventSource]:
    """Every SQS event source of a deployment with `shards` delivery shards. A trigger on the delivery queue is one
    event source per delivery queue: its batch size on the fast lanes, one message on the slow lanes."""
    found: list[EventSource] = []
    for function, trigger in queue_triggered():
        if not schema.is_delivery_queue(trigger.queue):
            found.append(EventSource(function, trigger.queue, trigger.batch_size, trigger.max_concurrency))
            continue
        for queue in schema.delivery_queues(shards):
            batch = trigger.batch_size if queue.lane is DeliveryLane.FAST else SLOW_LANE_BATCH_SIZE
            found.append(EventSource(function, queue, batch, trigger.max_concurrency))
    return found


def scheduled() -> list[tuple[Function, Schedule]]:
    """The functions invoked on a schedule, each with its schedule."""
    return [(f, f.trigger) for f in FUNCTIONS if isinstance(f.trigger, Schedule)]
