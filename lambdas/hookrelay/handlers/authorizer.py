"""API Gateway (HTTP API) Lambda authorizer: a bearer API key in, the key's id and role out."""

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
    who = wiring.key_service().authenticate(token) if token else None
    if who is None:
        logger.info("refused", extra={"route": event.route_key})
        return APIGatewayAuthorizerResponseV2(authorize=False).asdict()
    logger.append_keys(key_id=who.key_id)
    return APIGatewayAuthorizerResponseV2(authorize=True, context={"key_id": who.key_id, "role": who.role}).asdict()
