"""The composition root: services built from the environment, once per process, on first use.

Each factory imports what it builds when it first runs, not at module import: a function's cold start imports its
own services and adapters only (the authorizer, for one, never loads pydantic nor the delivery path;
tests/unit/test_cold_imports.py holds every handler to that).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from hookrelay import functions
from hookrelay.adapters import aws, schema

if TYPE_CHECKING:
    from hookrelay.adapters.dynamodb import DeliveryTable
    from hookrelay.adapters.redrive_sqs import SqsRedriveJobs
    from hookrelay.adapters.schema import DeliveryQueueUrls
    from hookrelay.adapters.sqs import SqsReleaser
    from hookrelay.adapters.stepfunctions import StepFunctionsRetryWorkflow
    from hookrelay.adapters.telemetry import DeadLetterTelemetry, PowertoolsTelemetry
    from hookrelay.domain.addresses import EndpointPorts
    from hookrelay.domain.limits import TenantLimits
    from hookrelay.domain.platform_events import PlatformNotice
    from hookrelay.domain.schedule import RetrySchedule
    from hookrelay.services.api_keys import KeyService
    from hookrelay.services.authorize import Authenticator
    from hookrelay.services.auto_disable import AutoDisablePolicy, AutoDisableSweeper
    from hookrelay.services.circuit import CircuitService
    from hookrelay.services.delivery import DeliveryService
    from hookrelay.services.delivery_log import DeliveryLogService
    from hookrelay.services.endpoints import EndpointService
    from hookrelay.services.event_types import EventDataCheck, EventTypeCatalogue
    from hookrelay.services.ingest import IngestService
    from hookrelay.services.mailbox import MailboxService
    from hookrelay.services.operational_events import OperationalEvents
    from hookrelay.services.pacing import Pacing
    from hookrelay.services.parking import Parking
    from hookrelay.services.portal import PortalSessionCheck, PortalSessionService
    from hookrelay.services.ports import DeliveryLog, DeliveryTelemetry, EndpointLists
    from hookrelay.services.rate_limit import RateLimiter
    from hookrelay.services.reconcile import Reconciler
    from hookrelay.services.redrive import OperatorRedrive, RedriveJobRunner, RedriveService
    from hookrelay.services.replay import ReplayService
    from hookrelay.services.tenants import TenantService


_T = TypeVar("_T")


class per_function(Generic[_T]):
    """A factory's product, made once per process and function on first use.

    In AWS a process serves one function, so this is once per process. The integration tier runs several functions
    in one process, each invocation with its own environment (local/function_scope.py): each function gets the
    services its own environment builds, never one another function built from its own (the function is told by
    the variable Lambda names it in; outside an invocation, the tests get their own).
    """

    def __init__(self, factory: Callable[[], _T]) -> None:
        self._factory = factory
        self._made: dict[str | None, _T] = {}
        self.__doc__ = factory.__doc__
        self.__name__ = factory.__name__

    def __call__(self) -> _T:
        function = os.environ.get(schema.FUNCTION_NAME)
        if function not in self._made:
            self._made[function] = self._factory()
        return self._made[function]

    def cache_clear(self) -> None:
        self._made.clear()


def api_url() -> str:
    """The API's base URL as deployed (function_environment.py): where portal links point."""
    return os.environ[schema.API_URL]


@per_function
def delivery_queue_urls() -> DeliveryQueueUrls:
    """Every delivery queue's URL, by shard and lane (the functions that send to them)."""
    from hookrelay.adapters.schema import DeliveryQueueUrls

    return DeliveryQueueUrls.parse(os.environ[schema.DELIVERY_QUEUE.env_var])


def _table(spec: schema.TableSpec) -> Any:
    return aws.table(os.environ[spec.env_var])


def allow_private_destinations() -> bool:
    """Local mode only: lets endpoints on 127.0.0.1 receive webhooks. Never set in a deployed stack."""
    return os.environ.get(schema.ALLOW_PRIVATE_DESTINATIONS, "false").lower() == "true"


def endpoint_ports() -> EndpointPorts:
    """The ports endpoint URLs may name (CDK context `endpoint_ports`), at registration and on every attempt."""
    from hookrelay.domain.addresses import endpoint_ports_from_config

    return endpoint_ports_from_config(os.environ.get(schema.ENDPOINT_PORTS))


