"""Every AWS call a local function makes, checked against its role's statements, and refused as AWS refuses it.

moto's servers check no IAM policy, so a call a function's role lacks would pass every local run and fail in AWS.
Here each call a function makes (attributed by `local.lambda_runtime.RUNNING`: in the integration tier's process
and in each worker process alike) is authorized before it is sent: its IAM action and resource ARNs (a DynamoDB
index, each table of a batch, each item of a transaction) against the function's statements
(`hookrelay.function_permissions`, resolved to moto's ARNs by `local.as_deployed`), matched with moto's own IAM
policy evaluation (`moto.iam.access_control.IAMPolicy`: wildcards as AWS matches them). A call they do not allow
raises the `ClientError` AWS returns (AccessDeniedException, SQS's AccessDenied, SNS's AuthorizationError), so the
handler fails exactly as it would deployed. Calls made outside an invocation (the event sources, the tests, the
local stack itself) are not a function's and are not checked.

Each authorized call is also recorded (`calls`), so a run can report, per function, the actions its role grants
and it never called (`unused`).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.client import BaseClient
from botocore.exceptions import ClientError
from moto.iam.access_control import IAMPolicy, PermissionResult

from hookrelay.function_permissions import Statement
from local import as_deployed, trust
from local.lambda_runtime import RUNNING

# The IAM service prefix of each botocore service name we call.
_PREFIX = {"dynamodb": "dynamodb", "sqs": "sqs", "stepfunctions": "states", "sns": "sns", "sts": "sts"}
# Batch calls are authorized as their single-message action (SQS's documented equivalence).
_AS_ACTION = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}
# Each item of a DynamoDB transaction is authorized as its own action on its own table.
_TRANSACTION_ITEM_ACTION = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}
# The code each service answers a refused call with.
_DENIED_CODE = {
    "dynamodb": "AccessDeniedException",
    "sqs": "AccessDenied",
    "states": "AccessDeniedException",
    "sns": "AuthorizationError",
    "sts": "AccessDenied",
}
# The HTTP status each service answers a refused call with (STS's is 403; the others answer 400).
_DENIED_STATUS = {"sts": 403}


# The variable naming the file of calls seen (`IamCheck`'s `log`): the test tiers' report of grants never used.
CALLS_LOG = "HOOKRELAY_IAM_CALLS_LOG"


def unused_actions(seen: set[tuple[str, str]], policies: Mapping[str, tuple[Statement, ...]]) -> dict[str, list[str]]:
    """Per function, the actions its statements grant its code that `seen` (function, action) never has."""
    return {
        function: sorted({a for s in statements if not s.on_behalf for a in s.actions if (function, a) not in seen})
        for function, statements in policies.items()
    }


@dataclass(frozen=True)
class Call:
    function: str
    action: str  # "dynamodb:GetItem"
    resource: str


class IamCheck:
    """The statements of every function, the check of each call against them, and the record of calls made."""

    def __init__(self, policies: Mapping[str, tuple[Statement, ...]], region: str, log: str | None = None) -> None:
        """`log`: a file each newly seen (function, action) is appended to, for a report across processes (the
        local stack's workers, the test tier's workers); by default `CALLS_LOG`'s file, if it names one."""
        self._region = region
        self._log = log if log is not None else os.environ.get(CALLS_LOG)
        self._policies = {name: IAMPolicy(json.dumps(_document(s))) for name, s in policies.items()}
        self._statements = dict(policies)
        self._state_machines = {r for s in policies.values() for st in s for r in st.resources if ":stateMachine:" in r}
        self._lock = threading.Lock()
        self.calls: set[Call] = set()
        self._actions_called: set[tuple[str, str]] = set()
        self._assumed_keys: set[str] = set()

    def authorize(self, function: str, service: str, operation: str, params: Mapping[str, Any]) -> None:
        prefix = _PREFIX.get(service, service)
        for action, resource in self._requested(prefix, operation, params):
            allowed = self._policies[function].is_action_permitted(action, resource) is PermissionResult.PERMITTED
            if not allowed:
                raise _denied(prefix, operation, function, action, resource)
            self._record(Call(function, action, resource))

    def _record(self, call: Call) -> None:
        with self._lock:
            first = (call.function, call.action) not in self._actions_called
            self._actions_called.add((call.function, call.action))
            self.calls.add(call)
        if first and self._log:
            with open(self._log, "a") as log:  # one short line: appended whole, whoever else appends
                log.write(f"{call.function} {call.action}\n")

    def assumed(self, access_key: str) -> None:
        """Credentials a function was given by assuming a consumer's role (an AWS destination's)."""
        with self._lock:
            self._assumed_keys.add(access_key)

    def under_assumed_role(self, client: BaseClient) -> bool:
        """A client signing with an assumed consumer role's credentials: the consumer's role's policy allows its
        calls, not the function's (a policy of the consumer's account: AWS checks it, this check does not)."""
        credentials = getattr(getattr(client, "_request_signer", None), "_credentials", None)
        return credentials is not None and getattr(credentials, "access_key", None) in self._assumed_keys

    def unused(self) -> dict[str, list[str]]:
        """Per function, the actions its statements grant its code that no recorded call used."""
        return unused_actions(self._actions_called, self._statements)

    def _requested(self, prefix: str, operation: str, params: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        """The (action, resource) pairs IAM authorizes for one call."""
        if prefix == "dynamodb":
            yield from self._dynamodb(operation, params)
        elif prefix == "sqs":
            queue = params.get("QueueUrl", "")
            yield f"sqs:{_AS_ACTION.get(operation, operation)}", as_deployed.queue_arn(queue, self._region)
        elif prefix == "states":
            if "taskToken" in params:  # authorized against the state machine whose task issued the token: ours
                for state_machine in sorted(self._state_machines) or ["*"]:
                    yield f"states:{operation}", state_machine
            else:
                yield f"states:{operation}", params.get("stateMachineArn") or params.get("executionArn", "*")
        elif prefix == "sns":
            yield f"sns:{operation}", params.get("TopicArn", "*")
        elif prefix == "sts":
            yield f"sts:{operation}", params.get("RoleArn", "*")
        else:
            yield f"{prefix}:{operation}", "*"

    def _dynamodb(self, operation: str, params: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        if operation in ("TransactWriteItems", "TransactGetItems"):
            for item in params["TransactItems"]:
                [(kind, body)] = item.items()
                action = "GetItem" if kind == "Get" else _TRANSACTION_ITEM_ACTION[kind]
                yield f"dynamodb:{action}", self._table_arn(body["TableName"])
        elif "RequestItems" in params:
            for table in params["RequestItems"]:
                yield f"dynamodb:{operation}", self._table_arn(table)
        else:
            arn = self._table_arn(params["TableName"])
            index = params.get("IndexName")
            yield f"dynamodb:{operation}", f"{arn}/index/{index}" if index else arn

    def _table_arn(self, name: str) -> str:
        return (
            name if name.startswith("arn:") else f"arn:aws:dynamodb:{self._region}:{as_deployed.ACCOUNT}:table/{name}"
        )


def _document(statements: tuple[Statement, ...]) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": list(s.actions), "Resource": list(s.resources)} for s in statements
        ],
    }


