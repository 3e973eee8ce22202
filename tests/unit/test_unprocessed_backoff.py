"""A batch's unprocessed entries are sent again as a throttled call is retried: each round after a backoff no longer
than botocore's for that retry, at most AWS_CALL_TRIES rounds, then raised as throttling (adapters/aws.resend_left)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from hookrelay.adapters import aws, schema
from hookrelay.adapters.aws import resend_left, throttled


def test_each_round_waits_within_its_retry_s_cap_and_the_last_left_is_raised_as_throttling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []
    monkeypatch.setattr(aws, "_sleep", slept.append)
    monkeypatch.setattr(aws.random, "uniform", lambda low, high: high)  # the longest each round may wait
    sent: list[dict[str, Any]] = []

    def send(request: dict[str, Any]) -> dict[str, Any]:
        sent.append(request)
        return {"UnprocessedItems": {"t": ["still"]}}

    with pytest.raises(ClientError) as raised:
        list(resend_left(send, {"t": ["a", "still"]}, lambda _, a: a.get("UnprocessedItems"), "BatchWriteItem"))

    assert len(sent) == schema.AWS_CALL_TRIES
    assert sent[1:] == [{"t": ["still"]}] * (schema.AWS_CALL_TRIES - 1)  # only what was left is sent again
    assert slept == [schema.aws_call_backoff_cap(retry) for retry in range(schema.AWS_CALL_TRIES - 1)] == [1, 2, 4, 8]
    assert throttled(raised.value)


def test_a_batch_nothing_is_left_of_is_sent_once_and_waits_for_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(aws, "_sleep", slept.append)
    answers = list(resend_left(lambda r: {"Responses": r}, {"t": {"Keys": []}}, lambda _, a: a.get("Left"), "X"))
    assert answers == [{"Responses": {"t": {"Keys": []}}}] and slept == []
