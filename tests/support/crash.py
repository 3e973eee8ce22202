"""Crash and throttle injection: the process dies at one AWS call, as a Lambda invocation dies (a timeout, an
out-of-memory); or AWS throttles one call, on every try botocore makes (past the retry budget of adapters/aws.py).

`CrashInjector` sits on boto3's default session (every adapter's client comes from it) and sees each AWS call a
function makes inside an invocation (`local.lambda_runtime.RUNNING`). Armed at call number n of the named
functions, it raises `Crash` there, before the call reaches AWS. `Crash` is a BaseException, not an Exception: no
handler, no Powertools utility and no `except Exception` in the code under test can catch it and tidy up (Powertools
idempotency deletes its in-progress record on an Exception; a dead process deletes nothing).

Armed to throttle (`mode="throttle"`), it lets call n through to botocore, and moto answers each of its HTTP tries
with the service's throttling error (DynamoDB ProvisionedThroughputExceededException, Step Functions
ThrottlingException, SQS RequestThrottled, SNS Throttling) instead of carrying it out: botocore's retries see real
throttling answers, back off (the computed delays are recorded, not slept) and give up with the ClientError the
adapter then raises, as an Exception the code under test may handle.

The matrix of crash points and throttle cases, and their outcomes, is collected here and printed at the end of the
run (tests/integration/conftest.py).
"""

from __future__ import annotations

import json
import re
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.awsrequest import AWSResponse
from botocore.retries import standard
from moto.core.botocore_stubber import BotocoreStubber, MockRawResponse

from hookrelay import wiring
from local.lambda_runtime import RUNNING


class Crash(BaseException):
    """The process died here."""


# Each service's throttling answer, as AWS gives it (status, headers, body).
THROTTLED: dict[str, tuple[int, dict[str, str], str]] = {
    "DynamoDB": (
        400,
        {"content-type": "application/x-amz-json-1.0"},
        json.dumps(
            {
                "__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
                "message": "The level of configured provisioned throughput for the table was exceeded.",
            }
        ),
    ),
    "SFN": (
        400,
        {"content-type": "application/x-amz-json-1.0"},
        json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}),
    ),
    "SQS": (
        400,
        {"content-type": "application/x-amz-json-1.0", "x-amzn-query-error": "RequestThrottled;Sender"},
        json.dumps({"__type": "com.amazonaws.sqs#RequestThrottled", "message": "Rate exceeded"}),
    ),
    "SNS": (
        400,
        {"content-type": "text/xml"},
        "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error>"
        "<RequestId>throttled</RequestId></ErrorResponse>",
    ),
}
FOREVER = 10_000  # tries to throttle: past any retry budget
_NUMBERING = threading.Lock()


@dataclass(frozen=True)
class Point:
    """A call as a crash point names it: its kind (label, any shard), its site, and which of the kind's calls at
    that site it is (from 1), whatever the run's other calls."""

    kind: str
    site: str
    nth: int


