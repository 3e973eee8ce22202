"""One local stack for the module, started as a user starts it; consumers per test; everything stopped."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import SECRETS, SUMMARY, Consumer, LocalStack, Process, kill_leftovers


@pytest.fixture(scope="session", autouse=True)
def no_process_outlives_the_tests() -> Iterator[None]:
    """Whatever a failed test or fixture left running is killed when the session ends."""
    yield
    kill_leftovers()


@pytest.fixture(scope="session", autouse=True)
def no_secret_in_the_platform_s_logs() -> Iterator[None]:
    """When the session ends (every local stack stopped, its log complete): no line of any local stack's log holds
    a secret the tests gave it (tests/e2e/harness.py SECRETS). The count is printed with the session's figures."""
    yield
    stacks = [path for path, name in Process.logs.items() if name == "local-stack" and path.exists()]
    found = [
        f"{path}:{number}"
        for path in stacks
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if any(secret in line for secret in SECRETS)
    ]
    SUMMARY.append(
        f"secrets in the local stacks' logs: {len(found)} lines "
        f"({len(SECRETS)} secrets searched for in {len(stacks)} logs)"
    )
    assert not found, f"a secret was logged: {found[:5]}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    running = LocalStack(tmp_path_factory.mktemp("local-stack"))
    try:
        yield running
    finally:
        code = running.stop(signal.SIGTERM)
    assert code == 0, f"the local stack exited {code} on SIGTERM\n{running.process.log()}"


@pytest.fixture
def consumers(tmp_path: Path) -> Iterator[Callable[..., Consumer]]:
    """Starts demo consumers (`consumers("name", mode=…)`); stops every one at the end."""
    started: list[Consumer] = []

    def start(name: str, mode: str = "ok") -> Consumer:
        consumer = Consumer(name, tmp_path, mode=mode)
        started.append(consumer)
        return consumer

    yield start
    for consumer in started:
        consumer.stop()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The figures the tests measured (e.g. test_fault_injection.py's), when any ran."""
    if SUMMARY:
        terminalreporter.section("end-to-end figures")
        for line in SUMMARY:
            terminalreporter.write_line(line)
