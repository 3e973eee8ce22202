"""The OpenAPI document in the repo is valid OpenAPI 3.1 and describes exactly the routes the handlers serve."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hookrelay_client.cli import KEY_TYPES
from hookrelay_client.client import MAX_BATCH_EVENTS as CLIENT_MAX_BATCH_EVENTS
from openapi_spec_validator import validate

from hookrelay.domain import custom_headers, endpoint_auth
from hookrelay.domain.content_filter import OPERATORS
from hookrelay.domain.endpoint_auth import OPTIONAL, REQUIRED, SECRET_FIELDS
from hookrelay.domain.event_types import MAX_DESCRIPTION
from hookrelay.domain.limits import (
    MAX_FILTER_BYTES,
    MAX_FILTER_DEPTH,
    MAX_FILTER_IN_VALUES,
    MAX_FILTER_NODES,
    MAX_FILTER_PATH_LENGTH,
    MAX_FILTER_PATH_SEGMENTS,
)
from hookrelay.domain.matching import EVENT_TYPE_PATTERN, FILTER_PATTERN, MAX_FILTERS, MAX_LENGTH
from hookrelay.domain.signing import PUBLIC_KEY_PREFIX, SECRET_PREFIX, KeyType
from hookrelay.functions import PUBLIC_ROUTES, SERVED_ROUTES
from hookrelay.handlers.publish_schemas import MAX_BATCH_EVENTS, PublishBatchItem
from hookrelay.services import event_types

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
    assert documented == {(route.method, route.path) for route in SERVED_ROUTES}


GATEWAY_REFUSALS = {
    "401": ["application/json"],
    "403": ["application/json", "application/problem+json"],
    "429": ["application/json", "application/problem+json"],  # the stage's throttle, or the key's own limit
}


def test_every_operation_is_secured_and_answers_errors_as_problem_details(document: dict[str, Any]) -> None:
    assert document["security"] == [{"bearer": []}]
    responses = document["components"]["responses"]
    public = {(route.method, route.path) for route in PUBLIC_ROUTES}
    for path, item in document["paths"].items():
        for method, operation in ((m, o) for m, o in item.items() if m in METHODS):
            if (method.upper(), path) in public:  # the portal's static page: served without the authorizer
                assert operation["security"] == [], (method, path)
                continue
            assert "security" not in operation, (method, path)
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


def test_event_types_and_filters_are_documented_with_the_servers_own_patterns_and_caps(
    document: dict[str, Any],
) -> None:
    """Clients (and the fuzzing tier) generate what the document allows: it must be what the server accepts."""
    published = document["components"]["schemas"]["PublishEvent"]["properties"]["type"]
    assert published["pattern"] == EVENT_TYPE_PATTERN.pattern
    for operation in (
        document["paths"]["/v1/endpoints"]["post"],
        document["paths"]["/v1/endpoints/{endpoint_id}"]["patch"],
    ):
        filters = operation["requestBody"]["content"]["application/json"]["schema"]["properties"]["event_types"]
        assert filters["maxItems"] == MAX_FILTERS
        assert filters["items"] == {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_LENGTH,
            "pattern": FILTER_PATTERN.pattern,
        }


def test_every_operation_documents_the_rate_limit(document: dict[str, Any]) -> None:
    for path, item in document["paths"].items():
        for method, operation in ((m, o) for m, o in item.items() if m in METHODS):
            assert "429" in operation["responses"], (method, path)


def test_key_types_and_key_prefixes_are_the_servers_own(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    assert schemas["KeyType"]["enum"] == [key_type.value for key_type in KeyType] == list(KEY_TYPES)  # the CLI's
    assert schemas["KeyType"]["default"] == KeyType.HMAC.value
    issued = schemas["IssuedSigningKey"]["properties"]
    assert issued["secret"]["pattern"] == f"^{SECRET_PREFIX}"
    assert issued["public_key"]["pattern"] == f"^{PUBLIC_KEY_PREFIX}"
    listed = schemas["Endpoint"]["properties"]["signing_secrets"]["items"]["properties"]["public_key"]
    assert listed["pattern"] == f"^{PUBLIC_KEY_PREFIX}"
    for path in ("/v1/endpoints", "/v1/endpoints/{endpoint_id}/rotate-secret"):
        request = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert request["properties"]["key_type"]["$ref"] == "#/components/schemas/KeyType", path


def test_the_event_type_catalogue_is_documented_with_the_servers_own_patterns_and_caps(
    document: dict[str, Any],
) -> None:
    name = document["components"]["parameters"]["EventTypeName"]["schema"]
    assert name["pattern"] == EVENT_TYPE_PATTERN.pattern
    [limit] = [p for p in document["paths"]["/v1/event-types"]["get"]["parameters"] if p["name"] == "limit"]
    assert (limit["schema"]["maximum"], limit["schema"]["default"]) == (
        event_types.MAX_LIMIT,
        event_types.DEFAULT_LIMIT,
    )
    body = document["components"]["schemas"]["RegisterEventType"]["properties"]
    assert body["description"]["maxLength"] == MAX_DESCRIPTION
    assert set(body) == {"description", "schema", "example", "deprecated"}
    pointer = document["components"]["schemas"]["Problem"]["properties"]["errors"]["items"]["properties"]["pointer"]
    assert pointer["type"] == "string"


def test_a_batch_documents_the_servers_item_pattern_and_cap(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    assert schemas["PublishBatchItem"]["properties"]["type"]["pattern"] == EVENT_TYPE_PATTERN.pattern
    assert schemas["PublishBatch"]["properties"]["events"]["maxItems"] == MAX_BATCH_EVENTS
    assert CLIENT_MAX_BATCH_EVENTS == MAX_BATCH_EVENTS  # the client splits its batches at the server's cap
    item_fields = set(schemas["PublishBatchItem"]["properties"])
    # An item's own key and trace context (domain/trace_context.py); the single route takes those as headers.
    own = {"idempotency_key", "traceparent", "tracestate"}
    assert item_fields == set(schemas["PublishEvent"]["properties"]) - {"tenant_id"} | own
    assert item_fields == set(PublishBatchItem.model_fields)


def test_content_filters_are_documented_with_the_servers_own_caps_and_operators(document: dict[str, Any]) -> None:
    """The ContentFilter schema states every cap (domain/limits.py) and operator (domain/content_filter.py), and every
    endpoint body and view carries it."""
    schemas = document["components"]["schemas"]
    described = " ".join(schemas["ContentFilter"]["description"].split())
    for bound in (
        f"at most {MAX_FILTER_BYTES} bytes",
        f"at most {MAX_FILTER_DEPTH} levels",
        f"at most {MAX_FILTER_NODES} nodes",
        f"at most {MAX_FILTER_IN_VALUES} values",
        f"at most {MAX_FILTER_PATH_SEGMENTS} segments and {MAX_FILTER_PATH_LENGTH} characters",
    ):
        assert bound in described
    assert all(f"`{operator}`" in described for operator in OPERATORS)
    reference = {"$ref": "#/components/schemas/ContentFilter"}
    for operation in (
        document["paths"]["/v1/endpoints"]["post"],
        document["paths"]["/v1/endpoints/{endpoint_id}"]["patch"],
    ):
        body = operation["requestBody"]["content"]["application/json"]["schema"]["properties"]
        assert body["filter"]["oneOf"] == [reference, {"type": "null"}]
    assert schemas["Endpoint"]["properties"]["filter"]["oneOf"] == [reference, {"type": "null"}]


def test_custom_headers_and_auth_are_documented_with_the_servers_own_caps_and_kinds(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    headers = schemas["CustomHeadersRequest"]
    assert headers["maxItems"] == custom_headers.MAX_HEADERS
    name, value = headers["items"]["properties"]["name"], headers["items"]["properties"]["value"]
    assert (name["maxLength"], value["maxLength"]) == (custom_headers.MAX_NAME_LENGTH, custom_headers.MAX_VALUE_LENGTH)
    assert re.fullmatch(name["pattern"], "X-Api_Key.v1~") and not re.fullmatch(name["pattern"], "X Key")
    assert f"{custom_headers.MAX_TOTAL_BYTES} bytes" in headers["description"]
    for refused in [*custom_headers.CONNECTION_HEADERS, *custom_headers.PLATFORM_HEADERS]:
        assert refused.lower() in headers["description"].lower(), refused
    assert schemas["EndpointAuthKind"]["enum"] == [kind.value for kind in endpoint_auth.AuthKind]
    auth = schemas["EndpointAuthRequest"]["properties"]
    fields = {name for kind in endpoint_auth.AuthKind for name in (*REQUIRED[kind], *OPTIONAL[kind])}
    assert set(auth) == {"kind", *fields}
    shown = schemas["Endpoint"]["properties"]["auth"]["oneOf"][1]["properties"]
    assert not set(shown) & endpoint_auth.SECRET_FIELDS and set(shown) == {"kind", "set_at", *fields} - SECRET_FIELDS


def test_the_ingest_warning_codes_are_the_codes(document: dict[str, Any]) -> None:
    from hookrelay.domain.event_types import UNKNOWN_EVENT_TYPE

    assert document["components"]["schemas"]["IngestWarning"]["properties"]["code"]["enum"] == [UNKNOWN_EVENT_TYPE]
