"""Powertools logs and metrics for what services report beside their records."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from hookrelay.domain.models import Delivery
from hookrelay.domain.status import DeadReason, DeliveryStatus

# The CloudWatch namespace of every function's metrics (Powertools EMF) and of the stack's alarms on them.
METRICS_NAMESPACE = "Hookrelay"


def dead_metric(reason: DeadReason) -> str:
    """The count of deliveries that died for `reason` (the platform's own failures alarmed, the others graphed)."""
    return f"DeliveriesDead_{reason.value}"


def attempts_metric(status: DeliveryStatus) -> str:
    """The count of attempts that left a delivery in `status`: emitted by the delivery handler, graphed by the
    stack's dashboard."""
    return f"Attempts_{status.value}"


class PowertoolsTelemetry:
    """Logs through the function's logger and counts into the metrics its handler flushes (both shared by
    service name and namespace, so these reach the same log lines and EMF blob as the handler's own)."""

    def __init__(self, service: str) -> None:
        self.logger = Logger(service=service)
        self.metrics = Metrics(service=service)

    def bookkeeping_failed(self, metric: str, delivery_id: str, error: Exception) -> None:
        self.logger.error(f"{metric}: carrying on", exc_info=error, extra={"delivery_id": delivery_id})
        self.metrics.add_metric(name=metric, unit=MetricUnit.Count, value=1)

    def count(self, metric: str, value: int = 1) -> None:
        self.metrics.add_metric(name=metric, unit=MetricUnit.Count, value=value)


class DeadLetterTelemetry:
    """Each death, once recorded: a log line naming the delivery and a count per reason (never a queue message)."""

    def __init__(self, telemetry: PowertoolsTelemetry) -> None:
        self.telemetry = telemetry

    def publish(self, delivery: Delivery, reason: DeadReason) -> None:
        last = delivery.attempts[-1] if delivery.attempts else None
        self.telemetry.logger.info(
            "delivery dead",
            extra={
                "delivery_id": delivery.id,
                "tenant_id": delivery.tenant_id,
                "endpoint_id": delivery.endpoint_id,
                "reason": reason.value,
                "attempts": delivery.attempt_count,
                "last_status_code": last.status_code if last else None,
            },
        )
        self.telemetry.count(dead_metric(reason))