@per_function
def retry_schedule() -> RetrySchedule:
    from hookrelay.domain.schedule import schedule_from_config

    return schedule_from_config(os.environ.get(schema.RETRY_SCHEDULE))


@per_function
def delivery_table() -> DeliveryTable:
    """The deliveries, for the delivery path and the log alike: one adapter, one table resource per process."""
    from hookrelay.adapters.dynamodb import DeliveryTable

    return DeliveryTable(_table(schema.DELIVERIES), _table(schema.EVENT_LOG))


@per_function
def key_service() -> KeyService:
    from hookrelay.adapters.dynamodb import ApiKeyTable
    from hookrelay.services.api_keys import KeyService

    return KeyService(ApiKeyTable(_table(schema.API_KEYS)))


@per_function
def authenticator() -> Authenticator:
    """The authorizer's token check: its own small service and adapter (no pydantic, no key management)."""
    from hookrelay.adapters.credentials import DynamoCredentials
    from hookrelay.services.authorize import Authenticator

    return Authenticator(DynamoCredentials(aws.client("dynamodb"), os.environ[schema.API_KEYS.env_var]))


@per_function
def portal_session_service() -> PortalSessionService:
    """Portal sessions as the API opens them (for a tenant that exists)."""
    from hookrelay.adapters.dynamodb import PortalSessionTable, TenantTable
    from hookrelay.services.portal import PortalSessionService

    return PortalSessionService(PortalSessionTable(_table(schema.PORTAL_SESSIONS)), TenantTable(_table(schema.TENANTS)))


@per_function
def portal_session_check() -> PortalSessionCheck:
    """Portal sessions as the authorizer checks them: the sessions table only, all its environment names."""
    from hookrelay.adapters.dynamodb import PortalSessionTable
    from hookrelay.services.portal import PortalSessionCheck

    return PortalSessionCheck(PortalSessionTable(_table(schema.PORTAL_SESSIONS)))


@per_function
def rate_limiter() -> RateLimiter:
    from hookrelay.adapters.rate_limits import DynamoRateCounters
    from hookrelay.domain.rate_limit import per_key_limit_from_config
    from hookrelay.services.rate_limit import RateLimiter

    limit = per_key_limit_from_config(os.environ.get(schema.API_KEY_RATE_PER_SECOND))
    return RateLimiter(DynamoRateCounters(_table(schema.RATE_LIMITS)), per_key_per_second=limit)


@per_function
def tenant_service() -> TenantService:
    from hookrelay.adapters.dynamodb import TenantTable
    from hookrelay.services.tenants import TenantService

    return TenantService(TenantTable(_table(schema.TENANTS)), key_service())


@per_function
def endpoint_service() -> EndpointService:
    from hookrelay.adapters.dynamodb import CountedEndpoints, EndpointTable
    from hookrelay.services.endpoints import EndpointService

    counts = schema.MAX_ENDPOINTS_PER_TENANT in os.environ  # the API function: it alone creates and deletes
    return EndpointService(
        EndpointTable(_table(schema.ENDPOINTS)),
        delivery_table(),
        _parking(),
        allow_private_destinations=allow_private_destinations(),
        endpoint_ports=endpoint_ports(),
        # Only where the deployment enforces it (the API function): the sweeper disables endpoints with this service
        # and has no access to the catalogue.
        catalogue=event_type_catalogue() if enforce_event_catalogue() else None,
        limits=tenant_limits(),
        # The sweeper (which only disables) has no access to the tenants table the count lives on.
        counter=CountedEndpoints(_table(schema.TENANTS), _table(schema.ENDPOINTS)) if counts else None,
        # The API function (which creates endpoints) sends replays, so it holds every delivery queue's URL.
        queue_shards=delivery_queue_urls().shards if schema.DELIVERY_QUEUE.env_var in os.environ else 1,
        # Where the function may read endpoints' pacing items (the API function, for health; not the sweeper).
        pacing=_pacing() if schema.RATE_LIMITS.env_var in os.environ else None,
    )


