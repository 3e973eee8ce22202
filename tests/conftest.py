from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from local.as_deployed import local_deployment, local_settings, placeholder_environment
from local.iam_check import CALLS_LOG, unused_actions
from local.processes import keep_what_is_loaded
from scripts.create_admin_key import create_admin_key
from tests.support.aws import moto_stack
from tests.support.consumer import ScriptedConsumer
from tests.support.platform import Platform

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")


@pytest.fixture
def platform() -> Iterator[Platform]:
    with moto_stack() as env:
        admin = create_admin_key(env["API_KEYS_TABLE"])
        yield Platform(env=env, admin_token=admin.token)


@pytest.fixture
def consumer() -> Iterator[ScriptedConsumer]:
    server = ScriptedConsumer()
    yield server
    server.close()


def pytest_configure(config: pytest.Config) -> None:
    """One file of the AWS calls every function made, across this run's processes (local/iam_check.py): started
    empty by the run's controller; its pytest-xdist workers append to it."""
    if hasattr(config, "workerinput"):
        return
    log = Path(config.rootpath) / "build" / "iam-calls.log"
    log.parent.mkdir(exist_ok=True)
    log.write_text("")
    os.environ[CALLS_LOG] = str(log)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Per function, the actions its code called in this run, and those its role grants that no test called."""
    log = os.environ.get(CALLS_LOG)
    if hasattr(config, "workerinput") or not log or not Path(log).read_text():
        return
    pairs = (line.split(maxsplit=1) for line in Path(log).read_text().splitlines() if line.strip())
    seen = {(function, action) for function, action in pairs}
    policies = local_deployment(placeholder_environment(), local_settings()).policies
    terminalreporter.section("IAM: each function's calls in this run, and its grants never called")
    for function, actions in unused_actions(seen, policies).items():
        called = sorted(action for name, action in seen if name == function)
        terminalreporter.write_line(f"{function}: called {', '.join(called) or 'nothing'}")
        terminalreporter.write_line(f"{' ' * len(function)}  never called: {', '.join(actions) or 'none'}")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Every test module is imported by now (boto3's and moto's service models, the handlers): kept for the session,
    out of the collector's full walks, as the local stack's processes keep theirs (the crash-point matrix's drain
    and redrive paths took 76.7 s instead of 84.6 s, one run each)."""
    keep_what_is_loaded()
