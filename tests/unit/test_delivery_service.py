"""The delivery service against in-memory ports: the response table, the schedule, and the hand-over to
the retry workflow (started only on a first retryable failure, answered on every later attempt)."""

from __future__ import annotations

import io
import json
import logging
import re
import threading
from dataclasses import replace
from datetime import timedelta

import pytest

from hookrelay.adapters import schema
from hookrelay.adapters.stepfunctions import EXECUTION_NAME_MAX, execution_name
from hookrelay.adapters.telemetry import METRICS_NAMESPACE, PowertoolsTelemetry
from hookrelay.domain.clock import RETENTION_DAYS, epoch_seconds
from hookrelay.domain.envelope import retry_group_id
from hookrelay.domain.lifecycle import may_stay_unstored, new_delivery, new_event
from hookrelay.domain.models import Delivery, EndpointState
from hookrelay.domain.status import DeadReason, DeliveryStatus
from hookrelay.services.auto_disable import DEFAULT_DISABLE_AFTER_DAYS
from hookrelay.services.delivery import EARLY_WAKE_TOLERANCE, FAILING_SPELL_ERRORS, LATE_CLAIM_ERRORS
from hookrelay.services.ports import DeliveryMessage, SendResult, Unclaimed
from tests.support.delivery_world import ERROR_500, NOT_FOUND, OK, SCHEDULE, TIMEOUT, World, make_world, retry


@pytest.fixture
def world() -> World:
    return make_world()


def test_a_first_time_success_is_delivered_and_starts_no_workflow(world: World) -> None:
    world.script(OK)
    report = world.service.attempt(world.message(1))

    assert report.status is DeliveryStatus.DELIVERED and report.sent
    delivery = world.current()
    assert delivery.status is DeliveryStatus.DELIVERED and [a.number for a in delivery.attempts] == [1]
    assert delivery.expires_at == epoch_seconds(delivery.completed_at + timedelta(days=RETENTION_DAYS))
    assert world.workflow.started == [] and world.workflow.reports == []
    assert world.events.extensions == []  # the event already outlives the delivery by 30 days


def test_a_first_retryable_failure_starts_the_workflow_for_the_next_attempt(world: World) -> None:
    world.script(ERROR_500)
    world.service.attempt(world.message(1))

    [ticket] = world.workflow.started
    delivery = world.current()
    assert delivery.status is DeliveryStatus.RETRYING
    # Its own message group: a retry is due at its time, never behind the endpoint's backlog of first attempts.
    assert (ticket.delivery_id, ticket.attempt, ticket.group_id) == ("dlv_1", 2, retry_group_id("dlv_1"))
    assert ticket.next_attempt_at == delivery.next_attempt_at
    offset = (ticket.next_attempt_at - delivery.first_attempt_at).total_seconds()
    assert 9 <= offset <= 11  # attempt 2 is planned 10 s ± 10% after the first


def test_fail_fail_succeed_answers_each_task_token(world: World) -> None:
    world.script(ERROR_500, TIMEOUT, OK)
    world.service.attempt(world.message(1))
    retry(world, 2)
    retry(world, 3)

    assert [(token, status) for token, status, _ in world.workflow.reports] == [
        ("token-2", DeliveryStatus.RETRYING),
        ("token-3", DeliveryStatus.DELIVERED),
    ]
    assert world.workflow.reports[0][2].attempt == 3
    delivery = world.current()
    assert delivery.status is DeliveryStatus.DELIVERED
    assert [(a.status_code, a.error) for a in delivery.attempts] == [(500, None), (None, "timeout"), (200, None)]
    assert len(world.workflow.started) == 1 and world.dead_letters.published == []


def test_always_500_is_dead_after_the_schedule_with_a_dead_letter(world: World) -> None:
    world.script(*[ERROR_500] * SCHEDULE.max_attempts)
    world.service.attempt(world.message(1))
    for attempt in range(2, SCHEDULE.max_attempts + 1):
        retry(world, attempt)

    delivery = world.current()
    assert delivery.status is DeliveryStatus.DEAD and delivery.attempt_count == SCHEDULE.max_attempts == 4
    assert world.workflow.reports[-1][1:] == (DeliveryStatus.DEAD, None)
    [dead] = world.dead_letters.published
    assert [a.number for a in dead.attempts] == [1, 2, 3, 4]  # the full history, the last attempt included
    assert dead.attempts[-1].status_code == 500 and dead.completed_at == delivery.completed_at
    assert delivery.expires_at == epoch_seconds(delivery.completed_at + timedelta(days=RETENTION_DAYS))


