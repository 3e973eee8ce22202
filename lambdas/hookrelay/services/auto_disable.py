"""Auto-disable of an endpoint after sustained failure, with notice before and at the disable.

What counts is *time* of total failure, not a number of failures: the endpoint record carries
`failing_since` (the first failed attempt since the last success, kept by the delivery path), and a
scheduled sweep reads only the failing endpoints, from a sparse index. A spell of failure gets a warning
at 1 and 3 days, and at the threshold (5 days by default) the disable notice, then the disable. The
notices go out on a channel that does not depend on the endpoint (SNS), each one at least once and, but for a
crash or a concurrent sweep, once: it is published, then recorded with a conditional write; a notice whose
publishing fails is not recorded, so the next sweep sends it. Each carries a `notice_id` (endpoint, spell, kind).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hookrelay.domain.clock import to_rfc3339, utcnow
from hookrelay.domain.errors import Conflict, NotFound
from hookrelay.domain.health import summarize
from hookrelay.domain.models import Endpoint, FailureNotice
from hookrelay.domain.platform_events import PlatformEventType, PlatformNotice
from hookrelay.domain.platform_events import notice as platform_notice
from hookrelay.services.endpoints import EndpointService
from hookrelay.services.ports import (
    DeliveryFilter,
    DeliverySearch,
    EndpointNoticeMessage,
    EndpointNotices,
    FailingEndpoints,
    PlatformEvents,
)

DEFAULT_DISABLE_AFTER_DAYS = 5.0
MAX_DISABLE_AFTER_DAYS = 30.0
# The warnings, in policy days: fixed, so that their names (`failing_1d`, `failing_3d`) say when they come.
WARNINGS: tuple[tuple[float, FailureNotice], ...] = ((1, FailureNotice.FAILING_1D), (3, FailureNotice.FAILING_3D))
ORDER = [FailureNotice.FAILING_1D, FailureNotice.FAILING_3D, FailureNotice.DISABLED]
LAST_FAILURE_SAMPLE = 20  # the newest deliveries read for a notice's "last failure"

WHAT_TO_DO = (
    "Fix the endpoint. If it was disabled, enable it: POST /v1/endpoints/{id}/enable. Send it a test event "
    "(POST /v1/endpoints/{id}/test): one successful delivery ends the failing spell. Then redrive what it missed: "
    'POST /v1/endpoints/{id}/redrive with {"status": "cancelled", "since": "{since}"} (events that arrived while '
    'it was disabled) and with {"status": "dead", "since": "{since}"} (deliveries whose retries ran out).'
)


class InvalidPolicy(ValueError):
    pass


@dataclass(frozen=True)
class AutoDisablePolicy:
    """When a failing spell earns each notice. `day` is a real day except in the local stack's --fast mode."""

    disable_after_days: float = DEFAULT_DISABLE_AFTER_DAYS
    day: timedelta = timedelta(days=1)

    def __post_init__(self) -> None:
        last_warning = WARNINGS[-1][0]
        if not last_warning < self.disable_after_days <= MAX_DISABLE_AFTER_DAYS:
            raise InvalidPolicy(
                f"auto-disable after {self.disable_after_days} days: it must be after the last warning "
                f"({last_warning} days) and at most {MAX_DISABLE_AFTER_DAYS:g} days"
            )
        if self.day <= timedelta(0):
            raise InvalidPolicy("a policy day must be positive")

    @property
    def disable_after(self) -> timedelta:
        return self.day * self.disable_after_days

    @property
    def first_notice_after(self) -> timedelta:
        return self.day * WARNINGS[0][0]

    def _due(self, failing_for: timedelta) -> list[FailureNotice]:
        due = [notice for days, notice in WARNINGS if failing_for >= self.day * days]
        return [*due, FailureNotice.DISABLED] if failing_for >= self.disable_after else due

    def next_notice(self, failing_for: timedelta, sent: FailureNotice | None) -> FailureNotice | None:
        """The notice this spell is owed now, if any: the most advanced one due, skipping any a late sweep missed.

        The disable is never the first notice of a spell: one that reaches the threshold unwarned (the sweeper
        was down, or the threshold changed) gets its latest warning now and is disabled on a later sweep.
        """
        due = self._due(failing_for)
        if not due:
            return None
        latest = due[-1]
        if sent is not None and ORDER.index(sent) >= ORDER.index(latest):
            return None
        if latest is FailureNotice.DISABLED and sent is None:
            return due[-2]
        return latest


