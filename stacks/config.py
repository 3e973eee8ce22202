"""Deployment configuration read from CDK context, validated at synth time with the runtime's own code."""

from __future__ import annotations

from typing import Any

from constructs import Node

from hookrelay.domain.schedule import RetrySchedule, schedule_from_config
from hookrelay.services.auto_disable import (
    MAX_DISABLE_AFTER_DAYS,
    WARNINGS,
    AutoDisablePolicy,
    InvalidPolicy,
    policy_from_config,
)

RETRY_SCHEDULE_CONTEXT = "retry_schedule"
AUTO_DISABLE_CONTEXT = "auto_disable_after_days"
DEFAULT_RETRY_SCHEDULE = "default"


class InvalidConfiguration(ValueError):
    pass


def retry_schedule(node: Node) -> RetrySchedule:
    """The `retry_schedule` context: a profile name, a JSON list of gaps, or {gaps, repeat_every, horizon}."""
    raw: Any = node.try_get_context(RETRY_SCHEDULE_CONTEXT)
    try:
        return schedule_from_config(DEFAULT_RETRY_SCHEDULE if raw is None else raw)
    except (ValueError, TypeError) as error:  # InvalidSchedule and bad JSON are ValueErrors
        raise InvalidConfiguration(
            f"CDK context {RETRY_SCHEDULE_CONTEXT}={raw!r} is not a valid retry schedule: {error}. "
            'Use "default", "short", a JSON list of gaps in seconds starting with 0 (e.g. [0, 60, 300]), '
            'or {"gaps": [...], "repeat_every": seconds, "horizon": seconds}.'
        ) from error


def auto_disable_policy(node: Node) -> AutoDisablePolicy:
    """The `auto_disable_after_days` context: days of failure with no success before an endpoint is disabled."""
    raw: Any = node.try_get_context(AUTO_DISABLE_CONTEXT)
    if isinstance(raw, bool):  # a JSON true is not a number of days
        raw = "not a number"
    try:
        return policy_from_config(raw)
    except InvalidPolicy as error:
        raise InvalidConfiguration(
            f"CDK context {AUTO_DISABLE_CONTEXT}={raw!r} is not valid: {error}. Give a number of days after the "
            f"last warning ({WARNINGS[-1][0]:g} days) and at most {MAX_DISABLE_AFTER_DAYS:g}, "
            "e.g. -c auto_disable_after_days=7."
        ) from error
