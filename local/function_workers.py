"""Each function's invocations in worker processes, one at a time in each, as Lambda's execution environments.

A worker process serves one function: it receives an event, invokes the handler (`lambda_runtime.invoke_here`)
and sends back the result, then waits for the next. A function's workers are started on demand (when every
one of them is busy) up to the function's concurrency, and then reused, warm. So every invocation has its own
interpreter: the functions' CPU work spreads over the machine's cores instead of sharing one lock, an
invocation blocked on a hanging endpoint holds only its own worker, and nothing a handler keeps per process
(Powertools' metrics, the wiring's clients) is ever shared by two invocations at once.

Workers are forked from a server process that has already imported every handler and read the AWS service
models (multiprocessing's forkserver, preloaded; `local.worker_warmup`): a new worker costs a fork, not a
cold import. Each worker exits with
its parent (`local.processes`). A worker that dies (killed, out of memory) is never handed another invocation: it
is dropped and replaced by a new one, as Lambda replaces an execution environment.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import threading
import traceback
from collections.abc import Callable, Collection
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from hookrelay.function_permissions import Statement
from hookrelay.functions import BY_NAME, DELIVERY, FUNCTIONS
from hookrelay.services.ports import AttemptReport
from local.as_deployed import LocalDeployment

log = logging.getLogger("hookrelay.local.workers")


class InvocationFailed(Exception):
    """The handler raised (its traceback is the message), or its worker died during the invocation."""


class EventNotDelivered(InvocationFailed):
    """The worker was gone before it could receive the event: writing it to the worker's pipe failed, or the worker's
    end was closed with the event still unread in it (`_RESET_MEANS_UNREAD`). Either way no handler ran it."""


@dataclass(frozen=True)
class AsDeployed:
    """What a worker of one function runs with, as that function is deployed (local/as_deployed.py): its whole
    environment, and its role's statements, every AWS call it makes checked against them (local/iam_check.py)."""

    environment: dict[str, str]
    statements: tuple[Statement, ...]
    region: str
    calls_log: str | None  # where the calls seen are appended (iam_check.CALLS_LOG), for the run's report


def become(function: str, deployed: AsDeployed) -> None:
    """This process is `function`'s alone, as a Lambda execution environment is: nothing of another function's
    environment, and each AWS call refused as AWS would refuse it."""
    from local import iam_check

    os.environ.clear()
    os.environ.update(deployed.environment)
    iam_check.install(iam_check.IamCheck({function: deployed.statements}, deployed.region, deployed.calls_log))


def serve(function: str, connection: Connection, log_level: str, deployed: AsDeployed | None = None) -> None:
    """A worker process: invoke `function` with each event received, until the parent goes away."""
    from local import terminal
    from local.lambda_runtime import invoke_here, load_handler
    from local.processes import exit_with_parent, leave_interrupts_to_the_parent, name_this_process

    if deployed is not None:
        become(function, deployed)
    exit_with_parent()
    leave_interrupts_to_the_parent()
    name_this_process(f"fn-{function}")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("hookrelay").setLevel(log_level)
    load_handler(function)  # preloaded: its logger exists, for the terminal's lines
    terminal.install(function, log_level)
    attempts = _attempts_made(function)
    while True:
        try:
            event = connection.recv()
        except (EOFError, OSError):  # the parent closed its end: stopping, or gone
            return
        try:
            reply: tuple[str, Any] = ("ok", invoke_here(function, event))
        except Exception:
            reply = ("error", traceback.format_exc())
        if attempts is not None:
            terminal.print_attempts(attempts())
        connection.send(reply)


def _attempts_made(function: str) -> Callable[[], list[AttemptReport]] | None:
    """The delivery function's attempts of its last invocation (one terminal line each); None for the others."""
    if function != DELIVERY.name:
        return None
    from hookrelay.handlers import delivery

    return delivery.attempts_made


# On Linux, a UNIX socket closed with unread data in its receive queue resets its peer (ECONNRESET); closed with
# nothing unread, the peer reads end-of-file. Nothing but events is ever sent to a worker, so a reset answering an
# invocation means the worker died (killed just after it was checked out, before its death showed) with our event
# not wholly read: no handler ran it. Elsewhere a reset is not read that way (a failed invocation, never retried).
_RESET_MEANS_UNREAD = sys.platform == "linux"


