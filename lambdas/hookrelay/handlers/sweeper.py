"""The auto-disable sweeper: on a schedule, warn about failing endpoints and disable those failing too long."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from hookrelay import wiring
from hookrelay.adapters.telemetry import METRICS_NAMESPACE
from hookrelay.functions import SWEEPER
from hookrelay.handlers import tracing

logger = Logger(service=SWEEPER.name)
tracer = tracing.tracer(SWEEPER.name)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=SWEEPER.name)


@logger.inject_lambda_context
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    circuits = wiring.circuit_service().sweep()
    metrics.add_metric(name="OpenCircuits", unit=MetricUnit.Count, value=circuits.examined)
    metrics.add_metric(name="ParkedDeliveries", unit=MetricUnit.Count, value=circuits.parked)
    if circuits.restarted:
        logger.warning("probe workflows restarted", extra={"endpoint_ids": circuits.restarted})
    report = wiring.auto_disable_sweeper().sweep()
    metrics.add_metric(name="FailingEndpoints", unit=MetricUnit.Count, value=report.examined)
    metrics.add_metric(name="EndpointNoticesSent", unit=MetricUnit.Count, value=len(report.notices))
    metrics.add_metric(name="EndpointsAutoDisabled", unit=MetricUnit.Count, value=len(report.disabled))
    for endpoint_id, notice in report.notices:
        logger.info("endpoint notice sent", extra={"endpoint_id": endpoint_id, "kind": notice.value})
    for endpoint_id, why in report.not_disabled:
        logger.warning("endpoint not disabled yet", extra={"endpoint_id": endpoint_id, "reason": why})
    summary = {"examined": report.examined, "notices": len(report.notices), "disabled": report.disabled}
    logger.info("endpoint health sweep", extra=summary)
    if report.unsent:
        # Not recorded, so the next sweep sends them; failing the invocation raises the function's Errors alarm.
        raise NoticesNotSent(f"{len(report.unsent)} notices could not be published: {report.unsent[:5]}")
    return summary


class NoticesNotSent(RuntimeError):
    pass
