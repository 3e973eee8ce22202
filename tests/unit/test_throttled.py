"""Which AWS errors are a quota's (adapters/aws.py): the API answers those 503 with Retry-After, not 500."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from hookrelay.adapters.aws import throttled


def error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "m"}}, "Op")


@pytest.mark.parametrize(
    "code", ["ProvisionedThroughputExceededException", "ThrottlingException", "RequestThrottled", "Throttling"]
)
def test_each_services_throttling_error_is_one(code: str) -> None:
    assert throttled(error(code))


@pytest.mark.parametrize("code", ["ConditionalCheckFailedException", "AccessDeniedException", "ValidationException"])
def test_other_errors_are_not(code: str) -> None:
    assert not throttled(error(code))
    assert not throttled(RuntimeError("no AWS here"))


def test_an_error_raised_while_handling_a_throttle_is_one() -> None:
    try:
        try:
            raise error("RequestThrottled")
        except ClientError as throttle:
            raise RuntimeError("could not release the idempotency record") from throttle
    except RuntimeError as outer:
        assert throttled(outer)
