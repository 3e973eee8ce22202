"""The OpenAPI document in the repo is valid OpenAPI 3.1 and describes exactly the routes the handlers serve."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from openapi_spec_validator import validate

from hookrelay.functions import ROUTES

DOCUMENT = Path(__file__).resolve().parents[2] / "openapi" / "openapi.yaml"
METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return yaml.safe_load(DOCUMENT.read_text())


def test_the_document_is_valid_openapi_3_1(document: dict[str, Any]) -> None:
    assert document["openapi"].startswith("3.1")
    validate(document)


def test_it_documents_exactly_the_served_routes(document: dict[str, Any]) -> None:
    documented = {
        (method.upper(), path) for path, item in document["paths"].items() for method in item if method in METHODS
    }
    assert documented == {(route.method, route.path) for route in ROUTES}


GATEWAY_REFUSALS = {"401": ["application/json"], "403": ["application/json", "application/problem+json"]}


def test_every_operation_is_secured_and_answers_errors_as_problem_details(document: dict[str, Any]) -> None:
    assert document["security"] == [{"bearer": []}]
    responses = document["components"]["responses"]
    for path, item in document["paths"].items():
        for method, operation in ((m, o) for m, o in item.items() if m in METHODS):
            errors = {code: r for code, r in operation["responses"].items() if int(code) >= 400}
            assert {"401", "403"} <= set(errors), (method, path)
            for code, response in errors.items():
                resolved = responses[response["$ref"].rsplit("/", 1)[-1]]
                # API Gateway answers a missing or refused key itself, in its own `{"message": …}` shape.
                expected = GATEWAY_REFUSALS.get(code, ["application/problem+json"])
                assert list(resolved["content"]) == expected, (method, path, code)
            path_parameters = {p.strip("{}") for p in path.split("/") if p.startswith("{")}
            parameters = [resolve(document, p) for p in operation.get("parameters", [])]
            declared = {p["name"] for p in parameters if p["in"] == "path"}
            assert declared == path_parameters, (method, path)


def resolve(document: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    if "$ref" not in node:
        return node
    target: Any = document
    for part in node["$ref"].removeprefix("#/").split("/"):
        target = target[part]
    return target
