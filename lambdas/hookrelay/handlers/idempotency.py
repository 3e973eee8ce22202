"""`Idempotency-Key` on POST routes, with Powertools idempotency: the same key and body run once and answer alike.

Keys are scoped to the calling API key, so two callers can never collide on each other's keys; the
same key with another body is refused (422), and one still in flight answers 409.

The command is also told the request's key (scoped to the caller, with the request itself), so that what it
creates can take ids derived from it: a retry after a crash, once the in-progress record has expired with the
crashed invocation, converges on what the first run wrote instead of making it again.

Typed end to end, as Powertools' own examples are: the command takes its pydantic request and returns its
pydantic result, which `PydanticSerializer` stores and rebuilds for a repeated request.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from functools import cache, cached_property
from typing import TYPE_CHECKING, Generic, TypeVar, cast

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, SerializeAsAny

from hookrelay.adapters import aws, schema
from hookrelay.domain.api_keys import Principal
from hookrelay.domain.errors import IdempotencyKeyInFlight, IdempotencyKeyReused
from hookrelay.handlers.http import ProblemError

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

# Powertools' idempotency utility is imported on the first request that carries a key, not at a cold start: most
# requests carry none, and importing it costs the API and ingest about a tenth of their import time.
IDEMPOTENCY_WINDOW_SECONDS = 24 * 3600
_invocation: list[LambdaContext] = []  # the invocation being served, for the in-progress record's expiry
# When a request that finds its key in progress is told to retry. Powertools does not say when the record expires:
# a running request ends within a second, a crashed one's record within the invocation's timeout, and a retry
# before then is told this again.
IN_PROGRESS_RETRY_SECONDS = 1


@cache
def config() -> IdempotencyConfig:
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

    return IdempotencyConfig(
        event_key_jmespath="idempotency_key",
        payload_validation_jmespath="request",
        expires_after_seconds=IDEMPOTENCY_WINDOW_SECONDS,
    )


RequestT = TypeVar("RequestT", bound=BaseModel)
ResultT = TypeVar("ResultT", bound=BaseModel)


class Keyed(BaseModel):
    """What an idempotency record is keyed on (the caller's key) and validated against (the request)."""

    idempotency_key: str
    request: SerializeAsAny[BaseModel]  # hashed with all of the request's own fields, not just BaseModel's


def register_lambda_context(context: LambdaContext) -> None:
    """An in-progress record then expires with the invocation, so a crashed request can be retried (registered
    with Powertools when a request uses a key)."""
    _invocation[:] = [context]


class IdempotentCommand(Generic[RequestT, ResultT]):
    """`command` run at most once per `Idempotency-Key` (when the request carries one) within the window."""

    def __init__(self, command: Callable[[RequestT, str | None], ResultT], result: type[ResultT]) -> None:
        self.command = command
        self.result = result

    @cached_property
    def _once(self) -> Callable[..., ResultT]:
        # Built on first use, not at import: no AWS client at cold start, and tests can start moto first.
        from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, idempotent_function
        from aws_lambda_powertools.utilities.idempotency.serialization.pydantic import PydanticSerializer

        persistence = DynamoDBPersistenceLayer(
            table_name=os.environ[schema.IDEMPOTENCY.env_var], boto3_client=aws.client("dynamodb")
        )

        # Named after the command: Powertools prefixes its records with the function's name.
        @functools.wraps(self.command)
        def run(*, command: Keyed) -> ResultT:
            request = cast(RequestT, command.request)  # the very request passed in below
            return self.command(request, "\x00".join((command.idempotency_key, request.model_dump_json())))

        once: Callable[..., ResultT] = idempotent_function(  # unannotated in Powertools: it returns `run`, wrapped
            data_keyword_argument="command",
            persistence_store=persistence,
            config=config(),
            output_serializer=PydanticSerializer(self.result),
        )(run)
        return once

    def __call__(self, app: APIGatewayHttpResolver, who: Principal, request: RequestT) -> ResultT:
        key = app.current_event.headers.get("idempotency-key")
        if key is None:
            return self.command(request, None)
        if not 1 <= len(key) <= 255:
            raise ProblemError(400, "Invalid Idempotency-Key", "the key must be 1 to 255 characters", "idempotency-key")
        from aws_lambda_powertools.utilities.idempotency.exceptions import (
            IdempotencyAlreadyInProgressError,
            IdempotencyValidationError,
        )

        if _invocation:
            config().register_lambda_context(_invocation[0])
        try:
            return self._once(command=Keyed(idempotency_key=f"{who.key_id}:{key}", request=request))
        except IdempotencyValidationError:
            raise IdempotencyKeyReused("this key was used with a different body") from None
        except IdempotencyAlreadyInProgressError:
            raise IdempotencyKeyInFlight(
                "a request with this key is still being processed", retry_after=IN_PROGRESS_RETRY_SECONDS
            ) from None