def tenant_limits() -> TenantLimits:
    """The deployment's per-tenant limits (CDK context `max_endpoints_per_tenant`, `max_filters_per_endpoint`;
    stacks/config.py validates them); the defaults where a function is not deployed with them."""
    from hookrelay.domain.limits import (
        DEFAULT_MAX_ENDPOINTS_PER_TENANT,
        DEFAULT_MAX_FILTERS_PER_ENDPOINT,
        TenantLimits,
    )

    return TenantLimits(
        max_endpoints_per_tenant=int(os.environ.get(schema.MAX_ENDPOINTS_PER_TENANT, DEFAULT_MAX_ENDPOINTS_PER_TENANT)),
        max_filters_per_endpoint=int(os.environ.get(schema.MAX_FILTERS_PER_ENDPOINT, DEFAULT_MAX_FILTERS_PER_ENDPOINT)),
    )


@per_function
def event_type_catalogue() -> EventTypeCatalogue:
    from hookrelay.adapters.event_types import EventTypeTable
    from hookrelay.adapters.json_schema import FastJsonSchemas
    from hookrelay.services.event_types import EventTypeCatalogue

    return EventTypeCatalogue(EventTypeTable(_table(schema.EVENT_TYPES)), FastJsonSchemas())


def enforce_event_catalogue() -> bool:
    """Endpoint filters must match a registered event type (CDK context `enforce_event_catalogue`; off by default)."""
    from hookrelay.services.event_types import enforce_from_config

    return enforce_from_config(os.environ.get(schema.ENFORCE_EVENT_CATALOGUE))


@per_function
def ingest_service() -> IngestService:
    from hookrelay.adapters.dynamodb import EndpointTable
    from hookrelay.adapters.event_types import EventTypeTable
    from hookrelay.adapters.json_schema import FastJsonSchemas
    from hookrelay.adapters.telemetry import PowertoolsTelemetry
    from hookrelay.services.endpoint_lists import RecentEndpointLists
    from hookrelay.services.event_types import EventDataCheck

    return _ingest(
        delivery_table(),
        EventDataCheck(EventTypeTable(_table(schema.EVENT_TYPES)), FastJsonSchemas()),
        parking=_parking(),
        telemetry=PowertoolsTelemetry(service=functions.INGEST.name),
        endpoints=RecentEndpointLists(EndpointTable(_table(schema.ENDPOINTS))),
    )


def _ingest(
    deliveries: DeliveryLog,
    event_types: EventDataCheck | None,
    parking: Parking | None = None,
    telemetry: DeliveryTelemetry | None = None,
    endpoints: EndpointLists | None = None,
) -> IngestService:
    """Ingest as producers' events and platform events go through it: the same stores, queue and schedule. Platform
    events name their recipients, so only the producers' ingest reads (and keeps) the tenant's endpoint lists."""
    from hookrelay.adapters.dynamodb import EndpointTable, EventTable, TenantTable
    from hookrelay.adapters.sqs import SqsDeliveryQueue
    from hookrelay.services.ingest import IngestService
    from hookrelay.services.reconcile import RECONCILE_GRACE

    return IngestService(
        tenants=TenantTable(_table(schema.TENANTS)),
        endpoints=endpoints or EndpointTable(_table(schema.ENDPOINTS)),
        events=EventTable(_table(schema.EVENTS), _table(schema.EVENT_LOG)),
        deliveries=deliveries,
        queue=SqsDeliveryQueue(aws.client("sqs"), delivery_queue_urls()),
        schedule=retry_schedule(),
        writer_window=RECONCILE_GRACE,
        event_types=event_types,
        parking=parking,
        telemetry=telemetry,
        new_traces_sampled=schema.tracing_on(os.environ),
    )


@per_function
def operational_events() -> OperationalEvents:
    """Platform events to tenants' subscribed endpoints, through ingest (the sweeper, delivery and redrive functions).
    Deliveries are created one conditional put each: these functions may put deliveries, not batch-write them."""
    from hookrelay.adapters.dynamodb import OneByOneDeliveryTable
    from hookrelay.services.operational_events import OperationalEvents

    return OperationalEvents(
        _ingest(OneByOneDeliveryTable(_table(schema.DELIVERIES), _table(schema.EVENT_LOG)), event_types=None)
    )


class _EmitterOnFirstUse:
    """The operational webhooks' emitter, built when a first platform event is emitted: most invocations of the
    functions that may emit one (delivery, sweeper, redrive) emit none, and building ingest's service and stores
    for them would add to every cold start."""

    def emit(self, notice: PlatformNotice) -> None:
        operational_events().emit(notice)