def test_a_hard_failure_is_dead_after_exactly_three_attempts(world: World) -> None:
    world.script(NOT_FOUND, NOT_FOUND, NOT_FOUND)
    world.service.attempt(world.message(1))
    retry(world, 2)
    retry(world, 3)

    assert world.current().status is DeliveryStatus.DEAD
    assert len(world.sender.sent) == 3 < SCHEDULE.max_attempts
    assert world.dead_letters.published[0].attempts[-1].status_code == 404


def test_a_hard_failure_after_the_cap_ends_at_once(world: World) -> None:
    world.script(ERROR_500, ERROR_500, ERROR_500, NOT_FOUND)
    world.service.attempt(world.message(1))
    for attempt in (2, 3):
        retry(world, attempt)
    assert world.current().status is DeliveryStatus.RETRYING  # 5xx keep the full schedule
    retry(world, 4)
    assert world.current().status is DeliveryStatus.DEAD


@pytest.mark.parametrize(("status", "header"), [(429, "25"), (503, "Fri, 07 Mar 2025 18:00:25 GMT")])
def test_retry_after_on_429_and_503_pushes_the_next_attempt_later(world: World, status: int, header: str) -> None:
    world.script(SendResult(status, 0, retry_after=header))
    world.service.attempt(world.message(1))

    delivery = world.current()
    assert delivery.next_attempt_at >= world.clock.now + timedelta(seconds=25)
    assert delivery.attempts[0].retry_after == 25


def test_retry_after_is_capped(world: World) -> None:
    world.script(SendResult(429, 0, retry_after="3600"))
    world.service.attempt(world.message(1))
    assert world.current().next_attempt_at == world.clock.now + timedelta(seconds=SCHEDULE.retry_after_cap)


def test_retry_after_on_other_statuses_is_ignored(world: World) -> None:
    world.script(SendResult(500, 0, retry_after="25"))
    world.service.attempt(world.message(1))
    assert world.current().next_attempt_at <= world.clock.now + timedelta(seconds=11)
    assert world.current().attempts[0].retry_after is None


def test_an_early_wake_up_is_waited_out(world: World) -> None:
    world.script(ERROR_500, OK)
    world.service.attempt(world.message(1))
    due = world.current().next_attempt_at
    world.clock.now = due - timedelta(seconds=1.5)  # Step Functions woke the workflow a little early

    world.service.attempt(world.message(2, token="token-2"))

    assert world.clock.slept == [1.5]
    assert world.current().attempts[-1].started_at >= due


def test_an_early_wake_up_is_waited_out_only_within_the_tolerance(world: World) -> None:
    world.script(ERROR_500, OK)
    world.service.attempt(world.message(1))
    world.clock.now = world.current().next_attempt_at - timedelta(seconds=9)
    world.service.attempt(world.message(2, token="token-2"))
    assert world.clock.slept == [EARLY_WAKE_TOLERANCE.total_seconds()]


def test_a_duplicate_message_sends_nothing(world: World) -> None:
    world.script(OK)
    world.service.attempt(world.message(1))
    report = world.service.attempt(world.message(1))
    assert not report.sent and len(world.sender.sent) == 1


def test_a_resent_attempt_already_made_is_answered_with_the_current_state(world: World) -> None:
    world.script(ERROR_500, ERROR_500)
    world.service.attempt(world.message(1))
    retry(world, 2)  # made and recorded; suppose its answer to token-2 was lost and the workflow re-sent

    report = world.service.attempt(world.message(2, token="token-2-resend"))

    assert not report.sent and len(world.sender.sent) == 2
    token, status, ticket = world.workflow.reports[-1]
    assert (token, status, ticket.attempt) == ("token-2-resend", DeliveryStatus.RETRYING, 3)
    assert ticket.next_attempt_at == world.current().next_attempt_at


