"""X-Ray tracing, when the deployment turns it on (CDK context `xray_tracing`): AWS calls only.

Off (the default), `tracer` gives decorators that return the function as it is, and neither Powertools' Tracer nor
the X-Ray SDK (about 260 ms of a cold start) is imported. The stack sets `POWERTOOLS_TRACE_DISABLED` to "false"
exactly when tracing is on (stacks/constructs/functions.py); unset (the local stack, the tests) means off.

On, Powertools' Tracer would patch every library X-Ray supports unless told otherwise, `requests` among them:
each webhook would then carry an `X-Amzn-Trace-Id` header to the consumer, and X-Ray would record endpoint URLs
(whose paths may hold a consumer's capability tokens). Only botocore is patched; the delivery's own logs and
metrics record attempts.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

TRACED_MODULES = ("botocore",)
TRACE_SWITCH = "POWERTOOLS_TRACE_DISABLED"

F = TypeVar("F", bound=Callable[..., Any])


class Tracing(Protocol):
    def capture_lambda_handler(self, *, capture_response: bool = ...) -> Callable[[F], F]: ...

    def capture_method(self, *, capture_response: bool = ...) -> Callable[[F], F]: ...


class NoTracing:
    """Tracing off: the decorators change nothing."""

    def capture_lambda_handler(self, *, capture_response: bool = True) -> Callable[[F], F]:
        return _unchanged

    def capture_method(self, *, capture_response: bool = True) -> Callable[[F], F]:
        return _unchanged


def _unchanged(function: F) -> F:
    return function


def enabled() -> bool:
    return os.environ.get(TRACE_SWITCH, "true").strip().lower() in ("false", "0")


def tracer(service: str) -> Tracing:
    if not enabled():
        return NoTracing()
    from aws_lambda_powertools import Tracer

    traced: Tracing = Tracer(service=service, patch_modules=TRACED_MODULES)
    return traced
