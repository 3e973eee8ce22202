"""`Idempotency-Key` on POST routes, with Powertools idempotency: the same key and body run once and answer alike.

Keys are scoped to the calling API key, so two callers can never collide on each other's keys; the
same key with another body is refused (422), and one still in flight answers 409.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cached_property
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

from hookrelay.adapters import aws, schema
from hookrelay.domain.api_keys import Principal
from hookrelay.handlers.http import ProblemError

IDEMPOTENCY_WINDOW_SECONDS = 24 * 3600
CONFIG = IdempotencyConfig(
    event_key_jmespath="idempotency_key",
    payload_validation_jmespath="request",
    expires_after_seconds=IDEMPOTENCY_WINDOW_SECONDS,
)

Command = Callable[..., dict[str, Any]]  # called as command(command={"request": …})


def register_lambda_context(context: LambdaContext) -> None:
    """An in-progress record then expires with the invocation, so a crashed request can be retried."""
    CONFIG.register_lambda_context(context)


class IdempotentCommand:
    def __init__(self, command: Command) -> None:
        self.command = command

    @cached_property
    def _once(self) -> Command:
        # Built on first use, not at import: no AWS client at cold start, and tests can start moto first.
        persistence = DynamoDBPersistenceLayer(
            table_name=os.environ[schema.IDEMPOTENCY.env_var], boto3_client=aws.client("dynamodb")
        )
        return idempotent_function(data_keyword_argument="command", persistence_store=persistence, config=CONFIG)(
            self.command
        )

    def __call__(self, app: APIGatewayHttpResolver, who: Principal, request: dict[str, Any]) -> dict[str, Any]:
        key = app.current_event.headers.get("idempotency-key")
        if key is None:
            return self.command(command={"request": request})
        if not 1 <= len(key) <= 255:
            raise ProblemError(400, "Invalid Idempotency-Key", "the key must be 1 to 255 characters", "idempotency-key")
        try:
            return self._once(command={"idempotency_key": f"{who.key_id}:{key}", "request": request})
        except IdempotencyValidationError:
            raise ProblemError(
                422, "Idempotency-Key reused", "this key was used with a different body", "idempotency-mismatch"
            ) from None
        except IdempotencyAlreadyInProgressError:
            raise ProblemError(
                409, "Request in progress", "a request with this key is still being processed", "idempotency-in-flight"
            ) from None
