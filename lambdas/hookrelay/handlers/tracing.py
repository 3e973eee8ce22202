"""X-Ray tracing, when the deployment turns it on (CDK context `xray_tracing`): AWS calls only.

Off (the default), `tracer` gives decorators that return the function as it is, and neither Powertools' Tracer nor
the X-Ray SDK (about 260 ms of a cold start) is imported. The stack sets `POWERTOOLS_TRACE_DISABLED` to "false"
exactly when tracing is on (stacks/constructs/functions.py); unset (the local stack, the tests) means off.

On, Powertools' Tracer would patch every library X-Ray supports unless told otherwise, `requests` among them:
each webhook would then carry an `X-Amzn-Trace-Id` header to the consumer, and X-Ray would record endpoint URLs
(whose paths may hold a consumer's capability tokens). Only botocore is patched; the delivery's own logs and
metrics record attempts.

A producer's W3C trace (domain/trace_context.py) is joined to the platform's: ingest annotates its segment with the
trace id when the request carried one (`W3C_TRACE_ID`, searchable in X-Ray: `annotation.w3c_trace_id = "..."`); the
delivery function's log lines of attempts that did not deliver carry the trace id and the span id each sent (every
attempt's is in the delivery log). Off, the annotation is a no-op call.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from hookrelay.adapters import schema

TRACED_MODULES = ("botocore",)
W3C_TRACE_ID = "w3c_trace_id"  # the X-Ray annotation naming the producer's W3C trace
TRACE_SWITCH = schema.TRACE_SWITCH

F = TypeVar("F", bound=Callable[..., Any])


class Tracing(Protocol):
    def capture_lambda_handler(self, *, capture_response: bool = ...) -> Callable[[F], F]: ...

    def capture_method(self, *, capture_response: bool = ...) -> Callable[[F], F]: ...

    def put_annotation(self, key: str, value: str) -> None: ...


class NoTracing:
    """Tracing off: the decorators change nothing."""

    def capture_lambda_handler(self, *, capture_response: bool = True) -> Callable[[F], F]:
        return _unchanged

    def capture_method(self, *, capture_response: bool = True) -> Callable[[F], F]:
        return _unchanged

    def put_annotation(self, key: str, value: str) -> None:
        return None


def _unchanged(function: F) -> F:
    return function


def enabled() -> bool:
    return schema.tracing_on(os.environ)


def tracer(service: str) -> Tracing:
    if not enabled():
        return NoTracing()
    from aws_lambda_powertools import Tracer

    traced: Tracing = Tracer(service=service, patch_modules=TRACED_MODULES)
    return traced
