"""A role's trust policy, checked when a local function assumes it, as STS checks it: moto's STS checks none.

An AWS destination's role (domain/destinations.py) trusts the deployment's delivery role only with the tenant's
external ID. moto would hand out credentials for any role to anyone, so a trust policy lacking the external ID, or
naming another principal, would pass every local run and fail in AWS. Here `sts:AssumeRole` from a function
reads the role's trust policy (from moto's IAM, unchecked) and allows the call only as AWS would for the elements
such a policy uses: Allow and Deny statements, `sts:AssumeRole` (or a wildcard) as the action, the caller's role,
its account (`arn:aws:iam::<account>:root` or the bare id) or `*` as the principal, and `StringEquals` /
`StringLike` conditions on `sts:ExternalId`. Any other condition is not met (refused, never silently allowed).
A role that does not exist is refused as AWS refuses it: AccessDenied.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote

import boto3
from botocore.exceptions import ClientError

from local import as_deployed

_EXTERNAL_ID = "sts:externalid"


def caller_role(function: str) -> str:
    return f"arn:aws:iam::{as_deployed.ACCOUNT}:role/{as_deployed.function_name(function)}-role"


def check(function: str, params: Mapping[str, Any], unchecked: Callable[..., Any]) -> None:
    """Raise STS's AccessDenied unless the role's trust policy lets `function` assume it with these params."""
    role_arn = str(params.get("RoleArn", ""))
    document = _trust_policy(role_arn, unchecked)
    caller = caller_role(function)
    context = {_EXTERNAL_ID: params.get("ExternalId")}
    matching = [s for s in _statements(document) if _applies(s, caller, context)]
    if document is None or any(s.get("Effect") == "Deny" for s in matching) or not matching:
        raise ClientError(
            {
                "Error": {
                    "Code": "AccessDenied",
                    "Message": f"User: {caller} is not authorized to perform: sts:AssumeRole on resource: {role_arn}",
                },
                "ResponseMetadata": {"HTTPStatusCode": 403},
            },
            "AssumeRole",
        )


def _trust_policy(role_arn: str, unchecked: Callable[..., Any]) -> dict[str, Any] | None:
    name = role_arn.rsplit("/", 1)[-1]
    iam = boto3.client("iam", region_name="us-east-1")
    try:
        role = unchecked(iam, "GetRole", {"RoleName": name})["Role"]
    except ClientError:
        return None
    if role["Arn"] != role_arn:
        return None
    document = role["AssumeRolePolicyDocument"]
    return json.loads(unquote(document)) if isinstance(document, str) else dict(document)


def _statements(document: dict[str, Any] | None) -> list[dict[str, Any]]:
    if document is None:
        return []
    found = document.get("Statement", [])
    return [found] if isinstance(found, dict) else list(found)


def _listed(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def _applies(statement: dict[str, Any], caller: str, context: Mapping[str, Any]) -> bool:
    actions = _listed(statement.get("Action"))
    if not any(fnmatch.fnmatchcase("sts:AssumeRole".lower(), a.lower()) for a in actions):
        return False
    return _principal(statement.get("Principal"), caller) and _conditions(statement.get("Condition", {}), context)


def _principal(principal: Any, caller: str) -> bool:
    if principal == "*":
        return True
    if not isinstance(principal, dict):
        return False
    account = caller.split(":")[4]
    named = _listed(principal.get("AWS"))
    return any(p in ("*", caller, account, f"arn:aws:iam::{account}:root") for p in named)


def _conditions(conditions: Mapping[str, Any], context: Mapping[str, Any]) -> bool:
    for operator, tests in conditions.items():
        for key, expected in tests.items():
            actual = context.get(key.lower())
            if key.lower() != _EXTERNAL_ID or actual is None:
                return False
            if operator == "StringEquals":
                met = actual in _listed(expected)
            elif operator == "StringLike":
                met = any(fnmatch.fnmatchcase(actual, pattern) for pattern in _listed(expected))
            else:
                met = False
            if not met:
                return False
    return True
