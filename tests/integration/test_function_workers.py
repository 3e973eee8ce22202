"""The local stack's worker pool never hands an invocation to a dead worker: it replaces it, as Lambda replaces an
execution environment that died (`local.function_workers`).

Real worker processes, forked from the pool's fork server, are killed with SIGKILL (what the kernel's OOM killer
or an operator does; nothing in the worker runs). The function invoked is the consumer portal's page: it touches
no AWS service, so the pool is all that is under test. Each wait is on an event (the worker's exit, a thread
blocked in its send), never on a sleep.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from multiprocessing import forkserver
from pathlib import Path
from typing import Any

import pytest

from hookrelay.adapters import schema
from hookrelay.domain import api_keys
from hookrelay.functions import API, AUTHORIZER, BY_NAME, PORTAL
from local import gateway, lambda_runtime
from local.as_deployed import local_deployment, local_settings, placeholder_environment
from local.function_workers import FunctionWorkers, InvocationFailed, Worker
from tests.support.pump import wait_until

WAIT_SECONDS = 30.0  # generous: a fork server's first start imports every handler


@pytest.fixture(scope="module")
def silent_aws() -> Iterator[str]:
    """An "AWS endpoint" on 127.0.0.1 that accepts connections and never answers: a call to it blocks its
    invocation (for botocore's read timeout), so a worker can be killed while it runs a handler."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stopping = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stopping.is_set():
            try:
                accepted.append(server.accept()[0])
            except TimeoutError:
                continue

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stopping.set()
        acceptor.join(5)
        for connection in accepted:
            connection.close()
        server.close()


def _pool(monkeypatch: pytest.MonkeyPatch, silent_aws: str, spares: tuple[str, ...] = ()) -> Iterator[FunctionWorkers]:
    # The workers' environment is the fork server's, which it takes from this process when it starts: a fresh one
    # here, with a region (it reads the AWS service models), test credentials, and the silent endpoint, so that no
    # call can leave the machine. The portal function makes no AWS call; the authorizer reads its keys' table.
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_ENDPOINT_URL", silent_aws)
    monkeypatch.setenv(schema.API_KEYS.env_var, "keys")
    forkserver._forkserver._stop()  # started again, with this environment, by the pool's first fork
    workers = FunctionWorkers(dict.fromkeys(BY_NAME, 4), "WARNING", spares=spares)
    lambda_runtime.use_workers(workers)
    try:
        yield workers
    finally:
        lambda_runtime.use_workers(None)
        workers.stop()
        forkserver._forkserver._stop()  # the next user starts its own, with its environment


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch, silent_aws: str) -> Iterator[FunctionWorkers]:
    yield from _pool(monkeypatch, silent_aws)


@pytest.fixture
def pool_with_spare_portals(monkeypatch: pytest.MonkeyPatch, silent_aws: str) -> Iterator[FunctionWorkers]:
    yield from _pool(monkeypatch, silent_aws, spares=(PORTAL.name,))


def page() -> gateway.GatewayResponse:
    """GET /portal through the local API gateway: one invocation of the portal function, in a worker."""
    return gateway.handle("GET", "/portal")


def only_worker(pool: FunctionWorkers, function: str = PORTAL.name) -> Worker:
    [worker] = [w for w in pool._all if w.process.is_alive() and w.process.name == f"hookrelay-{function}"]
    return worker


def kill(worker: Worker) -> None:
    os.kill(worker.process.pid, signal.SIGKILL)  # type: ignore[arg-type]


def test_an_idle_worker_killed_is_replaced_and_the_next_invocation_succeeds(pool: FunctionWorkers) -> None:
    assert page().status == 200
    killed = only_worker(pool)

    kill(killed)
    killed.process.join(WAIT_SECONDS)  # dead and reaped: `is_alive` says so

    answer = page()

    assert answer.status == 200, answer.body[:200]
    assert only_worker(pool) is not killed


def portal_workers(pool: FunctionWorkers) -> list[Worker]:
    return [w for w in pool._all if w.process.is_alive() and w.process.name == f"hookrelay-{PORTAL.name}"]