def policy_from_config(
    disable_after_days: str | float | None, day_seconds: str | float | None = None
) -> AutoDisablePolicy:
    """The policy from deployment configuration (environment strings or CDK context values)."""
    try:
        days = DEFAULT_DISABLE_AFTER_DAYS if disable_after_days in (None, "") else float(disable_after_days)
        day = timedelta(days=1) if day_seconds in (None, "") else timedelta(seconds=float(day_seconds))
    except (TypeError, ValueError) as error:
        raise InvalidPolicy(f"not a number: {error}") from error
    return AutoDisablePolicy(disable_after_days=days, day=day)


@dataclass
class SweepReport:
    examined: int = 0
    notices: list[tuple[str, FailureNotice]] = field(default_factory=list)  # (endpoint id, notice) published
    disabled: list[str] = field(default_factory=list)
    not_disabled: list[tuple[str, str]] = field(default_factory=list)  # (endpoint id, why): the next sweep retries
    unsent: list[tuple[str, str]] = field(default_factory=list)  # notices that failed to publish: withdrawn, retried


@dataclass
class AutoDisableSweeper:
    endpoints: FailingEndpoints
    management: EndpointService  # the disable goes through the same path as a tenant's
    deliveries: DeliverySearch  # read for a notice's last failure
    notices: EndpointNotices
    policy: AutoDisablePolicy = field(default_factory=AutoDisablePolicy)
    clock: Callable[[], datetime] = field(default=utcnow)
    # The same notices as webhooks, to the tenant's endpoints subscribed to them (None: SNS only).
    platform_events: PlatformEvents | None = None

    def sweep(self) -> SweepReport:
        now = self.clock()
        report = SweepReport()
        for endpoint in self.endpoints.failing(since_before=now - self.policy.first_notice_after):
            report.examined += 1
            self._handle(endpoint, now, report)
        return report

    def _handle(self, endpoint: Endpoint, now: datetime, report: SweepReport) -> None:
        assert endpoint.failing_since is not None  # the index holds failing endpoints only
        if endpoint.failure_notice is FailureNotice.DISABLED:
            # Noticed by an earlier sweep that stopped before disabling: finish, without a second notice.
            self._disable(endpoint, report)
            return
        notice = self.policy.next_notice(now - endpoint.failing_since, endpoint.failure_notice)
        if notice is None:
            return
        # Emitted to the tenant, published, then recorded: if the process dies before the record, the next sweep
        # finds the notice still owed and does all three again. The webhook converges (its event and deliveries have
        # ids derived from `notice_id`: exactly one delivery per subscribed endpoint); SNS gets it at least once,
        # never lost (`notice_id` lets a subscriber drop the copy). Recorded first, a crash would lose both for good.
        try:
            message = self._message(endpoint, notice, now)
            if self.platform_events is not None:
                self.platform_events.emit(_as_platform_event(message))
            self.notices.publish(message)
        except Exception as error:  # any failure: nothing recorded, go on with the others, report it
            report.unsent.append((endpoint.id, f"{type(error).__name__}: {error}"))
            return
        if not self.endpoints.record_notice(endpoint, notice):
            return  # another sweep recorded it meanwhile (the notice went out twice), or the spell ended
        report.notices.append((endpoint.id, notice))
        if notice is FailureNotice.DISABLED:
            self._disable(endpoint, report)

    def _disable(self, endpoint: Endpoint, report: SweepReport) -> None:
        assert endpoint.failing_since is not None
        reason = f"auto: failing since {to_rfc3339(endpoint.failing_since)}"
        try:
            disabled = self.management.disable_failing(endpoint.tenant_id, endpoint.id, endpoint.failing_since, reason)
        except (NotFound, Conflict) as error:  # gone, or busy: the next sweep tries again if it is still failing
            report.not_disabled.append((endpoint.id, str(error)))
            return
        if disabled:
            report.disabled.append(endpoint.id)

    def _message(self, endpoint: Endpoint, notice: FailureNotice, now: datetime) -> EndpointNoticeMessage:
        assert endpoint.failing_since is not None
        failing_for = now - endpoint.failing_since
        disable_at = endpoint.failing_since + self.policy.disable_after
        body: dict[str, Any] = {
            "notice_id": notice_id(endpoint, notice),
            "kind": notice.value,
            "tenant_id": endpoint.tenant_id,
            "endpoint_id": endpoint.id,
            "url": endpoint.url,
            "failing_since": to_rfc3339(endpoint.failing_since),
            "failing_for_seconds": int(failing_for.total_seconds()),
            "disabled": notice is FailureNotice.DISABLED,
            "disable_at": to_rfc3339(now if notice is FailureNotice.DISABLED else max(disable_at, now)),
            "last_failure": self._last_failure(endpoint, now),
            "what_to_do": WHAT_TO_DO.replace("{id}", endpoint.id).replace(
                "{since}", to_rfc3339(endpoint.failing_since)
            ),
            "sent_at": to_rfc3339(now),
        }
        return EndpointNoticeMessage(
            tenant_id=endpoint.tenant_id,
            endpoint_id=endpoint.id,
            kind=notice,
            subject=_subject(endpoint, notice, failing_for, self.policy.day),
            body=body,
        )

    def _last_failure(self, endpoint: Endpoint, now: datetime) -> dict[str, Any] | None:
        where = DeliveryFilter(tenant_id=endpoint.tenant_id, endpoint_id=endpoint.id)
        page = self.deliveries.find(where, LAST_FAILURE_SAMPLE, None, now)
        failure = summarize(page.deliveries, now, older_not_sampled=False).last_failure
        if failure is None:  # its deliveries have left the window the sample covers
            return None
        attempt = failure.attempt
        return {
            "at": to_rfc3339(attempt.started_at),
            "delivery_id": failure.delivery_id,
            "status_code": attempt.status_code,
            "error": attempt.error.value if attempt.error else None,
        }


