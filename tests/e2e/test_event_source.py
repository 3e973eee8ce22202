"""The local stack's SQS event source (local.sqs_source.EventSource) on moto, with a stand-in function.

What it must keep from Lambda's event source: a message group with a message in flight yields nothing
more until that message is settled, other groups go on meanwhile, and only the messages a batch
reports as failed (or every message of a batch that raised) stay on the queue.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from hookrelay.adapters import schema
from local import sqs_source
from local.provision import delivery_queue_urls
from local.sqs_source import EventSource
from tests.e2e.harness import eventually
from tests.support.aws import moto_stack


@pytest.fixture
def queue_url() -> Iterator[str]:
    with moto_stack() as env:
        yield delivery_queue_urls(env).url(0)  # shard 0's fast lane


class StandIn:
    """The function the event source invokes: records each batch's bodies; can hold or fail messages."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.finished: list[str] = []
        self.hold = threading.Event()
        self.held_body: str | None = None
        self.fail_body: str | None = None
        self.raise_on: str | None = None
        self.release: tuple[str, str] | None = None  # (queue URL, body): deleted first, as a settled group is

    def __call__(self, function: str, event: dict[str, Any]) -> dict[str, Any]:
        bodies = [record["body"] for record in event["Records"]]
        self.started.extend(bodies)
        for record in event["Records"]:
            if self.release is not None and record["body"] == self.release[1]:
                boto3.client("sqs").delete_message(QueueUrl=self.release[0], ReceiptHandle=record["receiptHandle"])
                self.finished.append(record["body"])
        if self.held_body in bodies:
            self.hold.wait(timeout=30)
        self.finished.extend(bodies)
        if self.raise_on in bodies:
            raise RuntimeError("the function failed")
        failed = [r["messageId"] for r in event["Records"] if r["body"] == self.fail_body]
        return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failed]}


def send(queue_url: str, group: str, body: str) -> None:
    boto3.client("sqs").send_message(
        QueueUrl=queue_url, MessageBody=body, MessageGroupId=group, MessageDeduplicationId=str(uuid.uuid4())
    )


def counts(queue_url: str) -> tuple[int, int]:
    attributes = boto3.client("sqs").get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(attributes["ApproximateNumberOfMessagesNotVisible"])


def running(queue_url: str, batch_size: int = 1) -> EventSource:
    source = EventSource(boto3.client("sqs"), queue_url, batch_size=batch_size, concurrency=4)
    source.start()
    return source


def test_a_group_in_flight_waits_while_other_groups_go_on(queue_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in = StandIn()
    stand_in.held_body = "a1"
    monkeypatch.setattr(sqs_source, "invoke", stand_in)
    send(queue_url, "a", "a1")
    send(queue_url, "a", "a2")
    send(queue_url, "b", "b1")
    source = running(queue_url)
    try:
        eventually(lambda: "b1" in stand_in.finished, "group b is served while a1 is held")
        assert "a1" in stand_in.started
        assert "a2" not in stand_in.started  # group a is locked by a1, in flight
        stand_in.hold.set()
        eventually(lambda: "a2" in stand_in.finished, "a2 follows once a1 is settled")
    finally:
        stand_in.hold.set()
        source.stop()
    assert stand_in.started.index("a2") > stand_in.finished.index("a1")
    assert counts(queue_url) == (0, 0)


def test_a_group_its_invocation_released_goes_on_while_that_invocation_still_runs(
    queue_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The delivery function deletes a settled group's messages while a slow group holds its batch (domain/lanes.py):
    the queue then hands out that group's next message, and the event source runs it at once."""
    stand_in = StandIn()
    stand_in.held_body = "slow1"
    stand_in.release = (queue_url, "a1")
    monkeypatch.setattr(sqs_source, "invoke", stand_in)
    send(queue_url, "slow", "slow1")
    send(queue_url, "a", "a1")
    source = running(queue_url, batch_size=schema.SQS_MAX_BATCH)
    try:
        eventually(lambda: {"slow1", "a1"} <= set(stand_in.started), "one batch with both groups")
        send(queue_url, "a", "a2")
        eventually(lambda: "a2" in stand_in.finished, "a2 runs while its group's old batch is held")
        assert "slow1" not in stand_in.finished
    finally:
        stand_in.hold.set()
        source.stop()
    eventually(lambda: counts(queue_url) == (0, 0), "every message deleted")


def test_only_reported_failures_stay_on_the_queue(queue_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in = StandIn()
    stand_in.fail_body = "bad"
    monkeypatch.setattr(sqs_source, "invoke", stand_in)
    for group, body in (("g1", "good"), ("g2", "bad"), ("g3", "fine")):
        send(queue_url, group, body)
    source = running(queue_url, batch_size=schema.SQS_MAX_BATCH)
    try:
        eventually(lambda: {"good", "bad", "fine"} <= set(stand_in.finished), "every message is handled")
    finally:
        source.stop()
    assert counts(queue_url) == (0, 1)  # "bad" waits out its visibility timeout; the others are deleted


def test_a_function_that_raises_keeps_its_whole_batch(queue_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in = StandIn()
    stand_in.raise_on = "boom"
    monkeypatch.setattr(sqs_source, "invoke", stand_in)
    send(queue_url, "g", "boom")
    send(queue_url, "g", "after")
    source = running(queue_url, batch_size=schema.SQS_MAX_BATCH)
    try:
        eventually(lambda: "boom" in stand_in.finished, "the batch is attempted")
    finally:
        source.stop()
    assert counts(queue_url) == (0, 2)


def test_the_local_event_sources_are_the_tables_queue_triggers() -> None:
    """The local stack runs the table of functions' queue triggers, as the CDK stack deploys them
    (tests/infrastructure/test_functions.py checks the deployed event source mappings against the same table)."""
    from hookrelay import functions
    from local.provision import queue_urls
    from local.stack import event_sources

    with moto_stack() as env:
        running = [
            (source.function, source.queue_url, source.batch_size, source.concurrency)
            for source in event_sources(env, concurrency=8)
        ]
        urls = queue_urls(env)
    expected = [
        (source.function.name, urls[source.queue], source.batch_size, source.max_concurrency or 8)
        for source in functions.event_sources(delivery_queue_urls(env).shards)
    ]
    assert running == expected
    # Each delivery shard's fast and slow lane, then the redrive jobs queue.
    assert [name for name, *_ in running] == ["delivery"] * 2 * delivery_queue_urls(env).shards + ["redrive"]
