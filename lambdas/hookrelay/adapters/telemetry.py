"""Powertools logs and metrics for what services report beside their records."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from hookrelay.domain.status import DeliveryStatus

# The CloudWatch namespace of every function's metrics (Powertools EMF) and of the stack's alarms on them.
METRICS_NAMESPACE = "Hookrelay"


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
