"""Domain errors, mapped to RFC 9457 problem details at the API edge."""

from __future__ import annotations


class DomainError(Exception):
    status = 400
    title = "Bad request"
    kind: str | None = None  # the problem type's name; None: the class's name, lower-cased

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class NotFound(DomainError):
    status = 404
    title = "Not found"


class Conflict(DomainError):
    status = 409
    title = "Conflict"


class Forbidden(DomainError):
    status = 403
    title = "Forbidden"


class InvalidRequest(DomainError):
    status = 422
    title = "Unprocessable request"


class InvalidCursor(DomainError):
    status = 400
    title = "Invalid cursor"


class Gone(DomainError):
    status = 410
    title = "Gone"


class InvalidDocument(InvalidRequest):
    """422 naming where a document fails: `errors` of {pointer (RFC 6901, into the request body), detail}."""

    def __init__(self, detail: str, errors: list[dict[str, str]]) -> None:
        super().__init__(detail)
        self.errors = errors


class IdempotencyKeyReused(InvalidRequest):
    """An idempotency key that published (or is publishing) something else."""

    title = "Idempotency-Key reused"
    kind = "idempotency-mismatch"


class IdempotencyKeyInFlight(Conflict):
    """An idempotency key whose first request may still be running; `retry_after`: the seconds until it cannot be,
    when known (a retry sooner gets this again)."""

    title = "Request in progress"
    kind = "idempotency-in-flight"

    def __init__(self, detail: str, retry_after: int | None = None) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class LimitExceeded(Conflict):
    """A request that would take a tenant past one of its deployment's limits (domain/limits.py)."""

    title = "Limit exceeded"
    kind = "limit-exceeded"