class Worker:
    def __init__(self, context: Any, function: str, log_level: str, deployed: AsDeployed | None = None) -> None:
        self.function = function
        self.connection, child = context.Pipe()
        self.process = context.Process(
            target=serve, args=(function, child, log_level, deployed), name=f"hookrelay-{function}", daemon=True
        )
        self.process.start()
        child.close()

    def call(self, event: dict[str, Any]) -> Any:
        try:
            self.connection.send(event)
        except OSError as error:  # a broken pipe, or reset: the worker is gone
            raise EventNotDelivered(f"the worker was gone before the event reached it ({error})") from error
        try:
            status, value = self.connection.recv()
        except ConnectionResetError as error:
            if _RESET_MEANS_UNREAD:
                raise EventNotDelivered(f"the worker died before reading the event ({error})") from error
            raise InvocationFailed(f"the worker died during the invocation (exit {self.process.exitcode})") from error
        except (EOFError, OSError) as error:
            raise InvocationFailed(f"the worker died during the invocation (exit {self.process.exitcode})") from error
        if status != "ok":
            raise InvocationFailed(value)
        return value

    def is_usable(self) -> bool:
        """Alive, with nothing waiting on its pipe, as an idle worker's pipe always is between invocations.

        Both, because neither is enough alone. A worker's exit reaches this process late: it is forked by the fork
        server, which reaps it and only then reports its exit code, so `is_alive` says True for a while after
        the worker has died. Its pipe tells at once: a dead worker's end is closed, so the pipe reads as ready
        (end of file). And a worker that answered and is alive has nothing more to send.
        """
        try:
            return self.process.is_alive() and not self.connection.poll(0)
        except OSError:  # the pipe is closed or broken
            return False

    def stop(self) -> None:
        self.connection.close()  # an idle worker exits on its own; a busy one is ended below
        self.process.terminate()


