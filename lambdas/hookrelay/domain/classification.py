"""How an attempt's result decides what happens next: the response table of the contract.

The rules are data (`RESPONSE_RULES`) so the published table is generated from the same object the
delivery path uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# The whole-request timeout of one attempt (the contract's "return 200 within 8 seconds"): an endpoint that has
# not answered by then has failed this attempt, with FailureKind.TIMEOUT.
ATTEMPT_TIMEOUT_SECONDS = 8

# 3xx and "hard" 4xx are retried, but a delivery gets at most this many attempts in all once one of
# them has failed that way: consumers misconfigure things transiently, but not for 72 hours.
HARD_FAILURE_ATTEMPT_CAP = 3


class Outcome(StrEnum):
    DELIVERED = "delivered"
    RETRY = "retry"  # transient: retried on the full schedule
    RETRY_LIMITED = "retry_limited"  # defective request: retried up to HARD_FAILURE_ATTEMPT_CAP


class FailureKind(StrEnum):
    """Transport failures, where no status code arrived."""

    TIMEOUT = "timeout"
    CONNECTION = "connection_error"
    DNS = "dns_error"
    TLS = "tls_error"
    # The endpoint resolved to a private/metadata address, or its URL names a port or host the rule refuses.
    BLOCKED = "blocked_address"
    # The endpoint's OAuth2 token URL gave no token (down, refused the client, blocked address): nothing was sent.
    TOKEN = "token_error"


def describe_failure(kind: FailureKind, host: str, cause: str | None = None) -> str:
    """What an attempt's record and log say after the failure kind: a sentence a consumer can act on, naming the
    host (never the URL's path or query, which may carry a token) and, when known, the cause (e.g. "refused")."""
    if kind is FailureKind.DNS:
        return f"could not resolve host {host}"
    if kind is FailureKind.TIMEOUT:
        return f"{host} did not answer in time" + (f" ({cause})" if cause else "")
    if kind is FailureKind.TLS:
        return f"TLS handshake with {host} failed" + (f": {cause}" if cause else "")
    if kind is FailureKind.CONNECTION:
        return f"could not connect to {host}" + (f": {cause}" if cause else "")
    return f"{kind.value} for {host}" + (f": {cause}" if cause else "")


@dataclass(frozen=True)
class ResponseRule:
    label: str
    outcome: Outcome
    codes: frozenset[int] = frozenset()
    code_range: tuple[int, int] | None = None  # inclusive
    failures: frozenset[FailureKind] = frozenset()
    honours_retry_after: bool = False

    def matches(self, status_code: int | None, failure: FailureKind | None) -> bool:
        if failure is not None:
            return failure in self.failures
        if status_code is None:
            return False
        if status_code in self.codes:
            return True
        return self.code_range is not None and self.code_range[0] <= status_code <= self.code_range[1]


# Order matters: the first matching rule wins.
RESPONSE_RULES: tuple[ResponseRule, ...] = (
    ResponseRule("2xx within the timeout", Outcome.DELIVERED, code_range=(200, 299)),
    ResponseRule("429 Too Many Requests", Outcome.RETRY, codes=frozenset({429}), honours_retry_after=True),
    ResponseRule("503 Service Unavailable", Outcome.RETRY, codes=frozenset({503}), honours_retry_after=True),
    ResponseRule("other 5xx", Outcome.RETRY, code_range=(500, 599)),
    ResponseRule("408 Request Timeout, 425 Too Early", Outcome.RETRY, codes=frozenset({408, 425})),
    ResponseRule(
        "timeout, connection, DNS or TLS error",
        Outcome.RETRY,
        failures=frozenset({FailureKind.TIMEOUT, FailureKind.CONNECTION, FailureKind.DNS, FailureKind.TLS}),
    ),
    ResponseRule("OAuth2 token URL failure (nothing sent)", Outcome.RETRY, failures=frozenset({FailureKind.TOKEN})),
    ResponseRule("3xx (redirects are never followed)", Outcome.RETRY_LIMITED, code_range=(300, 399)),
    ResponseRule("400, 401, 403, 404, 410 and other 4xx", Outcome.RETRY_LIMITED, code_range=(400, 499)),
    ResponseRule(
        "blocked destination (address, port), any other status",
        Outcome.RETRY_LIMITED,
        code_range=(100, 199),
        failures=frozenset({FailureKind.BLOCKED}),
    ),
)


def rule_for(status_code: int | None, failure: FailureKind | None = None) -> ResponseRule:
    for rule in RESPONSE_RULES:
        if rule.matches(status_code, failure):
            return rule
    return RESPONSE_RULES[-1]  # anything unforeseen is treated as a defective request


def classify(status_code: int | None, failure: FailureKind | None = None) -> Outcome:
    return rule_for(status_code, failure).outcome


def outcome_description(outcome: Outcome) -> str:
    return {
        Outcome.DELIVERED: "delivered",
        Outcome.RETRY: "retried on the schedule",
        Outcome.RETRY_LIMITED: f"retried, but at most {HARD_FAILURE_ATTEMPT_CAP} attempts in all, then dead",
    }[outcome]
