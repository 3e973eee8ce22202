"""X-Ray tracing for every function: AWS calls only.

Powertools' Tracer patches every library X-Ray supports unless told otherwise, `requests` among them: each
webhook would then carry an `X-Amzn-Trace-Id` header to the consumer, and X-Ray would record endpoint URLs
(whose paths may hold a consumer's capability tokens). Only botocore is patched; the delivery's own logs and
metrics record attempts.
"""

from __future__ import annotations

from aws_lambda_powertools import Tracer

TRACED_MODULES = ("botocore",)


def tracer(service: str) -> Tracer:
    return Tracer(service=service, patch_modules=TRACED_MODULES)
