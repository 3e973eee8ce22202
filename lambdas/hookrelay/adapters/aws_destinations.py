"""Sending an attempt to an AWS destination in the consumer's account: STS, then SQS, SNS or EventBridge.

The consumer's role is assumed with the tenant's external ID (domain/destinations.py) and its credentials kept, per
role and external ID, until shortly before they expire; a 403 drops them, so a fixed trust or policy is picked up
by the next attempt. Every AWS error becomes the attempt's result as a webhook's answer would: its HTTP status
(throttling as 429), and `<code>: <message>` as the response excerpt, so the response table, the retry schedule and
the circuit treat it as they treat an endpoint. Nothing here logs: the excerpt is the tenant's own account's answer.

Each call is made once (botocore's retries off): the retry schedule is the contract's, not the SDK's.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from hookrelay.domain.classification import ATTEMPT_TIMEOUT_SECONDS, FailureKind
from hookrelay.domain.destinations import (
    ASSUMED_ROLE_SECONDS,
    EVENTBRIDGE_SOURCE,
    REFRESH_BEFORE_SECONDS,
    TRUST_CHECK_EXTERNAL_ID,
    AwsDestination,
    DestinationKind,
    aws_destination,
)
from hookrelay.domain.models import RESPONSE_EXCERPT_BYTES
from hookrelay.domain.trace_context import TRACEPARENT_HEADER, TRACESTATE_HEADER
from hookrelay.services.ports import DestinationMessage, SendResult

# SQS and SNS take at most ten message attributes (the webhook's headers); the trace context's fill what room is left.
MAX_MESSAGE_ATTRIBUTES = 10
TRACE_HEADERS = (TRACEPARENT_HEADER, TRACESTATE_HEADER)
_THROTTLED = frozenset({"Throttling", "ThrottlingException", "RequestThrottled", "TooManyRequestsException"})
_SERVICE = {DestinationKind.SQS: "sqs", DestinationKind.SNS: "sns", DestinationKind.EVENTBRIDGE: "events"}
_CONFIG = Config(
    connect_timeout=ATTEMPT_TIMEOUT_SECONDS,
    read_timeout=ATTEMPT_TIMEOUT_SECONDS,
    retries={"total_max_attempts": 1},
)


class AwsDestinations:
    def __init__(
        self,
        session: Callable[..., Any] = boto3.session.Session,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._session = session
        self._clock = clock
        self._lock = threading.Lock()  # boto3 sessions are not thread safe: a batch's groups send at once
        self._sts: Any = None
        # (role, external id) -> (session, expiry, its clients by (service, region)): dropped together.
        self._assumed: dict[tuple[str, str], tuple[Any, float, dict[tuple[str, str], Any]]] = {}

    def send(self, url: str, role_arn: str, external_id: str, session: str, message: DestinationMessage) -> SendResult:
        started = time.monotonic()
        destination = aws_destination(url)
        try:
            client = self._client(destination, role_arn, external_id, session)
            excerpt = _put(client, destination, message)
            return SendResult(200, _elapsed(started), response_excerpt=excerpt)
        except ClientError as error:
            return self._refused(error, role_arn, external_id, _elapsed(started))
        except (ConnectTimeoutError, ReadTimeoutError) as error:
            return SendResult(None, _elapsed(started), FailureKind.TIMEOUT, type(error).__name__)
        except EndpointConnectionError as error:
            return SendResult(None, _elapsed(started), FailureKind.CONNECTION, type(error).__name__)
        except BotoCoreError as error:
            return SendResult(None, _elapsed(started), FailureKind.CONNECTION, type(error).__name__)

    def _refused(self, error: ClientError, role_arn: str, external_id: str, latency_ms: int) -> SendResult:
        details = error.response.get("Error", {})
        code = str(details.get("Code", "Error"))
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 400)
        if code in _THROTTLED:
            status = 429
        if status == 403:
            with self._lock:
                self._assumed.pop((role_arn, external_id), None)
        excerpt = f"{code}: {details.get('Message', '')}"[:RESPONSE_EXCERPT_BYTES]
        return SendResult(status, latency_ms, response_excerpt=excerpt)

    def _client(self, destination: AwsDestination, role_arn: str, external_id: str, name: str) -> Any:
        """The assumed session's client for the destination's service and region, made once per session: making a
        client costs milliseconds of CPU, which every attempt would otherwise pay on the delivery path."""
        assumed, clients = self._assume(role_arn, external_id, name)
        key = (_SERVICE[destination.kind], destination.region)
        with self._lock:
            if key not in clients:
                clients[key] = assumed.client(key[0], region_name=destination.region, config=_CONFIG)
            return clients[key]

    def _assume(self, role_arn: str, external_id: str, name: str) -> tuple[Any, dict[tuple[str, str], Any]]:
        key = (role_arn, external_id)
        with self._lock:
            held = self._assumed.get(key)
            if held is not None and held[1] - REFRESH_BEFORE_SECONDS > self._clock():
                return held[0], held[2]
            if self._sts is None:
                self._sts = self._session().client("sts", config=_CONFIG)
            sts = self._sts
        _require_external_id(sts, role_arn, name, external_id)
        credentials = sts.assume_role(
            RoleArn=role_arn, RoleSessionName=name, ExternalId=external_id, DurationSeconds=ASSUMED_ROLE_SECONDS
        )["Credentials"]
        assumed = self._session(
            aws_access_key_id=credentials["AccessKeyId"],
            aws_secret_access_key=credentials["SecretAccessKey"],
            aws_session_token=credentials["SessionToken"],
        )
        clients: dict[tuple[str, str], Any] = {}
        with self._lock:
            self._assumed[key] = (assumed, credentials["Expiration"].timestamp(), clients)
        return assumed, clients


def _require_external_id(sts: Any, role_arn: str, name: str, external_id: str) -> None:
    """Refuse a role that trusts the delivery role without requiring the tenant's external ID: any tenant of the
    deployment could then send into that account (the confused deputy). Asked as STS answers it: an assume with an
    ID no tenant has must be denied. Once per fresh credentials (an hour), not per attempt."""
    try:
        sts.assume_role(RoleArn=role_arn, RoleSessionName=name, ExternalId=TRUST_CHECK_EXTERNAL_ID)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "AccessDenied":
            return
        raise
    raise ClientError(
        {
            "Error": {
                "Code": "UnsafeTrust",
                "Message": f"the role's trust policy must require sts:ExternalId {external_id} (it let "
                "hookrelay assume it without it)",
            },
            "ResponseMetadata": {"HTTPStatusCode": 403},
        },
        "AssumeRole",
    )


def _put(client: Any, destination: AwsDestination, message: DestinationMessage) -> str:
    """Send the message; the destination's id for it (the attempt's response excerpt)."""
    if destination.kind is DestinationKind.EVENTBRIDGE:
        return _put_event(client, destination, message)
    attributes = {name: {"DataType": "String", "StringValue": value} for name, value in _attributes(message.headers)}
    fifo = (
        {"MessageGroupId": message.group, "MessageDeduplicationId": message.deduplication_id}
        if destination.fifo
        else {}
    )
    if destination.kind is DestinationKind.SQS:
        sent = client.send_message(
            QueueUrl=destination.queue_url,
            MessageBody=message.body.decode(),
            MessageAttributes=attributes,
            **fifo,
        )
    else:
        sent = client.publish(
            TopicArn=destination.arn, Message=message.body.decode(), MessageAttributes=attributes, **fifo
        )
    return json.dumps({"MessageId": sent["MessageId"]})


def _attributes(headers: dict[str, str]) -> list[tuple[str, str]]:
    """The headers as message attributes: the W3C trace context's (domain/trace_context.py) only where there is
    room for them within SQS's and SNS's ten, after the signature's and the endpoint's own."""
    trace = [(name, value) for name, value in headers.items() if name in TRACE_HEADERS]
    others = [(name, value) for name, value in headers.items() if name not in TRACE_HEADERS]
    return others + trace[: max(0, MAX_MESSAGE_ATTRIBUTES - len(others))]


def _put_event(client: Any, destination: AwsDestination, message: DestinationMessage) -> str:
    """PutEvents answers 200 with per-entry failures: an entry's error becomes the attempt's, as a status."""
    entry = {
        "Source": EVENTBRIDGE_SOURCE,
        "DetailType": message.event_type,
        "Detail": message.body.decode(),
        "EventBusName": destination.arn,
    }
    answer = client.put_events(Entries=[entry])
    result = answer["Entries"][0]
    if answer.get("FailedEntryCount"):
        code = result.get("ErrorCode", "Error")
        status = 429 if code in _THROTTLED else 500 if code == "InternalFailure" else 400
        raise ClientError(
            {
                "Error": {"Code": code, "Message": result.get("ErrorMessage", "")},
                "ResponseMetadata": {"HTTPStatusCode": status},
            },
            "PutEvents",
        )
    return json.dumps({"EventId": result["EventId"]})


def _elapsed(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