def test_a_function_with_a_spare_has_a_worker_ready_beside_the_busy_one_and_no_more_than_its_limit(
    pool_with_spare_portals: FunctionWorkers,
) -> None:
    """The local delivery function's spare: once its last idle worker is taken, another is forked in the background,
    so that a second invocation at once does not wait for a fork; never beyond the function's concurrency."""
    pool = pool_with_spare_portals
    assert page().status == 200
    wait_until(lambda: len(portal_workers(pool)) == 2, "a spare portal worker beside the one that ran")
    for _ in range(6):  # one at a time: the warm one runs each, and the spare stays spare
        assert page().status == 200
    assert len(portal_workers(pool)) == 2
    at_once = [_in_background(page) for _ in range(6)]
    assert all(answer.result().status == 200 for answer in at_once)
    assert len(portal_workers(pool)) <= 4  # the portal's concurrency here


def test_an_idle_worker_killed_just_now_is_never_handed_an_invocation(pool: FunctionWorkers) -> None:
    """Killed and invoked at once, before anyone reaped it: its pipe is closed already, whatever its exit code says."""
    for _ in range(5):
        assert page().status == 200
        kill(only_worker(pool))

        answer = page()

        assert answer.status == 200, answer.body[:200]


def test_a_worker_killed_mid_invocation_fails_that_invocation_only(pool: FunctionWorkers) -> None:
    """The worker is running the handler (the authorizer, blocked on its keys' table) when it is killed: that
    invocation fails, as Lambda's does when its environment dies, and is not run again here (the handler may have
    done anything); the dead worker is never checked back in, so the next invocation gets a new one."""
    event = {"headers": {"authorization": f"Bearer {api_keys.mint_key().token}"}}
    for _ in range(3):
        invocation = _in_background(lambda: pool.invoke(AUTHORIZER.name, event))
        worker = _wait_for_worker(pool, AUTHORIZER.name)
        _wait_until_blocked_on_aws(worker)

        kill(worker)

        assert isinstance(invocation.result(), InvocationFailed)
        answer = page()
        assert answer.status == 200, answer.body[:200]
        assert worker not in pool._all  # ended and forgotten


