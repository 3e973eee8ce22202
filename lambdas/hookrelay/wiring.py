"""The composition root: services built from the environment, once per process, on first use."""

from __future__ import annotations

import os
from functools import cache
from typing import Any

from hookrelay import functions
from hookrelay.adapters import aws, schema
from hookrelay.adapters.circuit import DynamoCircuits, DynamoParkingLot
from hookrelay.adapters.dynamodb import (
    ApiKeyTable,
    DeliveryTable,
    EndpointTable,
    EventTable,
    PortalSessionTable,
    RedriveTable,
    TenantTable,
)
from hookrelay.adapters.http_sender import RequestsSender
from hookrelay.adapters.rate_limits import DynamoRateCounters
from hookrelay.adapters.redrive_sqs import SqsMessageSource, SqsRedriveJobs
from hookrelay.adapters.sns import SnsEndpointNotices
from hookrelay.adapters.sqs import SqsDeliveryQueue
from hookrelay.adapters.stepfunctions import StepFunctionsRetryWorkflow
from hookrelay.adapters.telemetry import DeadLetterTelemetry, PowertoolsTelemetry
from hookrelay.domain.classification import ATTEMPT_TIMEOUT_SECONDS
from hookrelay.domain.rate_limit import per_key_limit_from_config
from hookrelay.domain.schedule import RetrySchedule, schedule_from_config
from hookrelay.services.api_keys import KeyService
from hookrelay.services.auto_disable import AutoDisablePolicy, AutoDisableSweeper, policy_from_config
from hookrelay.services.circuit import CircuitService
from hookrelay.services.delivery import DeliveryService
from hookrelay.services.delivery_log import DeliveryLogService
from hookrelay.services.endpoints import EndpointService
from hookrelay.services.ingest import IngestService
from hookrelay.services.parking import Parking
from hookrelay.services.portal import PortalSessionService
from hookrelay.services.rate_limit import RateLimiter
from hookrelay.services.reconcile import Reconciler
from hookrelay.services.redrive import OperatorRedrive, RedriveJobRunner, RedriveService
from hookrelay.services.replay import ReplayService
from hookrelay.services.tenants import TenantService


def _table(spec: schema.TableSpec) -> Any:
    return aws.table(os.environ[spec.env_var])


def allow_private_destinations() -> bool:
    """Local mode only: lets endpoints on 127.0.0.1 receive webhooks. Never set in a deployed stack."""
    return os.environ.get(schema.ALLOW_PRIVATE_DESTINATIONS, "false").lower() == "true"


@cache
def retry_schedule() -> RetrySchedule:
    return schedule_from_config(os.environ.get(schema.RETRY_SCHEDULE))


@cache
def delivery_table() -> DeliveryTable:
    """The deliveries, for the delivery path and the log alike: one adapter, one table resource per process."""
    return DeliveryTable(_table(schema.DELIVERIES))


@cache
def key_service() -> KeyService:
    return KeyService(ApiKeyTable(_table(schema.API_KEYS)))


@cache
def portal_session_service() -> PortalSessionService:
    """Portal sessions: opened by the API, checked by the authorizer (which reads only the sessions table)."""
    return PortalSessionService(PortalSessionTable(_table(schema.PORTAL_SESSIONS)), TenantTable(_table(schema.TENANTS)))


@cache
def rate_limiter() -> RateLimiter:
    limit = per_key_limit_from_config(os.environ.get(schema.API_KEY_RATE_PER_SECOND))
    return RateLimiter(DynamoRateCounters(_table(schema.RATE_LIMITS)), per_key_per_second=limit)


@cache
def tenant_service() -> TenantService:
    return TenantService(TenantTable(_table(schema.TENANTS)), key_service())


@cache
def endpoint_service() -> EndpointService:
    return EndpointService(
        EndpointTable(_table(schema.ENDPOINTS)),
        delivery_table(),
        _parking(),
        allow_private_destinations=allow_private_destinations(),
    )


@cache
def ingest_service() -> IngestService:
    return IngestService(
        tenants=TenantTable(_table(schema.TENANTS)),
        endpoints=EndpointTable(_table(schema.ENDPOINTS)),
        events=EventTable(_table(schema.EVENTS)),
        deliveries=delivery_table(),
        queue=SqsDeliveryQueue(aws.client("sqs"), os.environ[schema.DELIVERY_QUEUE.env_var]),
        schedule=retry_schedule(),
    )


def _parking() -> Parking:
    endpoints = _table(schema.ENDPOINTS)
    return Parking(
        DynamoParkingLot(_table(schema.DELIVERIES), _table(schema.PARKING_LOT)),
        DynamoCircuits(endpoints),
        EndpointTable(endpoints),
    )


def _retry_workflow() -> StepFunctionsRetryWorkflow:
    return StepFunctionsRetryWorkflow(aws.client("stepfunctions"), os.environ[schema.RETRY_STATE_MACHINE_ARN])


def _dead_letters(service: str = functions.DELIVERY.name) -> DeadLetterTelemetry:
    """Deaths are counted and logged by the function that records them (the delivery path's, by default)."""
    return DeadLetterTelemetry(PowertoolsTelemetry(service=service))


