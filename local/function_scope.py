"""One function's environment during its invocation, when several functions share one process.

In AWS each function runs in environments of its own, with only its own variables. The integration tier runs every
handler in the test's process, on its threads, beside Step Functions' threads: there `os.environ` is
made a view that, inside an invocation (`entered`), shows the invoked function's environment
(`LocalDeployment.view`) and, outside one, the process's own (which names every resource: the tests read them).
The view follows the thread's context, so two functions invoked at once on two threads each see their own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from local.as_deployed import LocalDeployment

_VIEW: ContextVar[dict[str, str] | None] = ContextVar("function_environment", default=None)
_deployment: LocalDeployment | None = None


class _ScopedEnviron(MutableMapping[str, str]):
    """`os.environ`, or inside an invocation the invoked function's own environment (reads and writes alike)."""

    def __init__(self, process: Any) -> None:
        self.process = process  # the real os.environ (writes to it reach the C environment of child processes)

    def _current(self) -> MutableMapping[str, str]:
        view = _VIEW.get()
        return self.process if view is None else view

    def __getitem__(self, name: str) -> str:
        return self._current()[name]

    def __setitem__(self, name: str, value: str) -> None:
        self._current()[name] = value

    def __delitem__(self, name: str) -> None:
        del self._current()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._current()))

    def __len__(self) -> int:
        return len(self._current())

    def copy(self) -> dict[str, str]:
        return dict(self._current())

    def __or__(self, other: Mapping[str, str]) -> dict[str, str]:  # as os.environ | {...} gives
        return {**self._current(), **other}

    def __ror__(self, other: Mapping[str, str]) -> dict[str, str]:
        return {**other, **self._current()}


def use(deployment: LocalDeployment | None) -> None:
    """From now on, `entered` gives each invocation its function's environment (None: the process's, as before)."""
    global _deployment
    _deployment = deployment
    if deployment is None and isinstance(os.environ, _ScopedEnviron):
        os.environ = os.environ.process  # noqa: B003 (the real mapping back, as it was)
    elif deployment is not None and not isinstance(os.environ, _ScopedEnviron):
        # Replaced on purpose, not cleared: the real mapping stays inside the view, for the process.
        os.environ = _ScopedEnviron(os.environ)  # type: ignore[assignment]  # noqa: B003


@contextmanager
def entered(function: str) -> Iterator[None]:
    """Inside: `function`'s environment, as deployed (a no-op until `use` is given a deployment)."""
    if _deployment is None:  # none in use
        yield
        return
    process = os.environ.process if isinstance(os.environ, _ScopedEnviron) else os.environ
    token = _VIEW.set(_deployment.view(function, process))
    try:
        yield
    finally:
        _VIEW.reset(token)