@dataclass
class CrashInjector:
    functions: frozenset[str] = frozenset()
    # the call number (from 0) to die (or be throttled) at, among the functions' calls; or the first call so labelled
    # (any shard of a queue); or a Point: the nth so labelled made at one site. A number shifts when a run makes a call
    # more or fewer before it: a parking-lot entry's partitions are two or three as its shards under 32 and 16 coincide.
    crash_at: int | str | Point | None = None
    mode: str = "crash"  # or "throttle"
    throttle_tries: int = FOREVER  # how many of the call's HTTP tries are throttled
    calls: list[str] = field(default_factory=list)  # "function: Service.Operation" of each call seen
    points: list[Point] = field(default_factory=list)  # each call as a crash point names it (its kind and site)
    _made: Counter[tuple[str, str]] = field(default_factory=Counter)  # calls so far by (kind, site)
    crashed: str | None = None  # where it struck (a crash, or the throttled call)
    throttling: str | None = None  # the service whose call is being throttled now, and for how many more tries
    throttled_thread: int | None = None  # the thread making it (a read across shards makes its calls on several)
    tries_left: int = 0
    throttled_send: str = ""  # the botocore event of its HTTP tries
    throttled_tries: int = 0  # HTTP tries answered with a throttling error
    backoffs: list[float] = field(default_factory=list)  # the delays botocore computed before retrying

    def __call__(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        function = RUNNING.get()
        if function is None or function not in self.functions:
            return
        service = model.service_model.service_id
        label = f"{function}: {service}.{model.name}{_target(params)}"
        with _NUMBERING:  # a read across shards makes its calls on several threads at once
            number = len(self.calls)
            site, kind = _site(), unsharded(label)
            self._made[kind, site] += 1
            point = Point(kind, site, self._made[kind, site])
            self.calls.append(label)
            self.points.append(point)
            if self.throttled_thread == threading.get_ident():  # a thread's calls come one at a time: that one ended
                self.throttling, self.tries_left = None, 0
            if self.crash_at not in (number, kind, point) or self.crashed is not None:
                return
            self.crashed = label
            if self.mode == "throttle":
                self.throttling, self.tries_left = service, self.throttle_tries
                self.throttled_thread = threading.get_ident()
                self.throttled_send = f"before-send.{model.service_model.service_id.hyphenize()}.{model.name}"
                return
        raise Crash(label)

    def throttled(self, event_name: str, request_url: str) -> AWSResponse | None:
        """moto's answer to this HTTP try, if it is to be throttled (a try of the throttled call itself)."""
        if self.throttling is None or self.tries_left <= 0 or RUNNING.get() not in self.functions:
            return None
        if event_name != self.throttled_send or threading.get_ident() != self.throttled_thread:
            return None
        self.tries_left -= 1
        self.throttled_tries += 1
        status, headers, body = THROTTLED[self.throttling]
        return AWSResponse(request_url, status, headers, MockRawResponse(body))  # type: ignore[arg-type]

    def arm(
        self,
        functions: frozenset[str],
        crash_at: int | str | Point | None,
        *,
        mode: str = "crash",
        tries: int = FOREVER,
    ) -> None:
        if isinstance(crash_at, str):
            crash_at = unsharded(crash_at)
        self.functions, self.crash_at, self.calls, self.crashed = functions, crash_at, [], None
        self.points, self._made = [], Counter()
        self.mode, self.throttle_tries, self.throttling, self.tries_left = mode, tries, None, 0
        self.throttled_thread = None
        self.throttled_tries, self.backoffs = 0, []

    def disarm(self) -> None:
        self.functions, self.crash_at, self.throttling, self.tries_left = frozenset(), None, None, 0
        self.throttled_thread = None


def _site() -> str:
    """Where in hookrelay (or Powertools' idempotency) the call was made: every such frame's `function:line`, so
    that one adapter helper called from two places is two sites, and a step repeated for each item is one."""
    frames = []
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith(("hookrelay.", "aws_lambda_powertools.utilities.idempotency")):
            frames.append(f"{name}.{frame.f_code.co_name}:{frame.f_lineno}")
        frame = frame.f_back  # type: ignore[assignment]
    return " < ".join(frames)


def unsharded(label: str) -> str:
    """A label as a crash point names it: any shard of a queue (a run's endpoint hashes to one shard or another)."""
    return re.sub(r"Shard\d+", "", label)  # shard 0 of the delivery queue is named without one


def _target(params: dict[str, Any]) -> str:
    """Which table or queue the call is on, briefly: the matrix's rows name them."""
    name = params.get("TableName") or params.get("QueueUrl") or params.get("TopicArn") or ""
    if not name and "RequestItems" in params:
        name = ",".join(params["RequestItems"])
    if not name and "TransactItems" in params:
        name = "transaction"
    short = str(name).rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    for prefix in ("hookrelay-", "Hookrelay-"):
        short = short.removeprefix(prefix)
    return f" [{short}]" if short else ""


@contextmanager
def injector() -> Iterator[CrashInjector]:
    """Installed on the default session for the block; services are rebuilt so their clients carry it. moto's
    answer goes through it (a throttled try is never carried out), and botocore's backoff is recorded, not slept."""
    hook = CrashInjector()
    session = boto3._get_default_session()
    session.events.register("before-parameter-build", hook)
    moto_answer = BotocoreStubber.__call__
    backoff = standard.ExponentialBackoff.delay_amount

    def answer(stubber: BotocoreStubber, event_name: str, request: Any, **kwargs: Any) -> AWSResponse | None:
        return hook.throttled(event_name, request.url) or moto_answer(stubber, event_name, request, **kwargs)

    def recorded_backoff(self: standard.ExponentialBackoff, context: Any) -> float:
        hook.backoffs.append(backoff(self, context))
        return 0.0

    BotocoreStubber.__call__ = answer  # type: ignore[method-assign]
    standard.ExponentialBackoff.delay_amount = recorded_backoff  # type: ignore[method-assign]
    wiring.reset()
    try:
        yield hook
    finally:
        session.events.unregister("before-parameter-build", hook)
        BotocoreStubber.__call__ = moto_answer  # type: ignore[method-assign]
        standard.ExponentialBackoff.delay_amount = backoff  # type: ignore[method-assign]
        wiring.reset()


@dataclass(frozen=True)
class Row:
    path: str
    point: str  # where it died or was throttled ("-" for the run with neither)
    outcome: str
    kind: str = "crash"  # or "throttle"


MATRIX: list[Row] = []


def matrix_lines() -> list[str]:
    if not MATRIX:
        return []
    width = max(len(f"{row.path}  {row.point}") for row in MATRIX)
    crashes = [row for row in MATRIX if row.point != "-" and row.kind == "crash"]
    throttles = [row for row in MATRIX if row.point != "-" and row.kind == "throttle"]
    paths = len({r.path for r in MATRIX})
    lines = [f"crash-point matrix: {len(crashes)} crash points and {len(throttles)} throttle cases on {paths} paths"]
    lines += [f"  {f'{row.path}  {row.point}':<{width}}  ->  {row.outcome}" for row in MATRIX]
    return lines