def test_a_route_whose_worker_is_killed_mid_invocation_answers_as_api_gateway_answers_a_function_error(
    pool: FunctionWorkers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the gateway: the API function, blocked on its endpoints' table, is killed. The caller gets API
    Gateway's answer to a function error (502, `{"message": …}`), never a 500 nor a dropped connection, and the
    route works again at once."""
    for table in schema.ALL_TABLES:  # named for the API function (the fork server, started below, takes them)
        monkeypatch.setenv(table.env_var, table.logical_name)
    token = "Bearer " + api_keys.mint_key().token
    cache = gateway.AuthorizerCache(60)  # the authorizer's answer, as API Gateway has it cached: only the API runs
    cache.put(token, {"isAuthorized": True, "context": {"key_id": "key_1", "role": api_keys.tenant_role("ten_1")}})

    listing = _in_background(lambda: gateway.handle("GET", "/v1/endpoints", "", {"authorization": token}, b"", cache))
    worker = _wait_for_worker(pool, API.name)
    _wait_until_blocked_on_aws(worker)
    kill(worker)

    answer = listing.result()
    assert isinstance(answer, gateway.GatewayResponse), answer
    assert (answer.status, answer.json()) == (502, {"message": "Internal Server Error"})
    assert answer.status == gateway.FUNCTION_ERROR_STATUS
    assert page().status == 200


def test_a_worker_that_dies_before_the_event_reaches_it_is_replaced_and_the_invocation_retried(
    pool: FunctionWorkers,
) -> None:
    """The worker dies with the event written to its pipe but not read (stopped, then killed): no handler saw the
    event, so it goes to a fresh worker and the invocation succeeds."""
    for size in (0, 8 * 1024 * 1024):  # sent whole into the pipe; and too large for it, killed mid-send
        assert page().status == 200
        worker = only_worker(pool)
        os.kill(worker.process.pid, signal.SIGSTOP)  # type: ignore[arg-type]  # it reads nothing more
        headers = {"x-padding": "x" * size}
        invocation = _in_background(lambda: gateway.handle("GET", "/portal", headers=headers))  # noqa: B023 - joined here
        _wait_until_in(invocation.thread, ("_recv", "_recv_bytes", "_send", "_send_bytes"))

        kill(worker)

        answer = invocation.result()
        assert isinstance(answer, gateway.GatewayResponse), answer
        assert answer.status == 200, answer.body[:200]


def test_the_local_stack_s_workers_run_as_deployed_their_own_environment_and_their_calls_checked(
    monkeypatch: pytest.MonkeyPatch, silent_aws: str
) -> None:
    """A pool given the deployment (as the local stack gives it) makes each worker its function's alone: the
    authorizer's worker has the authorizer's variables and no other function's, and with its GetItem on the keys'
    table taken away its lookup is refused in the worker, as AWS refuses it, before any request leaves."""
    for name, value in {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_ENDPOINT_URL": silent_aws,  # never reached: the refusal comes first
    }.items():
        monkeypatch.setenv(name, value)
    deployment = local_deployment(placeholder_environment(), local_settings())
    forkserver._forkserver._stop()
    workers = FunctionWorkers(
        dict.fromkeys(BY_NAME, 1), "WARNING", deployment.without(AUTHORIZER.name, "dynamodb:GetItem")
    )
    try:
        seen = workers._as_deployed(AUTHORIZER.name)
        assert seen is not None
        own = deployment.environments[AUTHORIZER.name]
        assert {name: seen.environment[name] for name in own} == own
        assert not (deployment.names - set(own)) & set(seen.environment)  # nothing of another function's
        assert schema.TENANTS.env_var not in seen.environment

        event = {"headers": {"authorization": f"Bearer {api_keys.mint_key().token}"}}
        with pytest.raises(InvocationFailed, match=r"AccessDeniedException.*dynamodb:GetItem"):
            workers.invoke(AUTHORIZER.name, event)
    finally:
        workers.stop()
        forkserver._forkserver._stop()


class _Background:
    def __init__(self, call: Callable[[], Any]) -> None:
        self._outcome: list[Any] = []
        self.thread = threading.Thread(target=lambda: self._outcome.append(_try(call)), daemon=True)
        self.thread.start()

    def result(self) -> Any:
        self.thread.join(WAIT_SECONDS)
        assert self._outcome, "the invocation did not end"
        return self._outcome[0]


def _in_background(call: Callable[[], Any]) -> _Background:
    return _Background(call)


def _wait_for_worker(pool: FunctionWorkers, function: str) -> Worker:
    pause = threading.Event()
    for _ in range(int(WAIT_SECONDS / 0.01)):
        found = [w for w in pool._all if w.process.name == f"hookrelay-{function}" and w.process.is_alive()]
        if found:
            return found[0]
        pause.wait(0.01)
    raise AssertionError(f"no {function} worker started")


def _wait_until_blocked_on_aws(worker: Worker) -> None:
    """Until the worker holds a TCP connection (to the silent endpoint): it is inside the handler's first call."""
    pause = threading.Event()
    for _ in range(int(WAIT_SECONDS / 0.01)):
        if _tcp_sockets() & _sockets_of(worker.process.pid):  # type: ignore[arg-type]
            return
        pause.wait(0.01)
    raise AssertionError("the worker never called AWS")


def _sockets_of(pid: int) -> set[str]:
    """The inodes of the process's sockets."""
    found = set()
    for descriptor in Path(f"/proc/{pid}/fd").iterdir():
        try:
            link = os.readlink(descriptor)
        except OSError:  # closed meanwhile
            continue
        if link.startswith("socket:["):
            found.add(link[len("socket:[") : -1])
    return found


def _tcp_sockets() -> set[str]:
    """The inodes of the machine's TCP sockets (/proc/net/tcp's tenth column)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as listing:
            inodes |= {line.split()[9] for line in list(listing)[1:]}
    return inodes


def _try(call: Any) -> Any:
    try:
        return call()
    except Exception as error:
        return error


def _wait_until_in(thread: threading.Thread, functions: tuple[str, ...]) -> None:
    """Until `thread` is inside one of `functions` (the pipe's send or receive)."""
    pause = threading.Event()
    for _ in range(int(WAIT_SECONDS / 0.01)):
        frame = sys._current_frames().get(thread.ident or -1)  # where the thread is, for the test
        while frame is not None and frame.f_code.co_name not in functions:
            frame = frame.f_back
        if frame is not None:
            return
        pause.wait(0.01)
    raise AssertionError(f"the invocation never reached {functions}")
