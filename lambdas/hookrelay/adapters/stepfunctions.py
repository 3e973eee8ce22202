"""Step Functions: the retry protocol. Retry executions after a first failure, the probe execution of an open
circuit, and the answers to their task tokens; execution names and error names live here and in the ASL only."""

from __future__ import annotations

import json
import re
from typing import Any

from hookrelay.adapters.schema import DeliveryQueueUrls
from hookrelay.domain.clock import from_rfc3339, to_rfc3339
from hookrelay.domain.queues import DeliveryLane
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ports import CircuitCommand, CircuitCommandKind, RetryTicket

DELIVERY_MISSING = "hookrelay.DeliveryMissing"  # the ASL routes this task failure to a Fail state
PARKED = "parked"  # the answer that ends a retry execution: its delivery is parked behind the circuit


def ticket_document(ticket: RetryTicket, queues: DeliveryQueueUrls) -> dict[str, Any]:
    """What the workflow reads: the ASL's `$.ticket` (and an execution's input). `queue_url`: where the workflow sends
    the attempt, the fast lane of the delivery's shard. (An execution started before shards runs on the definition it
    started with, as Step Functions keeps it, which sends to shard 0's fast lane, the one delivery queue of then.)"""
    return {
        "delivery_id": ticket.delivery_id,
        "tenant_id": ticket.tenant_id,
        "group_id": ticket.group_id,
        "attempt": ticket.attempt,
        "next_attempt_at": to_rfc3339(ticket.next_attempt_at),
        "endpoint_id": ticket.endpoint_id,
        "shard": ticket.shard,
        "queue_url": queues.url(ticket.shard, DeliveryLane.FAST),
    }


# Step Functions execution names: at most 80 characters of letters, digits, "-" and "_".
EXECUTION_NAME_MAX = 80
_NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9_-]")


def execution_name(delivery_id: str, attempt: int | None = None) -> str:
    """The delivery's first execution is named after it; a fresh one (see `resume`) after it and its attempt."""
    suffix = "" if attempt is None else f"-{attempt}"
    return _NOT_IN_NAMES.sub("_", delivery_id)[: EXECUTION_NAME_MAX - len(suffix)] + suffix


def probe_execution_name(endpoint_id: str, step: int) -> str:
    """One probe execution per endpoint and circuit step: a duplicate start is refused, not doubled."""
    suffix = f"-{step}"
    return "circuit-" + _NOT_IN_NAMES.sub("_", endpoint_id)[: EXECUTION_NAME_MAX - len(suffix) - 8] + suffix


def command_document(command: CircuitCommand, queues: DeliveryQueueUrls) -> dict[str, Any]:
    """What the probe workflow carries under `$.circuit`: the ASL waits until `due_at`, sends it to `queue_url` (the
    slow lane of the endpoint's shard: probes and drains are the slow lane's), routes on `kind`."""
    return {
        "tenant_id": command.tenant_id,
        "endpoint_id": command.endpoint_id,
        "step": command.step,
        "kind": command.kind.value,
        "due_at": to_rfc3339(command.due_at),
        "released": list(command.released),
        "commands": command.commands,
        "shard": command.shard,
        "queue_url": queues.url(command.shard, DeliveryLane.SLOW),
    }


def parse_command(document: dict[str, Any], reply_to: str | None) -> CircuitCommand:
    return CircuitCommand(
        tenant_id=str(document["tenant_id"]),
        endpoint_id=str(document["endpoint_id"]),
        step=int(document["step"]),
        kind=CircuitCommandKind(document["kind"]),
        due_at=from_rfc3339(str(document["due_at"])),
        released=tuple(str(i) for i in document.get("released", [])),
        commands=int(document.get("commands", 0)),
        reply_to=reply_to,
        shard=int(document.get("shard", 0)),  # none in a command of a workflow started before shards
    )


class StepFunctionsRetryWorkflow:
    def __init__(self, sfn: Any, state_machine_arn: str, queues: DeliveryQueueUrls) -> None:
        self.sfn = sfn
        self.state_machine_arn = state_machine_arn
        self.queues = queues  # where the executions send their attempts and commands

    def start(self, ticket: RetryTicket) -> None:
        self._start(execution_name(ticket.delivery_id), ticket)

    def resume(self, ticket: RetryTicket) -> None:
        self._start(execution_name(ticket.delivery_id, ticket.attempt), ticket)

    def _start(self, name: str, ticket: RetryTicket) -> None:
        document = ticket_document(ticket, self.queues) | {"status": DeliveryStatus.RETRYING.value, "workflow": "retry"}
        try:
            # Named after the delivery (and the attempt, for a fresh one): a duplicate start is refused, not doubled.
            self.sfn.start_execution(stateMachineArn=self.state_machine_arn, name=name, input=json.dumps(document))
        except self.sfn.exceptions.ExecutionAlreadyExists:
            pass

    def report(self, reply_to: str, status: DeliveryStatus, ticket: RetryTicket | None) -> bool:
        document: dict[str, Any] = ticket_document(ticket, self.queues) if ticket else {}
        document["status"] = status.value
        return self._answer(self.sfn.send_task_success, taskToken=reply_to, output=json.dumps(document))

    def parked(self, reply_to: str) -> bool:
        return self._answer(self.sfn.send_task_success, taskToken=reply_to, output=json.dumps({"status": PARKED}))

    def delivery_missing(self, reply_to: str, delivery_id: str) -> None:
        cause = f"no delivery {delivery_id}"
        self._answer(self.sfn.send_task_failure, taskToken=reply_to, error=DELIVERY_MISSING, cause=cause[:256])

    def stop(self, delivery_id: str) -> None:
        try:
            self.sfn.stop_execution(executionArn=self._execution_arn(execution_name(delivery_id)))
        except self.sfn.exceptions.ExecutionDoesNotExist:
            pass

    def _execution_arn(self, name: str) -> str:
        return self.state_machine_arn.replace(":stateMachine:", ":execution:") + ":" + name

    def start_probe(self, command: CircuitCommand) -> None:
        name = probe_execution_name(command.endpoint_id, command.step)
        try:
            self.sfn.start_execution(
                stateMachineArn=self.state_machine_arn,
                name=name,
                input=json.dumps({"workflow": "circuit", "circuit": command_document(command, self.queues)}),
            )
        except self.sfn.exceptions.ExecutionAlreadyExists:
            pass

    def probe_running(self, endpoint_id: str, step: int) -> bool:
        try:
            status = self.sfn.describe_execution(
                executionArn=self._execution_arn(probe_execution_name(endpoint_id, step))
            )["status"]
        except self.sfn.exceptions.ExecutionDoesNotExist:
            return False
        return bool(status == "RUNNING")

    def answer(self, reply_to: str, command: CircuitCommand) -> bool:
        return self._answer(
            self.sfn.send_task_success, taskToken=reply_to, output=json.dumps(command_document(command, self.queues))
        )

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