class FunctionWorkers:
    """Worker processes per function, at most `concurrency[name]` of a function at once."""

    def __init__(
        self,
        concurrency: dict[str, int],
        log_level: str,
        deployment: LocalDeployment | None = None,
        *,
        spares: Collection[str] = (),
    ) -> None:
        """`deployment`: each function's environment and statements, as deployed, for its workers; None: every
        worker sees this process's environment and no call is checked (the worker pool's own tests). `spares`: the
        functions that keep a spare worker ready (`_keep_a_spare`)."""
        self._deployment = deployment
        self._context = multiprocessing.get_context("forkserver")
        handlers = sorted({function.handler.rpartition(".")[0] for function in FUNCTIONS})
        # local.iam_check too: it imports moto's IAM policy evaluation, some 0.6 s a new worker would pay before its
        # first invocation (enough to reorder a burst's first attempts behind the retries of its earliest).
        self._context.set_forkserver_preload([*handlers, "local.worker_warmup", "local.iam_check"])
        self._log_level = log_level
        self._slots = {name: threading.BoundedSemaphore(concurrency[name]) for name in BY_NAME}
        self._limits = dict(concurrency)
        self._spares = frozenset(spares)
        self._idle: dict[str, list[Worker]] = {name: [] for name in BY_NAME}
        self._all: list[Worker] = []
        self._starting: dict[str, threading.Thread] = {}  # functions with a spare worker being started
        self._stopped = False
        self._lock = threading.Lock()

    def _as_deployed(self, function: str) -> AsDeployed | None:
        if self._deployment is None:
            return None
        from local.iam_check import CALLS_LOG

        return AsDeployed(
            environment=self._deployment.view(function, os.environ),
            statements=self._deployment.policies[function],
            region=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
            calls_log=os.environ.get(CALLS_LOG),
        )

    def warm_up(self, functions: list[str]) -> None:
        """Start one worker of each of these functions now, rather than on an invocation's time."""
        for name in functions:
            worker = Worker(self._context, name, self._log_level, self._as_deployed(name))
            with self._lock:
                self._idle[name].append(worker)
                self._all.append(worker)

    def invoke(self, function: str, event: dict[str, Any]) -> Any:
        """Invoke `function` in one of its workers, never one that is dead: Lambda never hands an invocation to an
        environment that died; it starts another."""
        with self._slots[function]:
            try:
                return self._invoke_once(function, event)
            except EventNotDelivered:
                # The worker died before the event reached it (killed while idle, just before this checkout saw it):
                # no handler ran the event, so running it on a fresh worker cannot do anything twice. Once: a second
                # new worker that dies before reading its first event is not a dead worker to route around.
                log.warning("a %s worker was gone before the invocation reached it; invoking a new one", function)
                return self._invoke_once(function, event)

    def _invoke_once(self, function: str, event: dict[str, Any]) -> Any:
        worker = self._checkout(function)
        try:
            result = worker.call(event)
        except InvocationFailed:
            self._checkin_or_replace(function, worker)
            raise
        except BaseException:  # interrupted mid-call: its pipe may hold half a message; never reused
            self._discard(worker)
            raise
        self._checkin_or_replace(function, worker)
        return result

    def _checkout(self, function: str) -> Worker:
        """The warmest idle worker that is usable (the dead ones found on the way are ended and dropped), else a
        new one."""
        while True:
            with self._lock:
                if not self._idle[function]:
                    break
                worker = self._idle[function].pop()  # the most recently used: the warmest
            if worker.is_usable():
                self._keep_a_spare(function)
                return worker
            log.warning("a %s worker died while idle (exit %s); replaced", function, worker.process.exitcode)
            self._discard(worker)
        # A fork, outside the lock.
        worker = Worker(self._context, function, self._log_level, self._as_deployed(function))
        with self._lock:
            self._all.append(worker)
            # A spare that became ready while this one was forked is one too many at the limit.
            over = self._idle[function] and self._count(function) > self._limits.get(function, 0)
            surplus = self._idle[function].pop(0) if over else None
            if surplus is not None:
                self._all.remove(surplus)
        if surplus is not None:
            surplus.stop()
        self._keep_a_spare(function)
        return worker

    def _keep_a_spare(self, function: str) -> None:
        """When the last idle worker is taken and the function has room for another, fork one now, in the background:
        the next invocation while this one runs (a hanging endpoint holding a worker, a burst's second batch) then
        finds a worker ready instead of waiting for a fork, as Lambda's warm environments under load are ready."""
        if function not in self._spares:
            return
        with self._lock:
            if self._stopped or self._idle[function] or function in self._starting:
                return
            if self._count(function) >= self._limits.get(function, 0):
                return
            starter = threading.Thread(
                target=self._start_spare, args=(function,), name=f"{function}-spare", daemon=True
            )
            self._starting[function] = starter
        starter.start()

    def _start_spare(self, function: str) -> None:
        try:
            worker = Worker(self._context, function, self._log_level, self._as_deployed(function))
        except Exception:  # stopping, or out of resources: the next invocation forks its own, as before
            log.exception("starting a spare %s worker failed", function)
            worker = None
        with self._lock:
            self._starting.pop(function, None)
            if worker is not None and (self._stopped or self._count(function) >= self._limits.get(function, 0)):
                surplus, worker = worker, None  # invocations forked their own meanwhile, up to the limit
            else:
                surplus = None
            if worker is not None:
                self._all.append(worker)
                self._idle[function].insert(0, worker)  # behind the warm ones: taken only when they are busy
        if surplus is not None:
            surplus.stop()

    def _count(self, function: str) -> int:
        """The function's workers (called holding `_lock`)."""
        return sum(1 for worker in self._all if worker.function == function)

    def _checkin_or_replace(self, function: str, worker: Worker) -> None:
        """Back to the idle workers if it is alive and its pipe clean (a handler that raised leaves both so);
        otherwise ended and forgotten: the next invocation gets a new worker."""
        if worker.is_usable():
            with self._lock:
                self._idle[function].append(worker)
        else:
            self._discard(worker)

    def _discard(self, worker: Worker) -> None:
        worker.stop()
        with self._lock:
            if worker in self._all:
                self._all.remove(worker)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True  # no spare is started from now on
            starting = list(self._starting.values())
        for starter in starting:  # a fork under way finishes before the fork server may be stopped
            starter.join(timeout=10)
        with self._lock:
            workers, self._all = self._all, []
        for worker in workers:
            worker.stop()
        for worker in workers:
            worker.process.join(timeout=5)
