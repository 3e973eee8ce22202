"""One attempt's request as the endpoint asks for it: its authentication, then the send.

The whole of it keeps to the attempt timeout (the contract's "whole request"): an OAuth2 token fetched first, and a
401 answered by fetching a new token and sending once more, take their time out of the same budget, so an attempt
never runs longer than one without auth would (the delivery function's timeout is sized on it: adapters/schema.py).

A token URL that gives no token is a failed attempt (`token_error`, nothing sent), retried on the schedule like any
other. Nothing here logs: the headers carry the endpoint's secrets.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hookrelay.domain import endpoint_auth
from hookrelay.domain.classification import ATTEMPT_TIMEOUT_SECONDS, FailureKind
from hookrelay.domain.endpoint_auth import AuthKind, TokenUnavailable
from hookrelay.domain.models import Endpoint
from hookrelay.services.ports import SendResult, TokenSource, WebhookSender

UNAUTHORIZED = 401
# A retry after a 401 is made only with at least this much of the budget left: less could not get an answer.
MIN_RETRY_SECONDS = 1.0


@dataclass
class EndpointRequests:
    """The delivery service's `EndpointSender`: the endpoint's auth added to an attempt's headers."""

    sender: WebhookSender
    tokens: TokenSource | None = None  # None: OAuth2 endpoints fail their attempts with token_error
    budget_seconds: float = ATTEMPT_TIMEOUT_SECONDS  # the attempt timeout
    clock: Callable[[], float] = field(default=time.monotonic)

    def send(self, endpoint: Endpoint, headers: dict[str, str], body: bytes) -> SendResult:
        auth = endpoint.auth
        if auth is None:
            return self.sender.send(endpoint.url, headers, body)
        if auth.kind is not AuthKind.OAUTH2:
            return self.sender.send(endpoint.url, headers | {"authorization": endpoint_auth.authorization(auth)}, body)
        started = self.clock()

        def left() -> float:
            return self.budget_seconds - (self.clock() - started)

        try:
            token = self._token(endpoint, left())
        except TokenUnavailable as refused:
            return SendResult(None, self._ms_since(started), FailureKind.TOKEN, str(refused))
        result = self._send_with(endpoint, headers, body, token, left())
        if result.status_code != UNAUTHORIZED or left() < MIN_RETRY_SECONDS:
            return result
        try:  # the token may have been revoked before it expired: one new token, one more send
            fresh = self._token(endpoint, left(), stale=token)
        except TokenUnavailable:
            return result  # the 401 is what the endpoint answered: it is the attempt's outcome
        return self._send_with(endpoint, headers, body, fresh, left())

    def _token(self, endpoint: Endpoint, timeout: float, stale: str | None = None) -> str:
        assert endpoint.auth is not None
        if self.tokens is None:
            raise TokenUnavailable("this deployment fetches no OAuth2 tokens")
        if timeout <= 0:
            raise TokenUnavailable("no time was left in the attempt to fetch a token")
        return self.tokens.token(endpoint.id, endpoint.auth, timeout=timeout, stale=stale)

    def _send_with(
        self, endpoint: Endpoint, headers: dict[str, str], body: bytes, token: str, timeout: float
    ) -> SendResult:
        assert endpoint.auth is not None
        authorized = headers | {"authorization": endpoint_auth.authorization(endpoint.auth, token)}
        return self.sender.send(endpoint.url, authorized, body, timeout=max(timeout, 0.001))

    def _ms_since(self, started: float) -> int:
        return int((self.clock() - started) * 1000)
