"""Auto-disable decisions on in-memory ports, with the clock injected: the policy, the sweeper, and the failing spell
the delivery path keeps."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hookrelay.domain.clock import utcnow
from hookrelay.domain.models import Endpoint, EndpointState, FailureNotice, SigningSecret
from hookrelay.domain.signing import generate_secret
from hookrelay.services.auto_disable import (
    AutoDisablePolicy,
    AutoDisableSweeper,
    InvalidPolicy,
    policy_from_config,
)
from hookrelay.services.endpoints import EndpointService
from hookrelay.services.ports import EndpointNoticeMessage
from tests.support.delivery_world import ERROR_500, OK, TIMEOUT, World, make_world, retry
from tests.support.fakes import ConditionalEndpoints, NoDeliveries, nothing_parked

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
SINCE = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
F1, F3, OFF = FailureNotice.FAILING_1D, FailureNotice.FAILING_3D, FailureNotice.DISABLED


# --- the policy ---


@pytest.mark.parametrize(
    ("failing_for", "sent", "expected"),
    [
        (DAY - timedelta(seconds=1), None, None),
        (DAY, None, F1),
        (2 * DAY, F1, None),
        (3 * DAY, F1, F3),
        (3 * DAY, None, F3),  # a late first sweep sends the latest warning, not a backlog of them
        (4 * DAY, F3, None),
        (5 * DAY, F3, OFF),
        (5 * DAY, F1, OFF),
        (5 * DAY, None, F3),  # never disabled without a warning first: warned now, disabled on a later sweep
        (9 * DAY, OFF, None),
    ],
)
def test_the_notice_a_spell_is_owed(failing_for: timedelta, sent: FailureNotice | None, expected: object) -> None:
    assert AutoDisablePolicy().next_notice(failing_for, sent) == expected


def test_the_threshold_and_the_day_scale_the_policy_the_warnings_stay_at_1_and_3_days() -> None:
    policy = AutoDisablePolicy(disable_after_days=7, day=timedelta(seconds=10))
    assert policy.next_notice(timedelta(seconds=10), None) is F1
    assert policy.next_notice(timedelta(seconds=69), F3) is None
    assert policy.next_notice(timedelta(seconds=70), F3) is OFF


@pytest.mark.parametrize(("days", "day_seconds"), [(3, None), (2, None), (31, None), ("x", None), (5, "0"), (5, "-1")])
def test_a_policy_that_cannot_warn_before_it_disables_is_refused(days: float | str, day_seconds: str | None) -> None:
    with pytest.raises(InvalidPolicy):
        policy_from_config(days, day_seconds)


def test_the_default_policy_is_five_days_of_real_days() -> None:
    assert policy_from_config(None, None) == AutoDisablePolicy(5.0, DAY)
    assert policy_from_config("7", "86400").disable_after == 7 * DAY


# --- the sweeper ---


@dataclass
class RecordingNotices:
    published: list[EndpointNoticeMessage] = field(default_factory=list)
    failures: int = 0  # the next `failures` publishes raise

    def publish(self, message: EndpointNoticeMessage) -> None:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("SNS unreachable")
        self.published.append(message)


def failing(endpoint_id: str = "ep_1", **fields: Any) -> Endpoint:
    now = utcnow().replace(microsecond=0)
    values: dict[str, Any] = {
        "id": endpoint_id,
        "tenant_id": "tn_1",
        "url": "https://consumer.example/hook",
        "event_types": ["*"],
        "secrets": [SigningSecret(secret=generate_secret(), created_at=now)],
        "created_at": now,
        "updated_at": now,
        "failing_since": SINCE,
    }
    return Endpoint(**(values | fields))


@dataclass
class Sweep:
    endpoints: ConditionalEndpoints
    notices: RecordingNotices

    def at(self, moment: datetime) -> Any:
        sweeper = AutoDisableSweeper(
            endpoints=self.endpoints,
            management=EndpointService(self.endpoints, NoDeliveries(), nothing_parked(self.endpoints)),
            deliveries=NoDeliveries(),
            notices=self.notices,
            clock=lambda: moment,
        )
        return sweeper.sweep()

    def stored(self, endpoint_id: str = "ep_1") -> Endpoint:
        return self.endpoints.items[("tn_1", endpoint_id)]

    def kinds(self) -> list[str]:
        return [m.kind.value for m in self.notices.published]


def sweep_of(*endpoints: Endpoint) -> Sweep:
    return Sweep(ConditionalEndpoints(*endpoints), RecordingNotices())


def test_each_notice_is_sent_once_and_the_endpoint_disabled_at_the_threshold() -> None:
    sweep = sweep_of(failing())
    for hours in range(0, 6 * 24 + 1):  # every hourly sweep of six days
        sweep.at(SINCE + hours * HOUR)
    assert sweep.kinds() == ["failing_1d", "failing_3d", "disabled"]
    endpoint = sweep.stored()
    assert endpoint.state is EndpointState.DISABLED
    assert endpoint.disabled_reason == "auto: failing since 2025-03-01T12:00:00.000Z"
    [disabled_notice] = [m for m in sweep.notices.published if m.kind is OFF]
    assert disabled_notice.body["disabled"] is True and disabled_notice.tenant_id == "tn_1"


def test_the_warning_says_when_the_disable_will_come_and_what_to_do() -> None:
    sweep = sweep_of(failing())
    sweep.at(SINCE + DAY + HOUR)
    [message] = sweep.notices.published
    assert (message.tenant_id, message.endpoint_id, message.kind) == ("tn_1", "ep_1", F1)
    assert message.body["disable_at"] == "2025-03-06T12:00:00.000Z"
    assert message.body["failing_for_seconds"] == int((DAY + HOUR).total_seconds())
    assert message.body["disabled"] is False and message.body["last_failure"] is None
    assert "POST /v1/endpoints/ep_1/enable" in message.body["what_to_do"]
    assert '"status": "cancelled", "since": "2025-03-01T12:00:00.000Z"' in message.body["what_to_do"]
    assert "ep_1" in message.subject and len(message.subject) <= 100


def test_endpoints_not_yet_due_are_not_even_read() -> None:
    sweep = sweep_of(failing(), failing("ep_2", failing_since=SINCE + 2 * DAY))
    report = sweep.at(SINCE + 2 * DAY + HOUR)
    assert report.examined == 1 and [m.endpoint_id for m in sweep.notices.published] == ["ep_1"]


def test_a_notice_that_fails_to_publish_is_not_recorded_and_is_sent_by_the_next_sweep() -> None:
    sweep = sweep_of(failing(), failing("ep_2"))
    sweep.notices.failures = 1
    report = sweep.at(SINCE + DAY)
    assert [endpoint_id for endpoint_id, _ in report.unsent] == ["ep_1"]
    assert [m.endpoint_id for m in sweep.notices.published] == ["ep_2"]  # the others still went out
    assert sweep.stored("ep_1").failure_notice is None
    sweep.at(SINCE + DAY + HOUR)
    assert sorted(m.endpoint_id for m in sweep.notices.published) == ["ep_1", "ep_2"]


def test_a_disable_notice_that_fails_to_publish_leaves_the_endpoint_enabled() -> None:
    sweep = sweep_of(failing(failure_notice=F3))
    sweep.notices.failures = 1
    sweep.at(SINCE + 5 * DAY)
    assert sweep.stored().state is EndpointState.ENABLED and sweep.stored().failure_notice is F3
    sweep.at(SINCE + 5 * DAY + HOUR)
    assert sweep.stored().state is EndpointState.DISABLED and sweep.kinds() == ["disabled"]


def test_a_sweep_that_stopped_after_the_disable_notice_finishes_the_disable_without_a_second_notice() -> None:
    sweep = sweep_of(failing(failure_notice=OFF))
    report = sweep.at(SINCE + 5 * DAY + HOUR)
    assert report.disabled == ["ep_1"] and sweep.kinds() == []


def test_a_success_that_ends_the_spell_before_the_disable_keeps_the_endpoint_enabled() -> None:
    sweep = sweep_of(failing(failure_notice=F3))
    endpoints = sweep.endpoints

    def success_first() -> None:  # the delivery path ends the spell just before the disable writes
        endpoints.mark_recovered("tn_1", "ep_1")
        endpoints.before_write = None

    endpoints.before_write = success_first
    report = sweep.at(SINCE + 5 * DAY)
    assert report.disabled == [] and sweep.stored().state is EndpointState.ENABLED
    assert sweep.stored().failing_since is None


def test_enabling_after_an_auto_disable_starts_afresh() -> None:
    sweep = sweep_of(failing(failure_notice=F3))
    sweep.at(SINCE + 5 * DAY)
    service = EndpointService(sweep.endpoints, NoDeliveries(), nothing_parked(sweep.endpoints))
    enabled = service.set_enabled("tn_1", "ep_1", True)
    assert (enabled.state, enabled.failing_since, enabled.failure_notice, enabled.disabled_reason) == (
        EndpointState.ENABLED,
        None,
        None,
        None,
    )
    assert sweep.at(SINCE + 30 * DAY).examined == 0


# --- the failing spell, kept by the delivery path on transitions only ---


@pytest.fixture
def world() -> World:
    return make_world()


def test_the_first_failure_starts_the_spell_at_its_attempt_and_later_failures_keep_it(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[str] = []
    endpoints = world.endpoints
    mark_failing, mark_recovered = endpoints.mark_failing, endpoints.mark_recovered

    def counted_failing(tenant_id: str, endpoint_id: str, since: datetime) -> bool:
        writes.append("failing")
        return mark_failing(tenant_id, endpoint_id, since)

    def counted_recovered(tenant_id: str, endpoint_id: str) -> bool:
        writes.append("recovered")
        return mark_recovered(tenant_id, endpoint_id)

    monkeypatch.setattr(endpoints, "mark_failing", counted_failing)
    monkeypatch.setattr(endpoints, "mark_recovered", counted_recovered)

    started = world.clock.now
    world.script(ERROR_500, TIMEOUT, OK)
    world.service.attempt(world.message(1))
    assert endpoints.get("tn_1", "ep_1").failing_since == started
    retry(world, 2)
    assert endpoints.get("tn_1", "ep_1").failing_since == started
    retry(world, 3)
    assert endpoints.get("tn_1", "ep_1").failing_since is None
    assert writes == ["failing", "recovered"]  # one write per transition, none for the failure in between


class Died(BaseException):
    """The sweep's process died (not an Exception: nothing in the sweeper may catch it)."""


def test_a_sweep_that_dies_after_publishing_a_notice_loses_nothing_the_next_sends_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sweep = sweep_of(failing())

    def die(*args: object) -> bool:
        raise Died

    monkeypatch.setattr(sweep.endpoints, "record_notice", die)
    with pytest.raises(Died):
        sweep.at(SINCE + DAY)
    monkeypatch.undo()
    assert sweep.stored().failure_notice is None  # published, not recorded

    sweep.at(SINCE + DAY + HOUR)
    first, again = sweep.notices.published
    assert (first.kind, again.kind) == (FailureNotice.FAILING_1D, FailureNotice.FAILING_1D)
    assert first.body["notice_id"] == again.body["notice_id"]  # a subscriber drops the copy
    assert sweep.stored().failure_notice is FailureNotice.FAILING_1D
    sweep.at(SINCE + DAY + 2 * HOUR)
    assert len(sweep.notices.published) == 2