def test_a_resent_attempt_in_flight_elsewhere_is_left_to_time_out(world: World) -> None:
    world.script(ERROR_500)
    world.service.attempt(world.message(1))
    world.clock.now = world.current().next_attempt_at
    world.deliveries.claim("dlv_1", "tn_1", 2, world.clock.now, world.clock.now)  # another worker holds it

    report = world.service.attempt(world.message(2, token="token-2-resend"))

    assert report.status is DeliveryStatus.ATTEMPTING and not report.sent
    assert world.workflow.reports == []


def test_a_first_attempt_redelivered_after_a_crash_starts_the_lost_workflow(world: World) -> None:
    world.script(ERROR_500)
    world.workflow.start = lambda ticket: (_ for _ in ()).throw(RuntimeError("crashed before starting"))
    with pytest.raises(RuntimeError):
        world.service.attempt(world.message(1))
    del world.workflow.start  # the Lambda is retried by SQS, and this time the start goes through

    world.service.attempt(world.message(1))

    [ticket] = world.workflow.started
    assert ticket.attempt == 2 and len(world.sender.sent) == 1


def test_a_stale_first_attempt_message_starts_nothing(world: World) -> None:
    world.script(ERROR_500, ERROR_500)
    world.service.attempt(world.message(1))
    retry(world, 2)
    world.workflow.started.clear()

    world.service.attempt(world.message(1))

    assert world.workflow.started == []


def test_a_message_for_a_missing_delivery_fails_its_task(world: World) -> None:
    del world.deliveries.items["dlv_1"]
    report = world.service.attempt(world.message(2, token="token-2"))
    assert report.status is None and world.workflow.failures == [("token-2", report.delivery_id)]


def test_a_disabled_endpoint_cancels_and_ends_the_workflow(world: World) -> None:
    world.script(ERROR_500)
    world.service.attempt(world.message(1))
    endpoint = world.endpoints.get("tn_1", "ep_1")
    world.endpoints.put(replace(endpoint, state=EndpointState.DISABLED))
    retry(world, 2)

    assert world.current().status is DeliveryStatus.CANCELLED and world.current().expires_at is not None
    assert world.workflow.reports == [("token-2", DeliveryStatus.CANCELLED, None)]
    assert len(world.sender.sent) == 1


def test_a_delivery_that_ends_after_its_event_would_expire_extends_the_event(world: World) -> None:
    world.script(ERROR_500)
    world.events.items["evt_1"] = replace(world.event, expires_at=epoch_seconds(world.clock.now))
    world.service.attempt(world.message(1))
    world.script(*[ERROR_500] * 3)
    for attempt in (2, 3, 4):
        retry(world, attempt)

    ended = world.current().completed_at
    assert world.events.items["evt_1"].expires_at == epoch_seconds(ended + timedelta(days=RETENTION_DAYS))


# --- The failing spell's bookkeeping never fails the message ---


@pytest.mark.parametrize("failing_write", ["mark_failing", "mark_recovered"])
def test_an_error_in_the_failing_spell_bookkeeping_is_counted_not_raised(world: World, failing_write: str) -> None:
    world.script(ERROR_500, OK)
    broken = RuntimeError("endpoints table throttled")

    def refuse(*args: object) -> bool:
        raise broken

    setattr(world.endpoints, failing_write, refuse)
    world.service.attempt(world.message(1))  # a failure while healthy: mark_failing
    retry(world, 2)  # a success: mark_recovered, if the spell was started

    delivery = world.current()
    assert [a.status_code for a in delivery.attempts] == [500, 200] and delivery.status is DeliveryStatus.DELIVERED
    assert len(world.workflow.started) == 1 and world.workflow.reports[-1][:2] == ("token-2", DeliveryStatus.DELIVERED)
    assert world.telemetry.errors == [(FAILING_SPELL_ERRORS, "dlv_1", broken)]


# --- A task token that died: the workflow is resumed, never stranded ---


def test_an_attempt_answered_to_a_dead_token_resumes_the_workflow(world: World) -> None:
    world.script(ERROR_500, ERROR_500)
    world.service.attempt(world.message(1))
    world.workflow.dead_tokens.add("token-2")  # its task timed out, and the execution has given up since
    retry(world, 2)  # a stale message: the attempt is still made and recorded

    delivery = world.current()
    assert delivery.status is DeliveryStatus.RETRYING and delivery.attempt_count == 2
    [resumed] = world.workflow.resumed
    assert (resumed.delivery_id, resumed.attempt, resumed.next_attempt_at) == ("dlv_1", 3, delivery.next_attempt_at)