def notice_id(endpoint: Endpoint, notice: FailureNotice) -> str:
    """The same for every copy of one notice (one endpoint, one failing spell, one kind): what subscribers dedup on."""
    assert endpoint.failing_since is not None
    return f"{endpoint.id}:{to_rfc3339(endpoint.failing_since)}:{notice.value}"


def _as_platform_event(message: EndpointNoticeMessage) -> PlatformNotice:
    """The SNS notice as the tenant's webhook: the same facts, less the platform team's routing fields."""
    body = message.body
    spell: dict[str, Any] = {
        "endpoint_id": message.endpoint_id,
        "url": body["url"],
        "failing_since": body["failing_since"],
        "failing_for_seconds": body["failing_for_seconds"],
        "notice_id": body["notice_id"],
        "last_failure": body["last_failure"],
    }
    if message.kind is FailureNotice.DISABLED:
        kind, extra = PlatformEventType.ENDPOINT_DISABLED, {"disabled_at": body["disable_at"]}
        reason = f"failing since {body['failing_since']}: disabled; enable it, then redrive what it missed"
    else:
        kind, extra = (
            PlatformEventType.ENDPOINT_FAILING,
            {"notice": message.kind.value, "disable_at": body["disable_at"]},
        )
        reason = f"every delivery has failed since {body['failing_since']}"
    return platform_notice(
        message.tenant_id, kind, about=message.endpoint_id, key=str(body["notice_id"]), reason=reason, **spell, **extra
    )


def _subject(endpoint: Endpoint, notice: FailureNotice, failing_for: timedelta, day: timedelta) -> str:
    days = failing_for / day
    if notice is FailureNotice.DISABLED:
        return f"Webhook endpoint {endpoint.id} disabled after {days:.1f} days of failed deliveries"
    return f"Webhook endpoint {endpoint.id} failing for {days:.1f} days"
