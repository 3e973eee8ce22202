from __future__ import annotations

import pytest

from hookrelay.domain.classification import (
    RESPONSE_RULES,
    FailureKind,
    Outcome,
    classify,
    describe_failure,
    rule_for,
)


@pytest.mark.parametrize("code", [200, 201, 202, 204, 299])
def test_2xx_is_delivered(code: int) -> None:
    assert classify(code) is Outcome.DELIVERED


@pytest.mark.parametrize("code", [500, 502, 503, 504, 599, 408, 425, 429])
def test_transient_statuses_are_retried_on_the_schedule(code: int) -> None:
    assert classify(code) is Outcome.RETRY


@pytest.mark.parametrize("code", [300, 301, 302, 307, 308, 400, 401, 403, 404, 410, 413, 422, 451])
def test_redirects_and_hard_4xx_are_retried_but_capped(code: int) -> None:
    assert classify(code) is Outcome.RETRY_LIMITED


@pytest.mark.parametrize("failure", [FailureKind.TIMEOUT, FailureKind.CONNECTION, FailureKind.DNS, FailureKind.TLS])
def test_transport_failures_are_retried_on_the_schedule(failure: FailureKind) -> None:
    assert classify(None, failure) is Outcome.RETRY


def test_a_2xx_that_arrived_after_the_timeout_is_not_delivered() -> None:
    assert classify(200, FailureKind.TIMEOUT) is Outcome.RETRY


def test_a_blocked_destination_is_a_hard_failure() -> None:
    assert classify(None, FailureKind.BLOCKED) is Outcome.RETRY_LIMITED


@pytest.mark.parametrize("code", [100, 101, 199, 600, 999])
def test_unforeseen_statuses_are_never_delivered(code: int) -> None:
    assert classify(code) is Outcome.RETRY_LIMITED


def test_only_429_and_503_honour_retry_after() -> None:
    honouring = {code for code in range(100, 600) if rule_for(code).honours_retry_after}
    assert honouring == {429, 503}


def test_every_failure_kind_has_a_rule() -> None:
    for failure in FailureKind:
        assert any(rule.matches(None, failure) for rule in RESPONSE_RULES), failure


@pytest.mark.parametrize(
    ("kind", "cause", "expected"),
    [
        (FailureKind.DNS, None, "could not resolve host hooks.example.invalid"),
        (
            FailureKind.CONNECTION,
            "connection refused",
            "could not connect to hooks.example.invalid: connection refused",
        ),
        (
            FailureKind.TLS,
            "certificate has expired",
            "TLS handshake with hooks.example.invalid failed: certificate has expired",
        ),
        (
            FailureKind.TIMEOUT,
            "connecting timed out",
            "hooks.example.invalid did not answer in time (connecting timed out)",
        ),
    ],
)
def test_a_failure_reads_as_a_sentence_naming_the_host(kind: FailureKind, cause: str | None, expected: str) -> None:
    assert describe_failure(kind, "hooks.example.invalid", cause) == expected
