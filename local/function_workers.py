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
its parent (`local.processes`).
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
import traceback
from multiprocessing.connection import Connection
from typing import Any

from hookrelay.functions import BY_NAME, FUNCTIONS

log = logging.getLogger("hookrelay.local.workers")


class InvocationFailed(Exception):
    """The handler raised (its traceback is the message), or its worker died during the invocation."""


def serve(function: str, connection: Connection, log_level: str) -> None:
    """A worker process: invoke `function` with each event received, until the parent goes away."""
    from local.lambda_runtime import invoke_here
    from local.processes import exit_with_parent, leave_interrupts_to_the_parent, name_this_process

    exit_with_parent()
    leave_interrupts_to_the_parent()
    name_this_process(f"fn-{function}")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("hookrelay").setLevel(log_level)
    while True:
        try:
            event = connection.recv()
        except (EOFError, OSError):  # the parent closed its end: stopping, or gone
            return
        try:
            reply: tuple[str, Any] = ("ok", invoke_here(function, event))
        except Exception:
            reply = ("error", traceback.format_exc())
        connection.send(reply)


class Worker:
    def __init__(self, context: Any, function: str, log_level: str) -> None:
        self.connection, child = context.Pipe()
        self.process = context.Process(
            target=serve, args=(function, child, log_level), name=f"hookrelay-{function}", daemon=True
        )
        self.process.start()
        child.close()

    def call(self, event: dict[str, Any]) -> Any:
        try:
            self.connection.send(event)
            status, value = self.connection.recv()
        except (EOFError, OSError) as error:
            raise InvocationFailed(f"the worker died during the invocation (exit {self.process.exitcode})") from error
        if status != "ok":
            raise InvocationFailed(value)
        return value

    def stop(self) -> None:
        self.connection.close()  # an idle worker exits on its own; a busy one is ended below
        self.process.terminate()


class FunctionWorkers:
    """Worker processes per function, at most `concurrency[name]` of a function at once."""

    def __init__(self, concurrency: dict[str, int], log_level: str) -> None:
        self._context = multiprocessing.get_context("forkserver")
        handlers = sorted({function.handler.rpartition(".")[0] for function in FUNCTIONS})
        self._context.set_forkserver_preload([*handlers, "local.worker_warmup"])
        self._log_level = log_level
        self._slots = {name: threading.BoundedSemaphore(concurrency[name]) for name in BY_NAME}
        self._idle: dict[str, list[Worker]] = {name: [] for name in BY_NAME}
        self._all: list[Worker] = []
        self._lock = threading.Lock()

    def warm_up(self, functions: list[str]) -> None:
        """Start one worker of each of these functions now, rather than on an invocation's time."""
        for name in functions:
            worker = Worker(self._context, name, self._log_level)
            with self._lock:
                self._idle[name].append(worker)
                self._all.append(worker)

    def invoke(self, function: str, event: dict[str, Any]) -> Any:
        with self._slots[function]:
            worker = self._checkout(function)
            try:
                result = worker.call(event)
            except InvocationFailed:
                if not worker.process.is_alive():
                    worker.stop()
                    raise
                self._checkin(function, worker)
                raise
            self._checkin(function, worker)
            return result

    def _checkout(self, function: str) -> Worker:
        with self._lock:
            if self._idle[function]:
                return self._idle[function].pop()  # the most recently used: the warmest
        worker = Worker(self._context, function, self._log_level)  # a fork, outside the lock
        with self._lock:
            self._all.append(worker)
        return worker

    def _checkin(self, function: str, worker: Worker) -> None:
        with self._lock:
            self._idle[function].append(worker)

    def stop(self) -> None:
        with self._lock:
            workers, self._all = self._all, []
        for worker in workers:
            worker.stop()
        for worker in workers:
            worker.process.join(timeout=5)