def _pacing() -> Pacing:
    from hookrelay.adapters.pacing import DynamoEndpointPacer
    from hookrelay.services.pacing import Pacing

    return Pacing(DynamoEndpointPacer(_table(schema.RATE_LIMITS)))


def _parking() -> Parking:
    from hookrelay.adapters.circuit import DynamoCircuits, DynamoParkingLot
    from hookrelay.adapters.dynamodb import EndpointTable
    from hookrelay.services.parking import Parking

    endpoints = _table(schema.ENDPOINTS)
    return Parking(
        DynamoParkingLot(_table(schema.DELIVERIES), _table(schema.PARKING_LOT), _table(schema.EVENT_LOG)),
        DynamoCircuits(endpoints),
        EndpointTable(endpoints),
    )


def _retry_workflow() -> StepFunctionsRetryWorkflow:
    from hookrelay.adapters.stepfunctions import StepFunctionsRetryWorkflow

    return StepFunctionsRetryWorkflow(
        aws.client("stepfunctions"), os.environ[schema.RETRY_STATE_MACHINE_ARN], delivery_queue_urls()
    )


def _dead_letters(service: str = functions.DELIVERY.name) -> DeadLetterTelemetry:
    """Deaths are counted and logged by the function that records them (the delivery path's, by default)."""
    from hookrelay.adapters.telemetry import DeadLetterTelemetry, PowertoolsTelemetry

    return DeadLetterTelemetry(PowertoolsTelemetry(service=service))


def _delivery_telemetry() -> PowertoolsTelemetry:
    """The delivery path's logs and metrics: the delivery function's, whichever service writes them."""
    from hookrelay.adapters.telemetry import PowertoolsTelemetry

    return PowertoolsTelemetry(service=functions.DELIVERY.name)


@per_function
def circuit_service() -> CircuitService:
    """The probe workflow's commands (delivery function) and the circuit sweep (sweeper function)."""
    from hookrelay.adapters.circuit import DynamoCircuits
    from hookrelay.adapters.dynamodb import EndpointTable, EventTable
    from hookrelay.adapters.sqs import SqsDeliveryQueue
    from hookrelay.services.circuit import CircuitService

    return CircuitService(
        endpoints=EndpointTable(_table(schema.ENDPOINTS)),
        circuits=DynamoCircuits(_table(schema.ENDPOINTS)),
        parking=_parking(),
        events=EventTable(_table(schema.EVENTS), _table(schema.EVENT_LOG)),
        queue=SqsDeliveryQueue(aws.client("sqs"), delivery_queue_urls()),
        workflow=_retry_workflow(),
        dead_letters=_dead_letters(),
        schedule=retry_schedule(),
        telemetry=_delivery_telemetry(),
        attempts=delivery_service(),
        platform_events=_EmitterOnFirstUse(),
    )


@per_function
def delivery_releaser() -> SqsReleaser:
    """Deletes a fast lane's settled message groups before the batch's invocation returns (domain/lanes.py)."""
    from hookrelay.adapters.sqs import SqsReleaser

    return SqsReleaser(aws.client("sqs"), delivery_queue_urls())