def test_a_live_token_or_an_ended_delivery_resumes_nothing(world: World) -> None:
    world.script(ERROR_500, ERROR_500, OK)
    world.service.attempt(world.message(1))
    retry(world, 2)  # answered to a live token
    world.workflow.dead_tokens.add("token-3")
    retry(world, 3)  # delivered: a dead token has nothing to carry on

    assert world.current().status is DeliveryStatus.DELIVERED
    assert world.workflow.resumed == []


def test_a_resent_message_for_the_latest_attempt_resumes_a_dead_workflow(world: World) -> None:
    world.script(ERROR_500, ERROR_500)
    world.service.attempt(world.message(1))
    retry(world, 2)  # answered; then suppose that answer was lost, and the re-send is consumed too late
    world.workflow.dead_tokens.add("token-2-resend")

    world.service.attempt(world.message(2, token="token-2-resend"))

    [resumed] = world.workflow.resumed
    assert resumed.attempt == 3 and len(world.sender.sent) == 2


def test_a_resent_message_for_an_older_attempt_resumes_nothing(world: World) -> None:
    world.script(ERROR_500, ERROR_500, ERROR_500)
    world.service.attempt(world.message(1))
    retry(world, 2)
    retry(world, 3)  # whoever made attempt 3 handed over
    world.workflow.dead_tokens.add("token-2-resend")

    world.service.attempt(world.message(2, token="token-2-resend"))

    assert world.workflow.resumed == []


# --- The hard-failure cap counts every attempt once one has failed hard ---


def test_after_a_hard_failure_the_delivery_is_dead_at_the_third_attempt_whatever_follows(world: World) -> None:
    world.script(NOT_FOUND, ERROR_500, ERROR_500)
    world.service.attempt(world.message(1))
    retry(world, 2)
    assert world.current().status is DeliveryStatus.RETRYING
    retry(world, 3)

    assert world.current().status is DeliveryStatus.DEAD and world.current().attempt_count == 3 < SCHEDULE.max_attempts
    [dead] = world.dead_letters.published
    assert [a.status_code for a in dead.attempts] == [404, 500, 500]


# --- The dead letter goes out once, even when the worker dies before it ---


def always_500_until_the_last_attempt(world: World) -> None:
    world.script(*[ERROR_500] * SCHEDULE.max_attempts)
    world.service.attempt(world.message(1))
    for attempt in range(2, SCHEDULE.max_attempts):
        retry(world, attempt)


def test_a_dead_delivery_notes_its_dead_letter(world: World) -> None:
    always_500_until_the_last_attempt(world)
    retry(world, SCHEDULE.max_attempts)

    assert world.current().status is DeliveryStatus.DEAD and world.current().dead_lettered_at is not None
    assert len(world.dead_letters.published) == 1
    world.service.attempt(world.message(SCHEDULE.max_attempts, token="token-resend"))  # received again
    assert len(world.dead_letters.published) == 1


