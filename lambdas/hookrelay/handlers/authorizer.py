"""API Gateway (HTTP API) Lambda authorizer: a bearer API key (or portal session token) in, its id and role out."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.data_classes import event_source
from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import (
    APIGatewayAuthorizerEventV2,
    APIGatewayAuthorizerResponseV2,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

from hookrelay import wiring
from hookrelay.domain import portal
from hookrelay.domain.api_keys import Principal
from hookrelay.domain.rate_limit import RATE_LIMITED
from hookrelay.functions import AUTHORIZER

logger = Logger(service=AUTHORIZER.name)


def bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


@logger.inject_lambda_context(clear_state=True)  # no key_id from the previous caller on this one's lines
@event_source(data_class=APIGatewayAuthorizerEventV2)
def handler(event: APIGatewayAuthorizerEventV2, context: LambdaContext) -> dict[str, Any]:
    token = bearer_token(event.headers.get("authorization"))
    who = _authenticate(token) if token else None
    if who is None:
        logger.info("refused", extra={"route": event.route_key})
        return APIGatewayAuthorizerResponseV2(authorize=False).asdict()
    logger.append_keys(key_id=who.key_id)
    granted: dict[str, Any] = {"key_id": who.key_id, "role": who.role}
    if who.portal:
        granted[portal.SCOPE] = portal.PORTAL_SCOPE
    if not _admitted(who.rate_limit_id):
        # Authorized, but over its rate: the function answers 429 (a simple response can only say 403).
        logger.info("rate limited", extra={"route": event.route_key})
        granted[RATE_LIMITED] = True
    return APIGatewayAuthorizerResponseV2(authorize=True, context=granted).asdict()


def _authenticate(token: str) -> Principal | None:
    """A portal token (its own prefix) is looked up among portal sessions, any other among API keys."""
    if token.startswith(portal.TOKEN_PREFIX + "_"):
        return wiring.portal_session_service().authenticate(token)
    return wiring.key_service().authenticate(token)


def _admitted(key_id: str) -> bool:
    try:
        return wiring.rate_limiter().admit(key_id)
    except Exception:  # the counters unreachable: fail open, the stage's throttle still bounds the API
        logger.exception("rate limit check failed: request admitted")
        return True
