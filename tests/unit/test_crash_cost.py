"""What a crashed delivery invocation costs: its message group is held until the delivery queue's visibility timeout
passes. The function's timeout, its claims' and that visibility timeout are one derivation from the attempt timeout
(`hookrelay.adapters.schema`); these hold it to its reasons. Design bounds on configuration, not timings."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from botocore.retries.standard import ExponentialBackoff, RetryContext

from hookrelay import functions
from hookrelay.adapters import schema
from hookrelay.domain.classification import ATTEMPT_TIMEOUT_SECONDS
from hookrelay.functions import DELIVERY

# The bound: a crashed invocation holds its endpoint's message group for at most about a minute and a half.
CRASH_HOLDS_A_GROUP_AT_MOST_SECONDS = 90


def test_a_crashed_delivery_invocation_holds_its_group_for_at_most_about_90_seconds() -> None:
    assert schema.DELIVERY_QUEUE.visibility_timeout_seconds <= CRASH_HOLDS_A_GROUP_AT_MOST_SECONDS


def test_the_delivery_timeout_covers_an_attempt_and_two_aws_calls_retried_to_the_end() -> None:
    assert DELIVERY.timeout_seconds == schema.DELIVERY_FUNCTION_TIMEOUT_SECONDS
    assert DELIVERY.timeout_seconds >= ATTEMPT_TIMEOUT_SECONDS + 2 * schema.AWS_CALL_BACKOFF_SECONDS


class _Throttled:
    """Every error a throttle: botocore backs off from 1 s for those (from 50 ms for others)."""

    def is_throttling_error_from_context(self, context: RetryContext) -> bool:
        return True


def test_the_backoff_allowed_is_botocores_longest_for_a_throttled_call() -> None:
    """botocore's standard retries of a throttled call, each backoff at its longest (the jitter's draw at 1)."""
    backoff = ExponentialBackoff(random=lambda: 1.0, throttling_detector=_Throttled())
    longest = sum(
        backoff.delay_amount(RetryContext(attempt_number=attempt)) for attempt in range(1, schema.AWS_CALL_TRIES)
    )
    assert longest == schema.AWS_CALL_BACKOFF_SECONDS == 15


def test_every_queue_is_visible_again_no_sooner_than_its_function_times_out() -> None:
    """Lambda's rule for an SQS event source (checked by Lambda only at deploy time)."""
    for function, trigger in functions.queue_triggered():
        assert trigger.queue.visibility_timeout_seconds >= function.timeout_seconds, function.name


def test_a_message_back_from_a_crash_finds_the_dead_invocations_claim_abandoned() -> None:
    """A claim is made within the invocation (within one function timeout of the receive) and is abandoned one claim
    timeout later; the claim timeout is no shorter than the function's, by when Lambda has ended the invocation."""
    claim = timedelta(seconds=schema.DELIVERY_CLAIM_TIMEOUT_SECONDS)
    assert claim >= timedelta(seconds=DELIVERY.timeout_seconds)
    assert schema.DELIVERY_QUEUE.visibility_timeout_seconds >= DELIVERY.timeout_seconds + claim.total_seconds()


def test_a_queue_visible_again_before_its_function_times_out_is_refused() -> None:
    short = replace(schema.DELIVERY_QUEUE, visibility_timeout_seconds=DELIVERY.timeout_seconds - 1)
    function = replace(DELIVERY, trigger=functions.QueueTrigger(short, batch_size=1))
    with pytest.raises(ValueError, match="shorter than the delivery function's timeout"):
        functions._check_visibility((function,))
