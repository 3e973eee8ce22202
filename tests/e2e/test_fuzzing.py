"""Fuzzing: schemathesis generates requests from openapi/openapi.yaml and sends them to the local stack, as each
role; every answer must be documented (status, content type, headers, body schema) and none may be a 5xx.

Bounded and repeatable: a fixed number of examples per operation and generation mode, derandomized (the same
requests every run), no example database, loopback only. Each role calls the operations it may call (another
role's routes only answer 403, which the access tests already cover), valid requests and invalid ones alike.
Failures are collected, not raised at the first, so one run reports them all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.failures import FailureGroup

from tests.e2e.harness import LocalStack

pytestmark = pytest.mark.e2e

DOCUMENT = Path(__file__).resolve().parents[2] / "openapi" / "openapi.yaml"
REQUESTS_PER_ROLE = 300  # shared between the role's operations, half valid requests and half invalid ones
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
ADMIN_PATHS = ("/v1/tenants", "/v1/api-keys")
PRODUCER_PATHS = ("/v1/events", "/v1/events/batch")
CATALOGUE_PATH = "/v1/event-types"  # admins write it; any key reads it (fuzzed as a tenant)


def _role(method: str, path: str) -> str:
    if path.startswith(ADMIN_PATHS) or (path.startswith(CATALOGUE_PATH) and method in ("PUT", "DELETE")):
        return "admin"
    if method == "POST" and path in PRODUCER_PATHS:
        return "producer"
    return "tenant"


@pytest.fixture(scope="module")
def document() -> Any:
    return schemathesis.openapi.from_path(DOCUMENT)


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    with requests.Session() as http:
        yield http


@pytest.mark.parametrize("role", ["admin", "producer", "tenant"])
def test_every_answer_is_documented_and_none_is_a_server_error(
    stack: LocalStack, document: Any, session: requests.Session, role: str
) -> None:
    token = {"admin": stack.admin_key, "producer": stack.producer_key, "tenant": stack.tenant_key}[role]
    # Real ids as well as generated ones, so that requests get past "not found" into the handlers.
    endpoint = stack.created(
        "/v1/endpoints", stack.tenant_key, {"url": "http://127.0.0.1:9/fuzz", "event_types": ["order.*"]}
    )
    known = {"endpoint_id": endpoint["id"], "tenant_id": stack.tenant_id}
    auth = {"authorization": f"Bearer {token}"}
    sent: Counter[str] = Counter()
    failures: list[str] = []
    operations = [result.ok() for result in document.get_all_operations()]
    mine = [op for op in operations if _role(op.method.upper(), op.path) == role]
    assert mine, role
    examples = -(-REQUESTS_PER_ROLE // (2 * len(mine)))
    for operation in mine:
        path_parameters = {name: value for name, value in known.items() if "{" + name + "}" in operation.path}
        for mode in _modes(operation):
            strategy = operation.as_strategy(generation_mode=mode, path_parameters=path_parameters or None)
            label = f"{operation.label} [{mode.value}]"

            def call(case: Any, label: str = operation.label) -> Any:
                sent[label] += 1
                if isinstance(case.body, dict) and isinstance(case.body.get("tenant_id"), str):
                    # The real tenant in a producer's body, so that events get past "unknown tenant" into ingest.
                    case.body["tenant_id"] = stack.tenant_id
                return case.call(base_url=stack.api_url, session=session, headers=auth)

            _fuzz(strategy, examples, label, call, failures)
    print(f"\n{role}: {sum(sent.values())} requests over {len(sent)} operations, {len(failures)} failures")
    assert sum(sent.values()) >= REQUESTS_PER_ROLE // 2, sent  # hypothesis may stop early on a small input space
    assert not failures, "\n".join(failures[:20])


def _modes(operation: Any) -> tuple[GenerationMode, ...]:
    """Valid and invalid requests; only valid ones where nothing can be made invalid: the portal's page takes no
    parameters and no token (`security: []`)."""
    unauthenticated = operation.definition.raw.get("security") == []
    has_input = len(operation.path_parameters) or len(operation.query) or len(operation.body)
    if unauthenticated and not has_input:
        return (GenerationMode.POSITIVE,)
    return (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)


def _fuzz(strategy: Any, examples: int, label: str, call: Callable[[Any], Any], failures: list[str]) -> None:
    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def send(case: Any) -> None:
        response = call(case)
        try:
            case.validate_response(response, checks=CHECKS)
        except FailureGroup as failure:  # every failed check of this response
            failures.append(f"{label} -> {response.status_code}: {failure}")

    send()
