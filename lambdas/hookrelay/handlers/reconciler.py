"""The reconciler: every 5 minutes, send what was recorded and never enqueued, and surface dead letters.

Runs that failed are caught up by the next (services/reconcile.py); an operator catching up after the function failed
for more than a day invokes it with `{"lookback_minutes": N}`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from hookrelay import wiring
from hookrelay.adapters.telemetry import METRICS_NAMESPACE
from hookrelay.domain.clock import to_rfc3339
from hookrelay.functions import RECONCILER
from hookrelay.handlers import tracing

logger = Logger(service=RECONCILER.name)
tracer = tracing.tracer(RECONCILER.name)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=RECONCILER.name)
RESENT_METRIC = "StrandedDeliveriesResent"


@logger.inject_lambda_context
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    minutes = event.get("lookback_minutes") if isinstance(event, dict) else None
    lookback = timedelta(minutes=float(minutes)) if isinstance(minutes, int | float) and minutes > 0 else None
    report = wiring.reconciler().run(lookback)
    metrics.add_metric(name=RESENT_METRIC, unit=MetricUnit.Count, value=len(report.resent))
    summary = {
        "examined": report.examined,
        "resent": report.resent[:20],
        "surfaced": [f"{delivery_id}:{reason.value}" for delivery_id, reason in report.surfaced[:20]],
        "deleted": report.deleted,
        "kept": report.kept[:20],
        "redrives": report.redrives[:20],
        "spans": [f"{to_rfc3339(since)}/{to_rfc3339(until)}" for since, until in report.spans],
    }
    if report.skipped_before is not None:  # further behind than a run catches up: the runbook's look back
        summary["skipped_before"] = to_rfc3339(report.skipped_before)
    logger.info("reconciled", extra=summary)
    return {"examined": report.examined, "resent": len(report.resent), "surfaced": len(report.surfaced)}
