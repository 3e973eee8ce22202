"""The management API: tenants and API keys (admins), endpoints (tenants, scoped to their own)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.utilities.typing import LambdaContext

from hookrelay import wiring
from hookrelay.domain.clock import to_rfc3339
from hookrelay.handlers.http import (
    install_problem_handlers,
    json_response,
    parse_body,
    require,
    require_tenant,
)
from hookrelay.handlers.schemas import CreateApiKey, CreateEndpoint, CreateTenant, endpoint_view

logger = Logger(service="api")
tracer = Tracer(service="api")
app = APIGatewayHttpResolver()
install_problem_handlers(app)


@app.post("/v1/tenants")
def create_tenant() -> Response:
    require(app, admin=True)
    body = parse_body(app, CreateTenant)
    tenant, issued = wiring.tenant_service().create(body.name)
    return json_response(
        201,
        {
            "tenant_id": tenant.id,
            "name": tenant.name,
            "created_at": to_rfc3339(tenant.created_at),
            "api_key": {"key_id": issued.key.key_id, "role": issued.key.role, "token": issued.token},
        },
    )


@app.post("/v1/api-keys")
def create_api_key() -> Response:
    require(app, admin=True)
    body = parse_body(app, CreateApiKey)
    issued = wiring.key_service().issue(body.role, body.description)
    return json_response(201, {"key_id": issued.key.key_id, "role": issued.key.role, "token": issued.token})


@app.delete("/v1/api-keys/<key_id>")
def revoke_api_key(key_id: str) -> Response:
    require(app, admin=True)
    wiring.key_service().revoke(key_id)
    return Response(status_code=204)


@app.post("/v1/endpoints")
def create_endpoint() -> Response:
    tenant_id = require_tenant(app)
    body = parse_body(app, CreateEndpoint)
    endpoint = wiring.endpoint_service().create(
        tenant_id,
        url=body.url,
        event_types=body.event_types,
        description=body.description,
        max_in_flight=body.max_in_flight,
    )
    return json_response(201, endpoint_view(endpoint, with_secret=True))


@app.get("/v1/endpoints")
def list_endpoints() -> Response:
    tenant_id = require_tenant(app)
    return json_response(200, {"data": [endpoint_view(e) for e in wiring.endpoint_service().list(tenant_id)]})


@app.get("/v1/endpoints/<endpoint_id>")
def get_endpoint(endpoint_id: str) -> Response:
    tenant_id = require_tenant(app)
    return json_response(200, endpoint_view(wiring.endpoint_service().get(tenant_id, endpoint_id)))


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