@per_function
def delivery_service() -> DeliveryService:
    from datetime import timedelta

    from hookrelay.adapters.aws_destinations import AwsDestinations
    from hookrelay.adapters.circuit import DynamoCircuits
    from hookrelay.adapters.dynamodb import EndpointTable, EventTable
    from hookrelay.adapters.http_sender import RequestsSender
    from hookrelay.adapters.mailbox import DynamoMailbox
    from hookrelay.adapters.oauth2 import CachedTokens
    from hookrelay.adapters.slow_tails import SlowTailTable
    from hookrelay.adapters.sqs import SqsDeliveryQueue
    from hookrelay.domain.classification import ATTEMPT_TIMEOUT_SECONDS
    from hookrelay.domain.lanes import DEFAULT_SLOW_LANE_AFTER_MS
    from hookrelay.services.delivery import DeliveryService, Lanes
    from hookrelay.services.endpoint_requests import EndpointRequests

    attempt_timeout = float(os.environ.get(schema.ATTEMPT_TIMEOUT_SECONDS, ATTEMPT_TIMEOUT_SECONDS))
    sender = RequestsSender(
        timeout_seconds=attempt_timeout,
        allow_private_destinations=allow_private_destinations(),
        endpoint_ports=endpoint_ports(),
    )
    return DeliveryService(
        deliveries=delivery_table(),
        endpoints=EndpointTable(_table(schema.ENDPOINTS)),
        events=EventTable(_table(schema.EVENTS), _table(schema.EVENT_LOG)),
        sender=sender,
        requests=EndpointRequests(
            sender,
            CachedTokens(allow_private_destinations=allow_private_destinations(), endpoint_ports=endpoint_ports()),
            budget_seconds=attempt_timeout,
        ),
        destinations=AwsDestinations(),
        # Where the function posts poll endpoints' deliveries (the delivery function; not the sweeper's circuit).
        mailbox=DynamoMailbox(_table(schema.MAILBOXES)) if schema.MAILBOXES.env_var in os.environ else None,
        workflow=_retry_workflow(),
        dead_letters=_dead_letters(),
        schedule=retry_schedule(),
        telemetry=_delivery_telemetry(),
        circuits=DynamoCircuits(_table(schema.ENDPOINTS)),
        parking=_parking(),
        claim_timeout=timedelta(seconds=schema.DELIVERY_CLAIM_TIMEOUT_SECONDS),
        platform_events=_EmitterOnFirstUse(),
        # The delivery function holds the rate-limit table (functions.DELIVERY); the sweeper, whose circuit service
        # builds this one but never makes an attempt with it, does not.
        pacing=_pacing() if schema.RATE_LIMITS.env_var in os.environ else None,
        # The delivery function holds the tails (functions.DELIVERY); the sweeper, which makes no attempt, does not.
        lanes=Lanes(
            queue=SqsDeliveryQueue(aws.client("sqs"), delivery_queue_urls()),
            tails=SlowTailTable(_table(schema.SLOW_TAILS)),
            slow_after_ms=int(os.environ.get(schema.SLOW_LANE_AFTER_MS, DEFAULT_SLOW_LANE_AFTER_MS)),
        )
        if schema.SLOW_TAILS.env_var in os.environ
        else None,
    )


@per_function
def mailbox_service() -> MailboxService:
    from hookrelay.adapters.dynamodb import EndpointTable, EventTable
    from hookrelay.adapters.mailbox import DynamoMailbox
    from hookrelay.services.mailbox import MailboxService

    return MailboxService(
        endpoints=EndpointTable(_table(schema.ENDPOINTS)),
        events=EventTable(_table(schema.EVENTS), _table(schema.EVENT_LOG)),
        deliveries=delivery_table(),
        mailbox=DynamoMailbox(_table(schema.MAILBOXES)),
    )


def _replay_service() -> ReplayService:
    from hookrelay.adapters.dynamodb import EndpointTable, EventTable
    from hookrelay.adapters.sqs import SqsDeliveryQueue
    from hookrelay.services.replay import ReplayService

    return ReplayService(
        deliveries=delivery_table(),
        events=EventTable(_table(schema.EVENTS), _table(schema.EVENT_LOG)),
        endpoints=EndpointTable(_table(schema.ENDPOINTS)),
        queue=SqsDeliveryQueue(aws.client("sqs"), delivery_queue_urls()),
        schedule=retry_schedule(),
    )


@per_function
def delivery_log_service() -> DeliveryLogService:
    from datetime import timedelta

    from hookrelay.adapters.dynamodb import EndpointTable, EventTable
    from hookrelay.services.delivery_log import DeliveryLogService

    return DeliveryLogService(
        deliveries=delivery_table(),
        events=EventTable(_table(schema.EVENTS), _table(schema.EVENT_LOG)),
        endpoints=EndpointTable(_table(schema.ENDPOINTS)),
        parking=_parking(),
        message_hold=timedelta(seconds=schema.DELIVERY_QUEUE.visibility_timeout_seconds),
    )


@per_function
def replay_service() -> ReplayService:
    return _replay_service()


@per_function
def redrive_service() -> RedriveService:
    from hookrelay.adapters.dynamodb import EndpointTable, RedriveTable
    from hookrelay.services.redrive import RedriveService

    return RedriveService(
        redrives=RedriveTable(_table(schema.REDRIVES)),
        deliveries=delivery_table(),
        endpoints=EndpointTable(_table(schema.ENDPOINTS)),
        replays=replay_service(),
        jobs=redrive_jobs(),
        platform_events=_EmitterOnFirstUse(),
    )


