"""The retry state machine (statemachine/retry.asl.json), stepped by hand over moto's non-executing Step Functions.

moto records executions (StartExecution, StopExecution, DescribeExecution) without running them when
`execute_state_machine` is off; this plays the ASL's part, one state at a time and in virtual time, so that a test
decides when each Wait ends and when an unanswered task times out:

- a retry execution waits until its ticket's `next_attempt_at`, sends the attempt (with a task token) to the
  delivery queue, and routes on the answer: `retrying` waits for the next one; delivered, dead, cancelled, parked
  end it; `hookrelay.DeliveryMissing` fails it. A task unanswered when nothing is left to run times out: the
  attempt is re-sent (four times, as ResendAttempt's retries), then reported lost on the dead-letter queue.
- a probe execution waits until its command's `due_at`, sends it on the endpoint's circuit group, and goes on with
  the command it is answered with until `done`; unanswered four more times, it fails (CommandLost) and the
  sweeper's restart takes over.

Answers are what the functions' SendTaskSuccess/SendTaskFailure calls carried, seen on boto3's default session,
counted only when the call succeeded (a crash or a throttle before it means no answer). The simulator's own calls
are made outside any function invocation, so the crash injector never counts them.

The virtual clock `now` stands still but for `advance` (so nothing comes due because the test ran slowly), never
goes back, and every service clock reads it (`apply_clocks`); `restart_clock` sets it to real time between
scenarios (each has its own tenant).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

import boto3

from hookrelay import wiring
from hookrelay.domain.clock import from_rfc3339, utcnow
from statemachine import ATTEMPT_TASK_TIMEOUT_SECONDS
from tests.support.aws import as_function

RESENDS = 4  # ResendAttempt / ResendCommand: one try and three retries
ENDED = ("delivered", "dead", "cancelled", "parked")


@dataclass
class Execution:
    name: str
    arn: str
    kind: str  # "retry" or "circuit"
    document: dict[str, Any]  # the ticket, or the command
    token: str | None = None  # the task token of the send waiting for its answer
    sends: int = 0  # sends of the current task (the first, then re-sends)
    ended: str | None = None

    @property
    def due(self) -> datetime:
        return from_rfc3339(self.document["next_attempt_at" if self.kind == "retry" else "due_at"])


@dataclass
class WorkflowSim:
    state_machine_arn: str
    delivery_queue: str  # shard 0's fast lane: where the ASL sends for a ticket or command that names no queue
    dead_letter_queue: str
    base: datetime = field(default_factory=utcnow)  # virtual time: where the scenario's clock started ...
    offset: timedelta = timedelta(0)  # ... plus how far it was moved on (real time passing moves nothing)
    executions: dict[str, Execution] = field(default_factory=dict)
    answers: dict[str, tuple[str, Any]] = field(default_factory=dict)
    tokens: int = 0
    log: list[str] = field(default_factory=list)

    # --- Seeing the functions' answers ---

    def _before(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if model.service_model.service_id == "SFN" and model.name in ("SendTaskSuccess", "SendTaskFailure"):
            context["sim_answer"] = (model.name, dict(params))

    def _after(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        answer = context.get("sim_answer")
        if answer is None or http_response.status_code >= 300:
            return
        name, params = answer
        if name == "SendTaskSuccess":
            self.answers[params["taskToken"]] = ("success", json.loads(params["output"]))
        else:
            self.answers[params["taskToken"]] = ("failure", params.get("error"))

    def install(self) -> None:
        events = boto3._get_default_session().events
        events.register("before-parameter-build", self._before)
        events.register("after-call", self._after)

    def uninstall(self) -> None:
        events = boto3._get_default_session().events
        events.unregister("before-parameter-build", self._before)
        events.unregister("after-call", self._after)

    # --- Time ---

    @property
    def now(self) -> datetime:
        return self.base + self.offset

    def clock(self) -> datetime:
        return self.now

    def apply_clocks(self) -> None:
        """Every service that reads a clock reads the virtual one (after `wiring.reset`, again)."""
        # Each function's own services (local/function_scope.py): the delivery function's, the sweeper's circuit
        # service, the reconciler's.
        with as_function("delivery"):
            for service in (wiring.delivery_service(), wiring.circuit_service()):
                service.clock = self.clock
            wiring.delivery_service().sleep = self.sleep
        with as_function("sweeper"):
            wiring.circuit_service().clock = self.clock
        with as_function("reconciler"):
            wiring.reconciler().clock = self.clock

    def sleep(self, seconds: float) -> None:
        """An attempt woken early waits out the rest: in virtual time."""
        self.advance(self.now + timedelta(seconds=seconds))

    def advance(self, to: datetime) -> None:
        if to > self.now:
            self.offset += to - self.now
        self.apply_clocks()

    def restart_clock(self) -> None:
        self.base, self.offset = utcnow(), timedelta(0)
        self.apply_clocks()

    # --- The state machine ---

    @cached_property
    def sfn(self) -> Any:
        return boto3.client("stepfunctions")  # one client for the simulation's life, as `Platform.sqs`

    @cached_property
    def sqs(self) -> Any:
        return boto3.client("sqs")

    def refresh(self) -> None:
        """Pick up executions the functions started; forget those they stopped."""
        pages = self.sfn.get_paginator("list_executions").paginate(
            stateMachineArn=self.state_machine_arn, statusFilter="RUNNING"
        )
        running = {summary["name"]: summary for page in pages for summary in page["executions"]}
        for name, summary in running.items():
            if name not in self.executions:
                document = json.loads(self.sfn.describe_execution(executionArn=summary["executionArn"])["input"])
                kind = "circuit" if document.get("workflow") == "circuit" else "retry"
                self.executions[name] = Execution(
                    name, summary["executionArn"], kind, document["circuit"] if kind == "circuit" else document
                )
        for execution in self.active():
            if execution.name not in running:
                execution.ended = "stopped"

    def active(self) -> list[Execution]:
        return [e for e in self.executions.values() if e.ended is None]

    def step(self) -> bool:
        """Take every answer in, and send every task that is due. True if anything happened."""
        self.refresh()
        moved = False
        for execution in self.active():
            if execution.token is not None and execution.token in self.answers:
                self._route(execution, self.answers.pop(execution.token))
                moved = True
            if execution.ended is None and execution.token is None and execution.due <= self.now:
                self._send(execution)
                moved = True
        return moved

    def next_due(self) -> datetime | None:
        waiting = [e.due for e in self.active() if e.token is None]
        return min(waiting, default=None)

    def unanswered(self) -> list[Execution]:
        return [e for e in self.active() if e.token is not None]

    def time_out(self) -> None:
        """Nothing is left to run and some sends went unanswered: their tasks time out."""
        self.advance(self.now + timedelta(seconds=ATTEMPT_TASK_TIMEOUT_SECONDS))
        for execution in self.unanswered():
            execution.token = None
            if execution.sends > RESENDS:
                self._lost(execution)
            else:
                self._send(execution)

    def _route(self, execution: Execution, answer: tuple[str, Any]) -> None:
        execution.token = None
        outcome, output = answer
        if outcome == "failure":
            self._end(execution, f"failed ({output})")
        elif execution.kind == "retry":
            status = output.get("status")
            if status == "retrying":
                execution.document, execution.sends = output, 0
            else:
                assert status in ENDED, output  # the ASL's Route: anything else fails with UnexpectedStatus
                self._end(execution, status)
        elif output["kind"] == "done":
            self._end(execution, "done")
        else:
            execution.document, execution.sends = output, 0

    def _send(self, execution: Execution) -> None:
        self.tokens += 1
        token = f"token-{self.tokens}-{execution.name}"
        resend = "" if execution.sends == 0 else f"-resend-{execution.sends}"
        document = execution.document
        if execution.kind == "retry":
            body = {
                "delivery_id": document["delivery_id"],
                "tenant_id": document["tenant_id"],
                "attempt": document["attempt"],
                "task_token": token,
                "endpoint_id": document["endpoint_id"],
            }
            group = document["group_id"]
            dedup = f"{document['delivery_id']}-{document['attempt']}{resend}"
        else:
            body = {"circuit": document, "task_token": token}
            group = f"circuit~{document['endpoint_id']}"
            dedup = f"{execution.name}-{document['commands']}-{document['kind']}{resend}"
        self.sqs.send_message(
            QueueUrl=document.get("queue_url", self.delivery_queue),  # as the ASL's Ensure*Queue states
            MessageBody=json.dumps(body),
            MessageGroupId=group,
            MessageDeduplicationId=dedup,
        )
        execution.token, execution.sends = token, execution.sends + 1
        self.log.append(f"{execution.name}: sent {document.get('kind', document.get('attempt'))}{resend}")

    def _lost(self, execution: Execution) -> None:
        if execution.kind == "retry":  # ReportAttemptLost, then AttemptLost
            document = execution.document
            letter = {
                "reason": "attempt_lost",
                "delivery_id": document["delivery_id"],
                "tenant_id": document["tenant_id"],
                "attempt": document["attempt"],
                "error": "States.Timeout",
            }
            self.sqs.send_message(QueueUrl=self.dead_letter_queue, MessageBody=json.dumps(letter))
            self._end(execution, "failed (attempt lost)")
        else:
            self._end(execution, "failed (command lost)")

    def _end(self, execution: Execution, how: str) -> None:
        """The execution ends; moto is told (StopExecution), so DescribeExecution no longer says RUNNING."""
        execution.ended = how
        self.log.append(f"{execution.name}: {how}")
        try:
            self.sfn.stop_execution(executionArn=execution.arn)
        except self.sfn.exceptions.ExecutionDoesNotExist:
            pass
