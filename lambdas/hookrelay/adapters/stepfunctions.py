"""Step Functions: start the retry execution after a first failure, answer its task tokens."""

from __future__ import annotations

import json
import re
from typing import Any

from hookrelay.domain.clock import to_rfc3339
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ports import RetryTicket


def ticket_document(ticket: RetryTicket) -> dict[str, Any]:
    """What the workflow reads: the ASL's `$.ticket` (and an execution's input)."""
    return {
        "delivery_id": ticket.delivery_id,
        "tenant_id": ticket.tenant_id,
        "group_id": ticket.group_id,
        "attempt": ticket.attempt,
        "next_attempt_at": to_rfc3339(ticket.next_attempt_at),
    }


# Step Functions execution names: at most 80 characters of letters, digits, "-" and "_".
EXECUTION_NAME_MAX = 80
_NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9_-]")


def execution_name(delivery_id: str, attempt: int | None = None) -> str:
    """The delivery's first execution is named after it; a fresh one (see `resume`) after it and its attempt."""
    suffix = "" if attempt is None else f"-{attempt}"
    return _NOT_IN_NAMES.sub("_", delivery_id)[: EXECUTION_NAME_MAX - len(suffix)] + suffix


class StepFunctionsRetryWorkflow:
    def __init__(self, sfn: Any, state_machine_arn: str) -> None:
        self.sfn = sfn
        self.state_machine_arn = state_machine_arn

    def start(self, ticket: RetryTicket) -> None:
        self._start(execution_name(ticket.delivery_id), ticket)

    def resume(self, ticket: RetryTicket) -> None:
        self._start(execution_name(ticket.delivery_id, ticket.attempt), ticket)

    def _start(self, name: str, ticket: RetryTicket) -> None:
        document = ticket_document(ticket) | {"status": DeliveryStatus.RETRYING.value}
        try:
            # Named after the delivery (and the attempt, for a fresh one): a duplicate start is refused, not doubled.
            self.sfn.start_execution(stateMachineArn=self.state_machine_arn, name=name, input=json.dumps(document))
        except self.sfn.exceptions.ExecutionAlreadyExists:
            pass

    def report(self, task_token: str, status: DeliveryStatus, ticket: RetryTicket | None) -> bool:
        document: dict[str, Any] = ticket_document(ticket) if ticket else {}
        document["status"] = status.value
        return self._answer(self.sfn.send_task_success, taskToken=task_token, output=json.dumps(document))

    def fail(self, task_token: str, error: str, cause: str) -> None:
        self._answer(self.sfn.send_task_failure, taskToken=task_token, error=error, cause=cause[:256])

    def _answer(self, call: Any, **kwargs: Any) -> bool:
        """True if the execution took the answer; False if nothing waits on this token any more."""
        try:
            call(**kwargs)
        except (
            self.sfn.exceptions.TaskTimedOut,
            self.sfn.exceptions.TaskDoesNotExist,
            self.sfn.exceptions.InvalidToken,
        ):
            # The execution stopped waiting for this token: it timed out and re-sent the attempt (the re-sent
            # message will be answered with the state then), or it has failed since. The caller decides.
            return False
        return True