@per_function
def redrive_job_runner() -> RedriveJobRunner:
    from hookrelay.services.redrive import RedriveJobRunner

    return RedriveJobRunner(redrives=redrive_service())


def redrive_jobs() -> SqsRedriveJobs:
    from hookrelay.adapters.redrive_sqs import SqsRedriveJobs

    return SqsRedriveJobs(aws.client("sqs"), os.environ[schema.REDRIVE_JOBS_QUEUE.env_var])


@per_function
def reconciler() -> Reconciler:
    from hookrelay.adapters.checkpoints import CheckpointTable
    from hookrelay.adapters.dynamodb import EventTable, RedriveTable, TenantTable
    from hookrelay.adapters.redrive_sqs import SqsMessageSource
    from hookrelay.adapters.sqs import SqsDeliveryQueue
    from hookrelay.services.reconcile import Reconciler

    sqs = aws.client("sqs")
    return Reconciler(
        tenants=TenantTable(_table(schema.TENANTS)),
        deliveries=delivery_table(),
        events=EventTable(_table(schema.EVENTS), _table(schema.EVENT_LOG)),
        queue=SqsDeliveryQueue(sqs, delivery_queue_urls()),
        dead_letter_queue=SqsMessageSource(sqs, os.environ[schema.DEAD_LETTER_QUEUE.env_var], wait_seconds=0),
        poison_queue=SqsMessageSource(sqs, os.environ[schema.POISON_QUEUE.env_var], wait_seconds=0),
        dead_letters=_dead_letters(functions.RECONCILER.name),
        redrives=RedriveTable(_table(schema.REDRIVES)),
        redrive_jobs=redrive_jobs(),
        failed_jobs=SqsMessageSource(sqs, os.environ[schema.REDRIVE_JOBS_DEAD_LETTER_QUEUE.env_var], wait_seconds=0),
        parking=_parking(),
        checkpoints=CheckpointTable(_table(schema.CHECKPOINTS)),
    )


def operator_redrive() -> OperatorRedrive:
    """The operator's redrive of the deliveries the platform killed (scripts/redrive_dead_letters.py)."""
    from hookrelay.adapters.dynamodb import TenantTable
    from hookrelay.services.redrive import OperatorRedrive

    return OperatorRedrive(
        tenants=TenantTable(_table(schema.TENANTS)), deliveries=delivery_table(), replays=replay_service()
    )


def auto_disable_policy() -> AutoDisablePolicy:
    from hookrelay.services.auto_disable import policy_from_config

    return policy_from_config(
        os.environ.get(schema.AUTO_DISABLE_AFTER_DAYS), os.environ.get(schema.ENDPOINT_HEALTH_DAY_SECONDS)
    )


@per_function
def auto_disable_sweeper() -> AutoDisableSweeper:
    from hookrelay.adapters.dynamodb import EndpointTable
    from hookrelay.adapters.sns import SnsEndpointNotices
    from hookrelay.services.auto_disable import AutoDisableSweeper

    return AutoDisableSweeper(
        endpoints=EndpointTable(_table(schema.ENDPOINTS)),
        management=endpoint_service(),
        deliveries=delivery_table(),
        notices=SnsEndpointNotices(aws.client("sns"), os.environ[schema.ENDPOINT_NOTICES_TOPIC.env_var]),
        policy=auto_disable_policy(),
        platform_events=_EmitterOnFirstUse(),
    )


_FACTORIES = (
    delivery_queue_urls,
    retry_schedule,
    delivery_table,
    key_service,
    authenticator,
    portal_session_service,
    portal_session_check,
    rate_limiter,
    tenant_service,
    endpoint_service,
    event_type_catalogue,
    ingest_service,
    operational_events,
    delivery_service,
    circuit_service,
    delivery_log_service,
    replay_service,
    redrive_service,
    redrive_job_runner,
    reconciler,
    auto_disable_sweeper,
)


def reset() -> None:
    """Forget every service and client: tests and the local stack call this when the environment changes."""
    for factory in _FACTORIES:
        factory.cache_clear()
    aws.reset()