def _delivery_telemetry() -> PowertoolsTelemetry:
    """The delivery path's logs and metrics: the delivery function's, whichever service writes them."""
    return PowertoolsTelemetry(service=functions.DELIVERY.name)


@cache
def circuit_service() -> CircuitService:
    """The probe workflow's commands (delivery function) and the circuit sweep (sweeper function)."""
    return CircuitService(
        endpoints=EndpointTable(_table(schema.ENDPOINTS)),
        circuits=DynamoCircuits(_table(schema.ENDPOINTS)),
        parking=_parking(),
        deliveries=delivery_table(),
        events=EventTable(_table(schema.EVENTS)),
        queue=SqsDeliveryQueue(aws.client("sqs"), os.environ[schema.DELIVERY_QUEUE.env_var]),
        workflow=_retry_workflow(),
        dead_letters=_dead_letters(),
        schedule=retry_schedule(),
        telemetry=_delivery_telemetry(),
        attempts=delivery_service(),
    )


@cache
def delivery_service() -> DeliveryService:
    return DeliveryService(
        deliveries=delivery_table(),
        endpoints=EndpointTable(_table(schema.ENDPOINTS)),
        events=EventTable(_table(schema.EVENTS)),
        sender=RequestsSender(
            timeout_seconds=float(os.environ.get(schema.ATTEMPT_TIMEOUT_SECONDS, ATTEMPT_TIMEOUT_SECONDS)),
            allow_private_destinations=allow_private_destinations(),
        ),
        workflow=_retry_workflow(),
        dead_letters=_dead_letters(),
        schedule=retry_schedule(),
        telemetry=_delivery_telemetry(),
        circuits=DynamoCircuits(_table(schema.ENDPOINTS)),
        parking=_parking(),
    )


def _replay_service(delivery_queue_url: str | None = None) -> ReplayService:
    return ReplayService(
        deliveries=delivery_table(),
        events=EventTable(_table(schema.EVENTS)),
        endpoints=EndpointTable(_table(schema.ENDPOINTS)),
        queue=SqsDeliveryQueue(aws.client("sqs"), delivery_queue_url or os.environ[schema.DELIVERY_QUEUE.env_var]),
        schedule=retry_schedule(),
    )


@cache
def delivery_log_service() -> DeliveryLogService:
    return DeliveryLogService(
        deliveries=delivery_table(),
        events=EventTable(_table(schema.EVENTS)),
        endpoints=EndpointTable(_table(schema.ENDPOINTS)),
        parking=_parking(),
    )


@cache
def replay_service() -> ReplayService:
    return _replay_service()


@cache
def redrive_service() -> RedriveService:
    return RedriveService(
        redrives=RedriveTable(_table(schema.REDRIVES)),
        deliveries=delivery_table(),
        endpoints=EndpointTable(_table(schema.ENDPOINTS)),
        replays=replay_service(),
        jobs=redrive_jobs(),
    )


@cache
def redrive_job_runner() -> RedriveJobRunner:
    return RedriveJobRunner(redrives=redrive_service())


def redrive_jobs() -> SqsRedriveJobs:
    return SqsRedriveJobs(aws.client("sqs"), os.environ[schema.REDRIVE_JOBS_QUEUE.env_var])


@cache
def reconciler() -> Reconciler:
    sqs = aws.client("sqs")
    return Reconciler(
        tenants=TenantTable(_table(schema.TENANTS)),
        deliveries=delivery_table(),
        events=EventTable(_table(schema.EVENTS)),
        queue=SqsDeliveryQueue(sqs, os.environ[schema.DELIVERY_QUEUE.env_var]),
        dead_letter_queue=SqsMessageSource(sqs, os.environ[schema.DEAD_LETTER_QUEUE.env_var], wait_seconds=0),
        poison_queue=SqsMessageSource(sqs, os.environ[schema.POISON_QUEUE.env_var], wait_seconds=0),
        dead_letters=_dead_letters(functions.RECONCILER.name),
    )


def operator_redrive() -> OperatorRedrive:
    """The operator's redrive of the deliveries the platform killed (scripts/redrive_dead_letters.py)."""
    return OperatorRedrive(
        tenants=TenantTable(_table(schema.TENANTS)), deliveries=delivery_table(), replays=replay_service()
    )


def auto_disable_policy() -> AutoDisablePolicy:
    return policy_from_config(
        os.environ.get(schema.AUTO_DISABLE_AFTER_DAYS), os.environ.get(schema.ENDPOINT_HEALTH_DAY_SECONDS)
    )


@cache
def auto_disable_sweeper() -> AutoDisableSweeper:
    return AutoDisableSweeper(
        endpoints=EndpointTable(_table(schema.ENDPOINTS)),
        management=endpoint_service(),
        deliveries=delivery_table(),
        notices=SnsEndpointNotices(aws.client("sns"), os.environ[schema.ENDPOINT_NOTICES_TOPIC.env_var]),
        policy=auto_disable_policy(),
    )


_FACTORIES = (
    retry_schedule,
    delivery_table,
    key_service,
    portal_session_service,
    rate_limiter,
    tenant_service,
    endpoint_service,
    ingest_service,
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
