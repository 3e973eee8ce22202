"""A batch of SQS records: each message group in order, a failure holding back only the rest of its own group,
and the groups at once when the handler is given workers."""

from __future__ import annotations

import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from hookrelay.handlers.sqs_batch import EntireBatchFailed, SqsMessage, process_batch

INVOCATION: contextvars.ContextVar[str] = contextvars.ContextVar("invocation", default="none")


class Logs:
    def __init__(self) -> None:
        self.failures: list[str] = []

    def exception(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self.failures.append(kwargs["extra"]["message_id"])


def batch(*groups_and_ids: tuple[str, str]) -> dict[str, Any]:
    return {
        "Records": [
            {"messageId": message_id, "body": message_id, "attributes": {"MessageGroupId": group}}
            for group, message_id in groups_and_ids
        ]
    }


def failed(response: dict[str, Any]) -> list[str]:
    return [failure["itemIdentifier"] for failure in response["batchItemFailures"]]


@pytest.fixture(scope="module")
def workers() -> Any:
    with ThreadPoolExecutor(max_workers=10) as pool:
        yield pool


def test_a_failure_holds_back_the_rest_of_its_group_only_and_the_other_groups_go_on(
    workers: ThreadPoolExecutor,
) -> None:
    handled: list[str] = []
    lock = threading.Lock()

    def handle(message: SqsMessage) -> None:
        if message.body == "a2":
            raise RuntimeError("boom")
        with lock:
            handled.append(message.body)

    event = batch(("a", "a1"), ("b", "b1"), ("a", "a2"), ("b", "b2"), ("a", "a3"), ("c", "c1"))
    response = process_batch(event, handle, Logs(), fifo=True, workers=workers)

    assert failed(response) == ["a2", "a3"]  # a3 unprocessed: it comes back after a2, in order
    assert sorted(handled) == ["a1", "b1", "b2", "c1"]
    assert handled.index("b1") < handled.index("b2")


def test_each_group_is_handled_in_the_queue_s_order() -> None:
    handled: list[str] = []
    event = batch(("a", "a1"), ("b", "b1"), ("a", "a2"), ("a", "a3"), ("b", "b2"))
    with ThreadPoolExecutor(max_workers=10) as pool:
        process_batch(event, lambda m: handled.append(m.body), Logs(), fifo=True, workers=pool)
    assert [m for m in handled if m.startswith("a")] == ["a1", "a2", "a3"]
    assert [m for m in handled if m.startswith("b")] == ["b1", "b2"]


def test_with_workers_the_groups_run_at_once_so_one_slow_group_holds_only_itself(workers: ThreadPoolExecutor) -> None:
    # Each group's handler waits for the other's: handled one group after the other, the barrier breaks (5 s)
    # and both records fail.
    both_inside = threading.Barrier(2, timeout=5)
    event = batch(("a", "a1"), ("b", "b1"))
    response = process_batch(event, lambda _: both_inside.wait(), Logs(), fifo=True, workers=workers)
    assert failed(response) == []


def test_without_workers_the_groups_run_one_after_another() -> None:
    inside = 0
    most_inside = 0

    def handle(_: SqsMessage) -> None:
        nonlocal inside, most_inside
        inside += 1
        most_inside = max(most_inside, inside)
        inside -= 1

    process_batch(batch(("a", "a1"), ("b", "b1"), ("c", "c1")), handle, Logs(), fifo=True)
    assert most_inside == 1


def test_a_standard_queue_s_failure_holds_back_nothing_else() -> None:
    def handle(message: SqsMessage) -> None:
        if message.body == "m1":
            raise RuntimeError("boom")

    response = process_batch(batch(("", "m1"), ("", "m2")), handle, Logs(), fifo=False)
    assert failed(response) == ["m1"]


def test_when_every_record_fails_the_batch_fails_as_a_whole(workers: ThreadPoolExecutor) -> None:
    logs = Logs()

    def handle(_: SqsMessage) -> None:
        raise RuntimeError("boom")

    with pytest.raises(EntireBatchFailed):
        process_batch(batch(("a", "a1"), ("b", "b1")), handle, logs, fifo=True, workers=workers)
    assert sorted(logs.failures) == ["a1", "b1"]


def test_once_time_runs_short_the_rest_of_the_group_goes_to_the_late_handling_in_order() -> None:
    handled: list[str] = []
    starts_left = iter([True, False])
    event = batch(("a", "a1"), ("a", "a2"), ("a", "a3"), ("a", "a4"))
    response = process_batch(
        event,
        lambda m: handled.append(m.body),
        Logs(),
        fifo=True,
        may_start=lambda: next(starts_left),
        late=lambda m: handled.append(f"late {m.body}"),
    )
    assert handled == ["a1", "a2", "late a3", "late a4"]
    assert failed(response) == []


def test_a_message_not_started_in_time_comes_back_with_the_rest_of_its_group_unprocessed() -> None:
    handled: list[str] = []
    starts_left = iter([True, False])  # the invocation's time runs out after a group's second message
    event = batch(("a", "a1"), ("a", "a2"), ("a", "a3"), ("a", "a4"))
    response = process_batch(
        event, lambda m: handled.append(m.body), Logs(), fifo=True, may_start=lambda: next(starts_left)
    )
    assert handled == ["a1", "a2"]
    assert failed(response) == ["a3", "a4"]


def test_each_group_runs_in_the_invocation_s_context(workers: ThreadPoolExecutor) -> None:
    # What is scoped to an invocation (the local stack's per-function environment, its IAM check) holds on the
    # workers' threads too.
    seen: list[str] = []
    token = INVOCATION.set("delivery")
    try:
        process_batch(
            batch(("a", "a1"), ("b", "b1")), lambda _: seen.append(INVOCATION.get()), Logs(), fifo=True, workers=workers
        )
    finally:
        INVOCATION.reset(token)
    assert seen == ["delivery", "delivery"]


def handled_batch(*groups_and_ids: tuple[str, str]) -> dict[str, Any]:
    """As the event source hands it over: each record with its receipt handle and its queue's ARN."""
    event = batch(*groups_and_ids)
    for record in event["Records"]:
        record["receiptHandle"] = f"handle-{record['messageId']}"
        record["eventSourceARN"] = "arn:aws:sqs:us-east-1:123456789012:deliveries.fifo"
    return event


class Releases:
    """What the batch released, and when the first release came."""

    def __init__(self, *, fail: bool = False) -> None:
        self.handles: list[str] = []
        self.queues: set[str] = set()
        self.first = threading.Event()
        self.fail = fail

    def __call__(self, queue_arn: str, receipt_handles: list[str]) -> None:
        self.queues.add(queue_arn)
        self.handles.extend(receipt_handles)
        self.first.set()
        if self.fail:
            raise RuntimeError("throttled")


class AnyLogs:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def exception(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self.lines.append(msg)


def test_groups_settled_while_a_slow_one_runs_are_released_before_the_batch_returns(
    workers: ThreadPoolExecutor,
) -> None:
    releases = Releases()
    seen_while_slow: list[bool] = []

    def handle(message: SqsMessage) -> None:
        if message.body == "slow1":  # an endpoint that does not answer: the batch waits for it
            seen_while_slow.append(releases.first.wait(timeout=30))

    event = handled_batch(("slow", "slow1"), ("a", "a1"), ("a", "a2"), ("b", "b1"))
    response = process_batch(event, handle, AnyLogs(), fifo=True, workers=workers, release=releases)

    assert seen_while_slow == [True]  # released while the slow group was still being attempted
    assert sorted(releases.handles) == ["handle-a1", "handle-a2", "handle-b1"]
    assert releases.queues == {"arn:aws:sqs:us-east-1:123456789012:deliveries.fifo"}
    assert failed(response) == []


def test_a_failed_group_is_never_released(workers: ThreadPoolExecutor) -> None:
    releases = Releases()

    def handle(message: SqsMessage) -> None:
        if message.body == "bad1":
            raise RuntimeError("boom")
        if message.body == "slow1":
            releases.first.wait(timeout=30)

    event = handled_batch(("bad", "bad1"), ("bad", "bad2"), ("ok", "ok1"), ("slow", "slow1"))
    response = process_batch(event, handle, AnyLogs(), fifo=True, workers=workers, release=releases)

    assert releases.handles == ["handle-ok1"]
    assert failed(response) == ["bad1", "bad2"]  # reported, to come back in order


def test_groups_settled_within_the_batchs_first_moments_are_left_to_the_event_source(
    workers: ThreadPoolExecutor,
) -> None:
    """A batch whose groups settle together (its clock never passes `release_after`) makes no request to release
    them: the event source deletes them when the invocation returns, in the one request it makes anyway."""
    releases = Releases()
    both_inside = threading.Barrier(2, timeout=30)

    response = process_batch(
        handled_batch(("a", "a1"), ("b", "b1")),
        lambda _: both_inside.wait(),
        AnyLogs(),
        fifo=True,
        workers=workers,
        release=releases,
        clock=lambda: 1000.0,  # no time passes
    )

    assert releases.handles == []
    assert failed(response) == []


def test_a_release_that_fails_is_logged_and_changes_nothing_else(workers: ThreadPoolExecutor) -> None:
    releases = Releases(fail=True)
    logs = AnyLogs()

    def handle(message: SqsMessage) -> None:
        if message.body == "slow1":
            releases.first.wait(timeout=30)

    response = process_batch(
        handled_batch(("slow", "slow1"), ("a", "a1")), handle, logs, fifo=True, workers=workers, release=releases
    )

    assert releases.handles == ["handle-a1"]
    assert logs.lines == ["releasing settled messages failed"]
    assert failed(response) == []  # the event source deletes both when the invocation returns


def test_a_run_handler_takes_several_of_a_group_s_messages_at_once_and_the_rest_go_on_one_by_one() -> None:
    handled: list[str] = []
    runs: list[list[str]] = []

    def handle(message: SqsMessage) -> None:
        handled.append(message.body)

    def handle_run(messages: Any) -> int:  # takes a1..a3 together; nothing else
        runs.append([m.body for m in messages])
        taken = [m.body for m in messages if m.body in ("a1", "a2", "a3")]
        handled.extend(taken)
        return len(taken)

    event = batch(("a", "a1"), ("a", "a2"), ("a", "a3"), ("a", "a4"), ("a", "a5"), ("b", "b1"))
    response = process_batch(event, handle, Logs(), fifo=True, handle_run=handle_run)

    assert failed(response) == [] and handled == ["a1", "a2", "a3", "a4", "a5", "b1"]
    # Offered the group's unhandled messages, two or more: never a lone one (b1, a5 at the end) nor what it took.
    assert runs == [["a1", "a2", "a3", "a4", "a5"], ["a4", "a5"]]


def test_a_run_that_fails_fails_its_group_from_its_first_message() -> None:
    def handle_run(messages: Any) -> int:
        if messages[0].body == "a2":
            raise RuntimeError("the send failed")
        return 1

    logs = Logs()
    event = batch(("a", "a1"), ("a", "a2"), ("a", "a3"), ("a", "a4"))
    response = process_batch(event, lambda message: None, logs, fifo=True, handle_run=handle_run)

    assert failed(response) == ["a2", "a3", "a4"] and logs.failures == ["a2"]


def test_once_time_runs_short_no_run_is_offered_each_message_goes_to_the_late_handling() -> None:
    offered: list[str] = []
    late: list[str] = []

    def handle_run(messages: Any) -> int:
        offered.append(messages[0].body)
        return 0

    event = batch(("a", "a1"), ("a", "a2"), ("a", "a3"))
    response = process_batch(
        event,
        lambda message: None,
        Logs(),
        fifo=True,
        may_start=lambda: False,  # no time for a second message
        late=lambda message: late.append(message.body),
        handle_run=handle_run,
    )

    assert failed(response) == [] and offered == ["a1"] and late == ["a2", "a3"]
