"""Calling a handler the way the Lambda runtime does: resolve "module.function", pass a context.

`invoke` is what the local stack's API gateway, event sources and schedules call. It runs the handler here
(`invoke_here`: the tests, and each worker process) unless `use_workers` has handed invocations to worker
processes (`local.function_workers`: the running local stack).
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

from hookrelay.functions import BY_NAME, Function
from local import function_scope


@dataclass
class LocalContext:
    function_name: str
    memory_limit_in_mb: int
    remaining_ms: int  # the whole timeout: a local invocation is never cut short
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = "local"
    log_stream_name: str = "local"

    @classmethod
    def of(cls, function: Function) -> LocalContext:
        return cls(f"hookrelay-{function.name}", function.memory_mb, function.timeout_seconds * 1000)

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def load_handler(function: str) -> Callable[[dict[str, Any], Any], Any]:
    module_name, _, attribute = BY_NAME[function].handler.rpartition(".")
    return getattr(importlib.import_module(module_name), attribute)


# The function whose invocation is running in this thread (None outside one): lets tests attribute AWS calls.
RUNNING: ContextVar[str | None] = ContextVar("running_function", default=None)


def invoke_here(function: str, event: dict[str, Any]) -> Any:
    token = RUNNING.set(function)
    try:
        with function_scope.entered(function):  # its own environment, as deployed (once a deployment is in use)
            return load_handler(function)(event, LocalContext.of(BY_NAME[function]))
    finally:
        RUNNING.reset(token)


class Invoker(Protocol):
    def invoke(self, function: str, event: dict[str, Any]) -> Any: ...


_workers: Invoker | None = None


def use_workers(workers: Invoker | None) -> None:
    """From now on, `invoke` hands each invocation to `workers` (None: back to invoking here)."""
    global _workers
    _workers = workers


def invoke(function: str, event: dict[str, Any]) -> Any:
    return invoke_here(function, event) if _workers is None else _workers.invoke(function, event)
