"""boto3 clients, made once per process on first use.

Lazily, so that importing a handler costs nothing until it runs and tests can start moto first; the
endpoint comes from the standard `AWS_ENDPOINT_URL` variable, which is how the local stack points
every client at moto's server without the handlers knowing.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any, TypeVar

import boto3
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.retries.standard import RetryContext, ThrottledRetryableChecker

from hookrelay.adapters import schema

# Every AWS call (DynamoDB, SQS, SNS, Step Functions) retries the same way, this one definition: botocore's
# "standard" mode retries throttling errors (ProvisionedThroughputExceededException, ThrottlingException,
# RequestThrottled, Throttling), 5xx answers and connection errors, up to MAX_ATTEMPTS tries in all, each after an
# exponential backoff with full jitter (so that throttled invocations do not retry in step), within a client-side
# retry quota (so that an outage is not made worse by retries): at most 1 + 2 + 4 + 8 = 15 s of backing off, inside
# the API's 29 s and every function's timeout. Past that the call raises, the invocation fails,
# and what invoked it tries again: the queue redelivers the message (a batch item failure), the schedule runs again,
# the API answers 503 with Retry-After and the producer retries under its Idempotency-Key. Not "adaptive": its
# client-side rate limiter would hold a Lambda's single invocation back, with nothing shared to learn from. What a
# batch call leaves undone, which botocore does not retry, is sent again the same way (`resend_left`).
MAX_ATTEMPTS = schema.AWS_CALL_TRIES  # tries in all, the first included (botocore's `max_attempts`: retries only)
_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": MAX_ATTEMPTS}, connect_timeout=3, read_timeout=10)


# How long a caller is asked to wait after a throttle outlasted the retries (the API's Retry-After): the retries'
# own backoff has spent about this long already.
THROTTLED_RETRY_AFTER_SECONDS = 2
_THROTTLE = ThrottledRetryableChecker()


def throttled(error: BaseException | None) -> bool:
    """An AWS call refused for a quota (the codes botocore's retries treat as throttling), after its retries; or an
    error raised while handling one (Powertools' idempotency failing to release its record, throttled too)."""
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, ClientError):
            context = RetryContext(attempt_number=MAX_ATTEMPTS, parsed_response=error.response)
            if _THROTTLE.is_retryable(context):
                return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


_sleep = time.sleep  # the backoff's (tests replace it)
R = TypeVar("R")
A = TypeVar("A")


def resend_left(send: Callable[[R], A], request: R, left: Callable[[R, A], R | None], operation: str) -> Iterator[A]:
    """Each answer to a batch `request`, sending again what the answer left undone (`left`: the request for it, or
    None) until nothing is left: DynamoDB's unprocessed items and keys, SQS's entries failed on its side.

    Sent again as a throttled call is retried: up to MAX_ATTEMPTS rounds in all, each after a backoff with full
    jitter within botocore's cap for that retry, and past them raised as throttling, so that the API answers 503 with
    Retry-After and a queue or schedule tries again. Not boto3's `batch_writer`, which sends what is left again at
    once, as often as it is left: against a throttled partition, a tight loop until the function times out. moto
    never leaves anything: tests/integration/test_unprocessed.py leaves entries out of its answers."""
    for retry in range(MAX_ATTEMPTS):
        if retry:
            _sleep(random.uniform(0, schema.aws_call_backoff_cap(retry - 1)))
        answer = send(request)
        yield answer
        undone = left(request, answer)
        if undone is None:
            return
        request = undone
    error = {"Code": "RequestLimitExceeded", "Message": f"{operation}: still left undone after {MAX_ATTEMPTS} tries"}
    raise ClientError({"Error": error}, operation)


# Set by the local stack only (local/stack.py): its functions' calls go to its own moto servers, so the client skips
# two costs that only AWS itself needs. Unsigned: moto checks no signature, and signing was about 15% of the
# functions' CPU samples (py-spy of the throughput benchmark's workers). Not validated against the service model
# before sending: a sixth of a call's client CPU on the functions' items (1.83 ms a call against 1.55, a
# batch write, a read and an update, side by side). A call botocore would refuse still fails in the integration
# tier, which runs the same adapters with its checks on. Deployed functions never have the variable
# (tests/infrastructure/test_functions.py): unset, every call is signed and checked.
LOCAL_MOTO_CALLS = "HOOKRELAY_LOCAL_MOTO_CALLS"
_LOCAL_MOTO = Config(signature_version=UNSIGNED, parameter_validation=False)


def _config() -> Config:
    return _CONFIG.merge(_LOCAL_MOTO) if os.environ.get(LOCAL_MOTO_CALLS) == "true" else _CONFIG


@cache
def client(service: str) -> Any:
    return boto3.client(service, config=_config())


@cache
def table(name: str) -> Any:
    return boto3.resource("dynamodb", config=_config()).Table(name)


def reset() -> None:
    """Forget every client (tests and the local stack call this when the AWS endpoint changes)."""
    client.cache_clear()
    table.cache_clear()
