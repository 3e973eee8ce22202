"""What every API handler shares: the caller's principal, JSON bodies, and RFC 9457 problem details."""

from __future__ import annotations

import base64
import json
import math
from typing import Any, TypeVar

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from pydantic import BaseModel, ValidationError

from hookrelay import wiring
from hookrelay.adapters.aws import THROTTLED_RETRY_AFTER_SECONDS, throttled
from hookrelay.domain import portal
from hookrelay.domain.api_keys import Principal
from hookrelay.domain.clock import epoch_seconds, utcnow
from hookrelay.domain.errors import DomainError, Forbidden, IdempotencyKeyInFlight, InvalidDocument

MAX_BODY_BYTES = 256 * 1024
PROBLEM_JSON = "application/problem+json"
PROBLEM_BASE = "https://hookrelay.dev/problems/"

M = TypeVar("M", bound=BaseModel)
logger = Logger()


class ProblemError(Exception):
    def __init__(
        self, status: int, title: str, detail: str, kind: str, headers: dict[str, str] | None = None, **extra: Any
    ) -> None:
        super().__init__(detail)
        self.status, self.title, self.detail, self.kind, self.extra = status, title, detail, kind, extra
        self.headers = headers


def problem_response(
    status: int,
    title: str,
    detail: str,
    kind: str,
    instance: str | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> Response[str]:
    body = problem_document(status, title, detail, kind, **extra)
    if instance:
        body["instance"] = instance
    return Response(status_code=status, content_type=PROBLEM_JSON, body=json.dumps(body), headers=headers)


def problem_document(status: int, title: str, detail: str, kind: str, **extra: Any) -> dict[str, Any]:
    """An RFC 9457 problem document: a response's body, or one item's result in a batch's answer."""
    return {"type": PROBLEM_BASE + kind, "title": title, "status": status, "detail": detail, **extra}


def problem_kind(error: DomainError) -> str:
    """A domain error's problem type name: its own, or its class's name, lower-cased."""
    return error.kind or type(error).__name__.lower()


def problem_extra(error: DomainError) -> dict[str, Any]:
    """What a domain error's problem document carries beyond its title and detail: where a document fails; when a
    retry can succeed (`retry_after`, seconds: an item of a batch has no header of its own to say it)."""
    if isinstance(error, InvalidDocument):
        return {"errors": error.errors}
    if isinstance(error, IdempotencyKeyInFlight) and error.retry_after is not None:
        return {"retry_after": error.retry_after}
    return {}


def problem_headers(extra: dict[str, Any]) -> dict[str, str] | None:
    """A whole response's headers for a problem with these extras (`problem_extra`): `Retry-After` when it says when
    a retry can succeed."""
    retry_after = extra.get("retry_after")
    return None if retry_after is None else {"Retry-After": str(retry_after)}


def validation_errors(error: ValidationError) -> list[dict[str, str]]:
    """What failed validation, field by field (dotted paths), without echoing the input."""
    return [
        {"field": ".".join(str(p) for p in e["loc"]), "message": e["msg"]}
        for e in error.errors(include_url=False, include_input=False)
    ]


def json_response(status: int, body: Any) -> Response[str]:
    return Response(status_code=status, content_type="application/json", body=json.dumps(body))


_RATE_COUNTED = "rate_counted"  # in the resolver's per-request context: this request was counted once already


def principal(app: APIGatewayHttpResolver) -> Principal:
    context = app.current_event.request_context.authorizer.get_lambda
    if not context.get("key_id") or not context.get("role"):
        # Unreachable behind the authorizer; refusing is the safe answer if it is ever misconfigured.
        raise Forbidden("no authenticated principal")
    grant = portal.Grant.from_context(context) if context.get(portal.SCOPE) == portal.PORTAL_SCOPE else None
    who = Principal(
        key_id=context["key_id"], role=context["role"], grant=grant, counted_as=context.get(portal.COUNTED_AS) or None
    )
    if grant is not None:
        _check_portal_grant(app, grant)
    if not app.context.get(_RATE_COUNTED):
        app.context[_RATE_COUNTED] = True  # the resolver clears its context after each request
        _admit(who.rate_limit_id)
    return who


def _check_portal_grant(app: APIGatewayHttpResolver, grant: portal.Grant) -> None:
    """A portal session's request: refused once the session has expired (the authorizer's answer is cached for up to
    a minute, this check is not), or on a route its capabilities do not reach (domain/portal.py's one table)."""
    route_key = app.current_event.route_key
    refusal = grant.refusal(route_key, epoch_seconds(utcnow()))
    if refusal is None:
        return
    if refusal == portal.EXPIRED:
        raise ProblemError(401, "Unauthorized", refusal, "portal-link-expired")
    raise Forbidden(refusal)


def _admit(key_id: str) -> None:
    """Count the request against its key's rate (domain/rate_limit.py); 429 when the key is over it.

    Here, not in the authorizer: API Gateway caches the authorizer's answer, so only the functions see every
    request. A route's first `principal` call counts it; the resolver's context keeps a second from counting again.
    """
    try:
        admitted = wiring.rate_limiter().admit(key_id)
    except Exception:  # the counters unreachable: fail open, the stage's throttle still bounds the API
        logger.exception("rate limit check failed: request admitted")
        return
    if not admitted:
        raise ProblemError(
            429,
            "Too many requests",
            "this API key is over its requests per second; retry after a second",
            "rate-limited",
            headers={"Retry-After": "1"},
        )


def require(app: APIGatewayHttpResolver, *, admin: bool = False, producer: bool = False) -> Principal:
    who = principal(app)
    if (admin and not who.is_admin) or (producer and not who.is_producer):
        raise Forbidden("this API key's role may not call this route")
    return who


def require_tenant(app: APIGatewayHttpResolver) -> str:
    tenant_id = principal(app).tenant_id
    if tenant_id is None:
        raise Forbidden("this route is for tenant keys")
    return tenant_id


def parse_body(app: APIGatewayHttpResolver, model: type[M], max_bytes: int = MAX_BODY_BYTES) -> M:
    raw = _raw_body(app)
    if len(raw) > max_bytes:
        raise _too_large(f"the body must be at most {max_bytes} bytes")
    return model.model_validate(_strict_json(raw, max_bytes))


def has_body(app: APIGatewayHttpResolver) -> bool:
    """Whether the request carries a body at all (its bytes, whatever they are: parse_body judges them)."""
    return bool(_raw_body(app))


def _raw_body(app: APIGatewayHttpResolver) -> bytes:
    event = app.current_event
    body = event.body or ""
    return base64.b64decode(body) if event.is_base64_encoded else body.encode()


def compact_size(document: Any) -> int:
    """The bytes of a parsed document written out compactly, as the event envelope writes `data`."""
    return len(json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode())


def _strict_json(raw: bytes, max_bytes: int) -> Any:
    """JSON that any consumer can read back once we have written it out again.

    UTF-8 text, finite numbers, and no unpaired surrogate escapes. The document written out compactly
    (as the event envelope writes `data`) must fit the body limit too: a double such as 1e15 is written
    back as 1000000000000000.0. That bounds a stored event at the limit plus the envelope's few fields,
    well within one DynamoDB item (400 KB).
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _malformed(f"the body is not valid UTF-8 (byte {error.start})") from None
    try:
        document = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except json.JSONDecodeError as error:
        raise _malformed(f"the body is not valid JSON: {error.msg}") from None
    except ValueError:  # only Python's limit on integer digits raises a bare ValueError here
        raise _malformed("the body holds an integer with too many digits") from None
    except RecursionError:
        raise _malformed("the body is nested too deeply") from None
    try:
        written = compact_size(document)
    except UnicodeEncodeError:
        raise _malformed("the body escapes an unpaired UTF-16 surrogate, which is no Unicode text") from None
    if written > max_bytes:
        raise _too_large(f"the body, with its numbers written out as doubles, must be at most {max_bytes} bytes")
    return document


def _refuse_constant(name: str) -> Any:
    raise _malformed(f"the body is not valid JSON: {name} is not a JSON number")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise _malformed(f"the number {literal} is out of the range of a double")
    return value


def _malformed(detail: str) -> ProblemError:
    return ProblemError(400, "Malformed JSON", detail, "malformed-json")


def _too_large(detail: str) -> ProblemError:
    return ProblemError(413, "Payload too large", detail, "too-large")


def install_problem_handlers(app: APIGatewayHttpResolver) -> None:
    """Every error leaves the API as problem details, never as a stack trace or a bare 500."""

    def instance() -> str:
        return app.current_event.raw_path

    def _problem(error: ProblemError) -> Response[str]:
        return problem_response(
            error.status, error.title, error.detail, error.kind, instance(), error.headers, **error.extra
        )

    def _domain(error: DomainError) -> Response[str]:
        extra = problem_extra(error)
        return problem_response(
            error.status, error.title, error.detail, problem_kind(error), instance(), problem_headers(extra), **extra
        )

    def _invalid(error: ValidationError) -> Response[str]:
        return problem_response(
            422,
            "Invalid request",
            "the request failed validation",
            "validation",
            instance(),
            errors=validation_errors(error),
        )

    @app.not_found
    def _not_found(_: NotFoundError) -> Response[str]:
        return problem_response(404, "Not found", "no such route", "not-found", instance())

    def _unexpected(error: Exception) -> Response[str]:
        if throttled(error):  # an AWS quota, still refusing after the retries: the caller tries again shortly
            logger.warning("throttled past the retries", extra={"error": str(error)})
            return problem_response(
                503,
                "Service busy",
                "a capacity limit was reached; retry shortly (with the same Idempotency-Key, if any)",
                "busy",
                instance(),
                {"retry-after": str(THROTTLED_RETRY_AFTER_SECONDS)},
            )
        logger.exception("unhandled error")
        return problem_response(500, "Internal error", "something went wrong on our side", "internal", instance())

    # Registered by call: Powertools' exception_handler decorator is unannotated, and would erase these types.
    app.exception_handler(ProblemError)(_problem)
    app.exception_handler(DomainError)(_domain)
    app.exception_handler(ValidationError)(_invalid)
    app.exception_handler(Exception)(_unexpected)
