"""The management API: tenants and API keys (admins), endpoints (tenants, scoped to their own)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.utilities.typing import LambdaContext

from hookrelay import wiring
from hookrelay.domain import portal
from hookrelay.domain.clock import to_rfc3339
from hookrelay.domain.errors import Forbidden
from hookrelay.functions import API
from hookrelay.handlers import tracing
from hookrelay.handlers.http import (
    has_body,
    install_problem_handlers,
    json_response,
    parse_body,
    principal,
    require,
    require_tenant,
)
from hookrelay.handlers.idempotency import IdempotentCommand, register_lambda_context
from hookrelay.handlers.schemas import (
    CreateApiKey,
    CreateEndpoint,
    CreatePortalSession,
    CreateTenant,
    DeliveryListQuery,
    EndpointListQuery,
    EventTypeListQuery,
    MailboxQuery,
    RedriveRequest,
    RedriveStarted,
    RegisterEventType,
    RotateSecret,
    StartRedrive,
    StatsQuery,
    UpdateEndpoint,
    delivery_detail,
    delivery_summary,
    endpoint_health_view,
    endpoint_stats_view,
    endpoint_view,
    event_type_view,
    event_view,
    mailbox_page_view,
    portal_session_view,
    redrive_view,
    rotated_secret_view,
)

logger = Logger(service=API.name)
tracer = tracing.tracer(API.name)
app = APIGatewayHttpResolver()
install_problem_handlers(app)


@app.post("/v1/tenants")
def create_tenant() -> Response[str]:
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
def create_api_key() -> Response[str]:
    require(app, admin=True)
    body = parse_body(app, CreateApiKey)
    issued = wiring.tenant_service().issue_key(body.role, body.description)
    return json_response(201, {"key_id": issued.key.key_id, "role": issued.key.role, "token": issued.token})


@app.delete("/v1/api-keys/<key_id>")
def revoke_api_key(key_id: str) -> Response[str]:
    require(app, admin=True)
    wiring.key_service().revoke(key_id)
    return Response(status_code=204)


@app.post("/v1/portal-sessions")
def create_portal_session() -> Response[str]:
    who = principal(app)
    wiring.portal_session_service().check_opener(who)
    body = parse_body(app, CreatePortalSession) if has_body(app) else CreatePortalSession()
    opened = wiring.portal_session_service().open(
        who, body.tenant_id, timedelta(seconds=body.ttl_seconds), body.capabilities
    )
    return json_response(201, portal_session_view(opened.session, opened.token, _api_url()))


def _api_url() -> str:
    """This API's own base URL as deployed (the portal page is served beside the API); never the request's Host or
    X-Forwarded-Proto, which the caller writes."""
    return wiring.api_url()


@app.post("/v1/endpoints")
def create_endpoint() -> Response[str]:
    tenant_id = require_tenant(app)
    body = parse_body(app, CreateEndpoint)
    endpoint = wiring.endpoint_service().create(tenant_id, **body.settings())
    return json_response(201, endpoint_view(endpoint, with_secret=True))


@app.get("/v1/endpoints")
def list_endpoints() -> Response[str]:
    tenant_id = require_tenant(app)
    query = EndpointListQuery.model_validate(app.current_event.query_string_parameters or {})
    page = wiring.endpoint_service().page(tenant_id, limit=query.limit, cursor=query.cursor)
    return json_response(200, {"data": [endpoint_view(e) for e in page.endpoints], "next_cursor": page.next_cursor})


@app.get("/v1/endpoints/<endpoint_id>")
def get_endpoint(endpoint_id: str) -> Response[str]:
    tenant_id = require_tenant(app)
    return json_response(200, endpoint_view(wiring.endpoint_service().get(tenant_id, endpoint_id)))


@app.patch("/v1/endpoints/<endpoint_id>")
def update_endpoint(endpoint_id: str) -> Response[str]:
    tenant_id = require_tenant(app)
    changes = parse_body(app, UpdateEndpoint).changes()
    return json_response(200, endpoint_view(wiring.endpoint_service().update(tenant_id, endpoint_id, **changes)))


@app.get("/v1/endpoints/<endpoint_id>/messages")
def read_messages(endpoint_id: str) -> Response[str]:
    """Pull delivery (domain/mailbox.py): acknowledge up to `after`, then the next messages, oldest first."""
    tenant_id = require_tenant(app)
    query = MailboxQuery.model_validate(app.current_event.query_string_parameters or {})
    page = wiring.mailbox_service().read(tenant_id, endpoint_id, after=query.after, limit=query.limit)
    return json_response(200, mailbox_page_view(page))


@app.delete("/v1/endpoints/<endpoint_id>")
def delete_endpoint(endpoint_id: str) -> Response[str]:
    tenant_id = require_tenant(app)
    wiring.endpoint_service().delete(tenant_id, endpoint_id)
    return Response(status_code=204)


@app.post("/v1/endpoints/<endpoint_id>/disable")
def disable_endpoint(endpoint_id: str) -> Response[str]:
    tenant_id = require_tenant(app)
    return json_response(200, endpoint_view(wiring.endpoint_service().set_enabled(tenant_id, endpoint_id, False)))


@app.post("/v1/endpoints/<endpoint_id>/enable")
def enable_endpoint(endpoint_id: str) -> Response[str]:
    tenant_id = require_tenant(app)
    return json_response(200, endpoint_view(wiring.endpoint_service().set_enabled(tenant_id, endpoint_id, True)))


@app.post("/v1/endpoints/<endpoint_id>/rotate-secret")
def rotate_endpoint_secret(endpoint_id: str) -> Response[str]:
    who, tenant_id = principal(app), require_tenant(app)
    # The body is optional: no body rotates with the default overlap.
    body = parse_body(app, RotateSecret) if has_body(app) else RotateSecret()
    if who.portal and body.expire_previous_after_seconds < portal.MIN_PORTAL_SECRET_OVERLAP.total_seconds():
        raise Forbidden(
            "a portal link keeps the previous secret valid at least"
            f" {portal.MIN_PORTAL_SECRET_OVERLAP.total_seconds():g} seconds (expire_previous_after_seconds)"
        )
    rotated = wiring.endpoint_service().rotate_secret(
        tenant_id,
        endpoint_id,
        expire_previous_after=timedelta(seconds=body.expire_previous_after_seconds),
        key_type=body.key_type,
    )
    return json_response(200, rotated_secret_view(rotated))


@app.get("/v1/endpoints/<endpoint_id>/health")
def endpoint_health(endpoint_id: str) -> Response[str]:
    tenant_id = require_tenant(app)
    return json_response(200, endpoint_health_view(*wiring.endpoint_service().health(tenant_id, endpoint_id)))


@app.get("/v1/endpoints/<endpoint_id>/stats")
def endpoint_stats(endpoint_id: str) -> Response[str]:
    """Per hour: deliveries by outcome and attempt latency percentiles (domain/delivery_stats.py), a bounded read."""
    tenant_id = require_tenant(app)
    query = StatsQuery.model_validate(app.current_event.query_string_parameters or {})
    stats = wiring.delivery_log_service().stats(tenant_id, endpoint_id, query.hours)
    return json_response(200, endpoint_stats_view(endpoint_id, stats))


# --- The delivery log, replay, redrive and the test endpoint ---


@app.get("/v1/deliveries")
def list_deliveries() -> Response[str]:
    tenant_id = require_tenant(app)
    query = DeliveryListQuery.model_validate(app.current_event.query_string_parameters or {})
    page = wiring.delivery_log_service().list(query.where(tenant_id), limit=query.limit, cursor=query.cursor)
    return json_response(200, {"data": [delivery_summary(d) for d in page.deliveries], "next_cursor": page.next_cursor})


@app.get("/v1/deliveries/<delivery_id>")
def get_delivery(delivery_id: str) -> Response[str]:
    tenant_id = require_tenant(app)
    log = wiring.delivery_log_service()
    delivery = log.get(tenant_id, delivery_id)
    return json_response(
        200, delivery_detail(delivery, waiting_on=log.waiting_on(delivery), in_flight=log.in_flight(delivery))
    )


@app.post("/v1/deliveries/<delivery_id>/replay")
def replay_delivery(delivery_id: str) -> Response[str]:
    tenant_id = require_tenant(app)
    replay = wiring.replay_service().replay(tenant_id, delivery_id)
    return json_response(202, {"delivery_id": replay.id, "replay_of": replay.replay_of, "event_id": replay.event_id})


@app.get("/v1/events/<event_id>")
def get_event(event_id: str) -> Response[str]:
    tenant_id = require_tenant(app)
    return json_response(200, event_view(wiring.delivery_log_service().event(tenant_id, event_id)))


@app.post("/v1/endpoints/<endpoint_id>/test")
def test_endpoint(endpoint_id: str) -> Response[str]:
    tenant_id = require_tenant(app)
    delivery = wiring.replay_service().send_test(tenant_id, endpoint_id)
    return json_response(202, {"event_id": delivery.event_id, "delivery_id": delivery.id})


def start_redrive(request: StartRedrive, request_key: str | None) -> RedriveStarted:
    redrive = wiring.redrive_service().start(
        request.tenant_id,
        request.endpoint_id,
        since=request.since,
        until=request.until,
        status=request.status,
        include_recovered=request.include_recovered,
        request_key=request_key,
    )
    return RedriveStarted(redrive_id=redrive.id, count=redrive.total, status=redrive.state.value)


start_redrive_once = IdempotentCommand(start_redrive, RedriveStarted)


@app.post("/v1/endpoints/<endpoint_id>/redrive")
def redrive_endpoint(endpoint_id: str) -> Response[str]:
    who, tenant_id = principal(app), require_tenant(app)
    body = parse_body(app, RedriveRequest)
    request = StartRedrive(tenant_id=tenant_id, endpoint_id=endpoint_id, **body.model_dump())
    return json_response(202, start_redrive_once(app, who, request).model_dump())


@app.get("/v1/redrives/<redrive_id>")
def get_redrive(redrive_id: str) -> Response[str]:
    tenant_id = require_tenant(app)
    return json_response(200, redrive_view(wiring.redrive_service().get(tenant_id, redrive_id)))


# --- The event-type catalogue: admins write it, every principal reads it ---


@app.get("/v1/event-types")
def list_event_types() -> Response[str]:
    principal(app)
    query = EventTypeListQuery.model_validate(app.current_event.query_string_parameters or {})
    page = wiring.event_type_catalogue().page(limit=query.limit, cursor=query.cursor)
    return json_response(200, {"data": [event_type_view(t) for t in page.types], "next_cursor": page.next_cursor})


@app.put("/v1/event-types/<name>")
def register_event_type(name: str) -> Response[str]:
    require(app, admin=True)
    body = parse_body(app, RegisterEventType)
    event_type, created = wiring.event_type_catalogue().register(
        name, description=body.description, schema=body.data_schema, example=body.example, deprecated=body.deprecated
    )
    return json_response(201 if created else 200, event_type_view(event_type))


@app.get("/v1/event-types/<name>")
def get_event_type(name: str) -> Response[str]:
    principal(app)
    return json_response(200, event_type_view(wiring.event_type_catalogue().get(name)))


@app.delete("/v1/event-types/<name>")
def delete_event_type(name: str) -> Response[str]:
    require(app, admin=True)
    wiring.event_type_catalogue().delete(name)
    return Response(status_code=204)


@logger.inject_lambda_context
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    register_lambda_context(context)
    return app.resolve(event, context)