def _denied(prefix: str, operation: str, function: str, action: str, resource: str) -> ClientError:
    role = f"arn:aws:sts::{as_deployed.ACCOUNT}:assumed-role/{as_deployed.function_name(function)}-role/{function}"
    message = (
        f"User: {role} is not authorized to perform: {action} on resource: {resource} "
        "because no identity-based policy allows the action"
    )
    code = _DENIED_CODE.get(prefix, "AccessDeniedException")
    status = _DENIED_STATUS.get(prefix, 400)
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}, operation
    )


_check: IamCheck | None = None
_unchecked: Any = None  # the call `install` wrapped (botocore's, or another wrapper's: the benchmarks' meter)


def _checked_call(self: BaseClient, operation_name: str, api_params: dict[str, Any]) -> Any:
    function = RUNNING.get()
    check = _check
    if check is None or function is None or check.under_assumed_role(self):
        return _unchecked(self, operation_name, api_params)
    check.authorize(function, self.meta.service_model.service_name, operation_name, api_params)
    assuming = self.meta.service_model.service_name == "sts" and operation_name == "AssumeRole"
    if assuming:
        trust.check(function, api_params, lambda *call: _unchecked(*call))
    result = _unchecked(self, operation_name, api_params)
    if assuming:
        check.assumed(result["Credentials"]["AccessKeyId"])
    return result


def install(check: IamCheck | None) -> None:
    """From now on every client's calls inside an invocation are checked against `check` (None: unchecked, the
    call as it was before)."""
    global _check, _unchecked
    if check is not None and _check is None:
        _unchecked = BaseClient._make_api_call
        BaseClient._make_api_call = _checked_call  # type: ignore[method-assign]
    elif check is None and _check is not None:
        BaseClient._make_api_call = _unchecked  # type: ignore[method-assign]
    _check = check


def installed() -> IamCheck | None:
    return _check