def test_a_death_whose_worker_died_before_recording_it_is_recorded_by_the_redelivered_message(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    always_500_until_the_last_attempt(world)
    last = SCHEDULE.max_attempts

    def crash(*args: object) -> bool:
        raise RuntimeError("worker died")

    monkeypatch.setattr(world.deliveries, "mark_dead_lettered", crash)
    with pytest.raises(RuntimeError):
        retry(world, last)
    assert world.current().status is DeliveryStatus.DEAD and world.current().dead_lettered_at is None
    monkeypatch.undo()

    world.service.attempt(world.message(1))  # a stale message for an older attempt: not the one that killed it
    assert world.dead_letters.published == []
    world.service.attempt(world.message(last, token=f"token-{last}"))  # SQS redelivers the message

    [dead] = world.dead_letters.published
    assert dead.id == "dlv_1" and [a.number for a in dead.attempts] == list(range(1, last + 1))
    assert world.current().dead_lettered_at is not None and world.current().dead_reason is DeadReason.EXHAUSTED
    assert world.workflow.reports[-1][:2] == (f"token-{last}", DeliveryStatus.DEAD)
    world.service.attempt(world.message(last, token=f"token-{last}"))
    assert len(world.dead_letters.published) == 1


def test_the_delivery_queue_keeps_a_first_attempt_until_auto_disable_and_beyond() -> None:
    # A first attempt queued behind a hanging endpoint's backlog must outlive the 5 days before it is disabled.
    assert schema.DELIVERY_QUEUE.retention_seconds == 14 * 24 * 3600  # SQS's maximum
    assert schema.DELIVERY_QUEUE.retention_seconds > DEFAULT_DISABLE_AFTER_DAYS * 24 * 3600


def test_the_powertools_telemetry_logs_the_delivery_and_counts_the_metric(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", METRICS_NAMESPACE)
    telemetry = PowertoolsTelemetry(service="delivery")
    # The service's logger is shared with the handler's, whose stream was bound when it was first imported;
    # read what it formats through a stream of our own instead of whatever stdout was then.
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(telemetry.logger.registered_formatter)
    telemetry.logger.addHandler(handler)
    try:
        telemetry.bookkeeping_failed(FAILING_SPELL_ERRORS, "dlv_1", RuntimeError("throttled"))
        assert telemetry.metrics.metric_set[FAILING_SPELL_ERRORS]["Value"] == [1.0]
    finally:
        telemetry.metrics.clear_metrics()
        telemetry.logger.removeHandler(handler)
    [line] = [json.loads(line) for line in stream.getvalue().splitlines() if "dlv_1" in line]
    assert line["delivery_id"] == "dlv_1" and line["level"] == "ERROR" and "throttled" in line["exception"]


@pytest.mark.parametrize("delivery_id", ["dlv_01JNRZ7F0E9A4Y5M3K8Q2W6T1B", "d" * 100, "odd id/with:chars"])
def test_fresh_executions_are_named_after_the_delivery_and_attempt_within_step_functions_rules(
    delivery_id: str,
) -> None:
    name = execution_name(delivery_id, 11)
    assert name.endswith("-11") and len(name) <= EXECUTION_NAME_MAX
    assert re.fullmatch(r"[A-Za-z0-9_-]+", name) and execution_name(delivery_id) != name
    assert execution_name(delivery_id, 11) == name  # the same every time: a second start is refused


# --- A first attempt off the queue: settled by one write, claimed only when it runs long (domain/lifecycle.py) ---


class Died(BaseException):
    """The process died here (a BaseException, as tests/support/crash.py's: nothing in the service catches it)."""


def _claims(world: World) -> list[DeliveryStatus]:
    """Record each claim call, with the delivery's status as the claim found it."""
    seen: list[DeliveryStatus] = []
    claim = world.deliveries.claim

    def recording(*args: object, **kwargs: object) -> object:
        seen.append(world.current().status)
        return claim(*args, **kwargs)  # type: ignore[arg-type]

    world.deliveries.claim = recording  # type: ignore[method-assign]
    return seen


def _sender_waiting_for_the_claim(world: World, seen: list[DeliveryStatus], then: SendResult | None) -> None:
    """A send that answers only once the delivery is claimed (noting its status then): an attempt running long.
    `then` None: the process dies during the send instead."""
    claimed = threading.Event()
    claim = world.deliveries.claim

    def claim_and_signal(*args: object, **kwargs: object) -> object:
        try:
            return claim(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            claimed.set()

    def send(url: str, headers: dict[str, str], body: bytes) -> SendResult:
        assert claimed.wait(timeout=30), "the late claim was never made"
        seen.append(world.current().status)
        if then is None:
            raise Died
        return then

    world.deliveries.claim = claim_and_signal  # type: ignore[method-assign]
    world.sender.send = send  # type: ignore[method-assign]
    world.service.claim_after = timedelta(0)


def test_a_first_attempt_answered_in_time_is_claimed_and_recorded_by_one_write(world: World) -> None:
    world.service.claim_after = timedelta(hours=1)  # "in time", however slow the machine running the test
    claims = _claims(world)
    world.script(OK)

    report = world.service.attempt(world.message(1))

    assert report.status is DeliveryStatus.DELIVERED and claims == []
    delivery = world.current()
    assert (delivery.attempt_count, [a.number for a in delivery.attempts]) == (1, [1])
    assert delivery.first_attempt_at == delivery.attempts[0].started_at and delivery.claimed_at is None


@pytest.mark.parametrize("behind", ["missing", "another tenant's as read"])
def test_a_first_attempt_reads_its_delivery_again_consistently_when_the_eventually_consistent_read_is_behind(
    world: World, behind: str
) -> None:
    world.script(OK)
    world.deliveries.behind[world.delivery.id] = (
        None if behind == "missing" else replace(world.delivery, tenant_id="ten_other")
    )
    report = world.service.attempt(world.message(1))

    assert report.status is DeliveryStatus.DELIVERED and len(world.sender.sent) == 1
    assert world.current().status is DeliveryStatus.DELIVERED


def test_a_first_attempt_of_a_delivery_already_delivered_sends_nothing(world: World) -> None:
    world.script(OK, OK)
    world.service.attempt(world.message(1))
    world.service.attempt(world.message(1))  # the message again (after its visibility timeout): both reads say done

    assert len(world.sender.sent) == 1 and world.current().attempt_count == 1


def test_retries_are_claimed_before_they_are_sent(world: World) -> None:
    world.service.claim_after = timedelta(hours=1)
    world.script(ERROR_500, OK)
    world.service.attempt(world.message(1))
    claims = _claims(world)

    retry(world, 2)

    assert claims == [DeliveryStatus.RETRYING] and world.current().status is DeliveryStatus.DELIVERED


def test_a_first_attempt_running_long_is_seen_attempting_then_settled(world: World) -> None:
    during: list[DeliveryStatus] = []
    _sender_waiting_for_the_claim(world, during, then=OK)

    report = world.service.attempt(world.message(1))

    assert during == [DeliveryStatus.ATTEMPTING]
    assert report.status is DeliveryStatus.DELIVERED and world.current().claimed_at is None
    assert [a.number for a in world.current().attempts] == [1]


@pytest.mark.parametrize("applied", [False, True], ids=["not-applied", "applied-then-erred"])
def test_a_late_claim_that_errs_is_counted_and_the_settle_accepts_either_outcome(world: World, applied: bool) -> None:
    claim = world.deliveries.claim

    def failing(*args: object, **kwargs: object) -> object:
        if applied:
            claim(*args, **kwargs)  # type: ignore[arg-type]
        raise RuntimeError("throttled")

    world.deliveries.claim = failing  # type: ignore[method-assign]
    world.service.claim_after = timedelta(0)
    release = threading.Event()
    world.sender.send = lambda url, headers, body: (release.wait(30), OK)[1]  # type: ignore[method-assign]
    world.telemetry.bookkeeping_failed = lambda metric, delivery_id, error: (  # type: ignore[method-assign]
        world.telemetry.errors.append((metric, delivery_id, error)),
        release.set(),
    )

    report = world.service.attempt(world.message(1))

    assert report.status is DeliveryStatus.DELIVERED and report.sent
    assert [metric for metric, _, _ in world.telemetry.errors] == [LATE_CLAIM_ERRORS]
    assert world.current().status is DeliveryStatus.DELIVERED and world.current().attempt_count == 1


def test_crash_after_the_send_before_the_settle_leaves_it_queued_and_the_message_back_sends_again(
    world: World,
) -> None:
    world.service.claim_after = timedelta(hours=1)
    world.script(OK, OK)
    record = world.deliveries.record_attempt
    world.deliveries.record_attempt = lambda *a, **k: (_ for _ in ()).throw(Died())  # type: ignore[method-assign]
    with pytest.raises(Died):
        world.service.attempt(world.message(1))
    assert (world.current().status, world.current().attempt_count) == (DeliveryStatus.QUEUED, 0)
    world.deliveries.record_attempt = record  # type: ignore[method-assign]

    world.service.attempt(world.message(1))  # the message, back after its visibility timeout

    assert len(world.sender.sent) == 2 and world.current().status is DeliveryStatus.DELIVERED


def test_crash_after_the_late_claim_leaves_it_attempting_until_the_message_back_takes_the_stale_claim_over(
    world: World,
) -> None:
    during: list[DeliveryStatus] = []
    _sender_waiting_for_the_claim(world, during, then=None)
    with pytest.raises(Died):
        world.service.attempt(world.message(1))
    assert (world.current().status, world.current().attempt_count) == (DeliveryStatus.ATTEMPTING, 1)

    # Back before the claim is stale (it cannot be, as the visibility timeout is sized, but a duplicate could):
    # nothing is sent.
    del world.sender.send  # the scripted sender again
    assert not world.service.attempt(world.message(1)).sent
    world.clock.advance(schema.DELIVERY_VISIBILITY_TIMEOUT_SECONDS)
    world.script(OK)
    world.service.claim_after = timedelta(hours=1)

    report = world.service.attempt(world.message(1))

    assert report.sent and report.status is DeliveryStatus.DELIVERED
    assert [a.number for a in world.current().attempts] == [1]


def test_crash_before_the_late_claim_leaves_it_queued(world: World) -> None:
    world.service.claim_after = timedelta(0)
    release = threading.Event()
    world.sender.send = lambda url, headers, body: (release.wait(30), OK)[1]  # type: ignore[method-assign]
    world.deliveries.claim = lambda *a, **k: (release.set(), (_ for _ in ()).throw(Died()))  # type: ignore[method-assign]
    with pytest.raises(Died):
        world.service.attempt(world.message(1))

    assert (world.current().status, world.current().attempt_count, world.current().attempts) == (
        DeliveryStatus.QUEUED,
        0,
        [],
    )


def test_a_first_attempt_parked_meanwhile_is_not_settled_over_its_park(world: World) -> None:
    """The settle's condition, not the argument that nothing parks it meanwhile: a park that did come first wins."""
    world.service.claim_after = timedelta(hours=1)

    def send(url: str, headers: dict[str, str], body: bytes) -> SendResult:
        world.deliveries.items["dlv_1"] = replace(world.current(), parked_at=world.clock.now)
        return OK

    world.sender.send = send  # type: ignore[method-assign]

    report = world.service.attempt(world.message(1))

    assert not report.sent and report.parked and world.current().attempts == []


# --- A delivery left unstored (adapters/event_log.py): no record until its settle creates it ---


def unstored_world() -> tuple[World, DeliveryMessage, Delivery]:
    """A logged event's fan-out, as ingest left it: no record, and a first message carrying its event."""
    world = make_world()
    event = new_event(
        tenant_id="tn_1", event_type="order.updated", data={"id": 1}, now=world.clock.now, horizon_seconds=60
    )
    endpoint = world.endpoints.get("tn_1", "ep_1")
    assert endpoint is not None
    made = new_delivery(event, endpoint, event.timestamp)
    assert may_stay_unstored(made)
    world.events.append([(event, [made])])
    message = DeliveryMessage(made.id, "tn_1", 1, made.message_group_id, "dedup-1", endpoint_id="ep_1", event=event)
    return world, message, made


def test_a_first_message_whose_delivery_has_no_record_is_attempted_and_its_settle_creates_it() -> None:
    world, message, made = unstored_world()
    recorded: list[Unclaimed | None] = []
    record_attempt = world.deliveries.record_attempt
    world.deliveries.record_attempt = lambda *a, **k: recorded.append(a[4]) or record_attempt(*a, **k)  # type: ignore[method-assign]
    world.script(OK)

    report = world.service.attempt(message)

    assert report.sent and report.status is DeliveryStatus.DELIVERED
    assert [u.unstored for u in recorded if u is not None] == [made]  # the one write, creating it as ingest made it
    stored = world.deliveries.items[made.id]
    assert stored.status is DeliveryStatus.DELIVERED and stored.message_group_id == made.message_group_id


def test_a_message_whose_event_does_not_make_its_delivery_is_not_attempted() -> None:
    """Another event than the delivery's (or another tenant's): nothing is read from it, nothing sent."""
    world, message, _ = unstored_world()
    other = replace(message, delivery_id="dlv_01JAAAAAAAAAAAAAAAAAAAAAAA")
    world.script(OK)
    report = world.service.attempt(other)
    assert not report.sent and report.status is None and world.sender.sent == []
    assert world.service.attempt(replace(message, tenant_id="tn_2")).sent is False
