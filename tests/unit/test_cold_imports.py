"""Each function's cold start imports its own code only: a budget relative to the code, not a time.

Every handler module is imported in a fresh interpreter, as Lambda imports it (tracing off, the deployed
default), and what it loaded is compared with what it may load. A handler that starts importing another
function's handler or services (say, through a shared module that grew an import) fails here, as does any
handler that loads the X-Ray SDK with tracing off, or an authorizer that loads pydantic or Powertools.
bench/cold_start.py measures what these imports cost, as a ratio to `import boto3`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache

import pytest

from hookrelay.functions import (
    API,
    AUTHORIZER,
    DELIVERY,
    FUNCTIONS,
    INGEST,
    INTERPRETER_ENVIRONMENT,
    RECONCILER,
    REDRIVE,
    SWEEPER,
    Function,
)

# The management API's own use cases: no other function has any business importing them.
API_SERVICES = (
    "hookrelay.services.api_keys",
    "hookrelay.services.tenants",
    "hookrelay.services.endpoints",
    "hookrelay.services.delivery_log",
)
# What only some function needs, by who may import it (a module of a function's own path is not listed).
FOREIGN: dict[str, tuple[str, ...]] = {
    AUTHORIZER.name: (
        "pydantic",  # the authorizer checks a token: no model
        "aws_lambda_powertools",
        "requests",
        "hookrelay.domain.models",
        "hookrelay.services.ports",
        "hookrelay.services.api_keys",  # key management is the API's; the authorizer has services.authorize
    ),
    INGEST.name: (
        *API_SERVICES,
        "hookrelay.services.delivery",
        "hookrelay.services.circuit",
        "hookrelay.services.reconcile",
        "hookrelay.services.redrive",
        "hookrelay.services.auto_disable",
        "requests",  # sends no webhook
    ),
    DELIVERY.name: (
        *API_SERVICES,
        "hookrelay.services.ingest",
        "hookrelay.services.reconcile",
        "hookrelay.services.redrive",
        "hookrelay.services.auto_disable",
        "aws_lambda_powertools.event_handler",  # no HTTP routes
        "aws_lambda_powertools.utilities.batch",  # handlers/sqs_batch.py does its job in a page
        "hookrelay.domain.event_types",  # the catalogue is ingest's and the API's (the ports name it for types only)
    ),
    API.name: (  # the management API: the other functions' paths at a cold start are not its own
        "hookrelay.services.delivery",
        "hookrelay.services.circuit",
        "hookrelay.services.ingest",
        "hookrelay.services.reconcile",
        "hookrelay.services.auto_disable",
        "hookrelay.services.operational_events",
        "requests",  # sends no webhook
    ),
}
NOT_API = (*API_SERVICES, "aws_lambda_powertools.event_handler")

CHILD = "import importlib, json, sys; importlib.import_module(sys.argv[1]); print(json.dumps(sorted(sys.modules)))"


@cache
def loaded_by(module: str, tracing: str | None = "true") -> frozenset[str]:
    env = {k: v for k, v in os.environ.items() if k != "POWERTOOLS_TRACE_DISABLED"}
    if tracing is not None:
        env["POWERTOOLS_TRACE_DISABLED"] = tracing
    env["AWS_DEFAULT_REGION"] = "us-east-1"
    child = subprocess.run(  # noqa: S603 - this interpreter, a fixed program
        [sys.executable, "-c", CHILD, module], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert child.returncode == 0, child.stderr
    return frozenset(json.loads(child.stdout.strip().splitlines()[-1]))


def handler_module(function: Function) -> str:
    return function.handler.rpartition(".")[0]


def within(loaded: frozenset[str], prefix: str) -> list[str]:
    return sorted(m for m in loaded if m == prefix or m.startswith(prefix + "."))


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.name)
def test_a_handler_imports_no_other_functions_handler(function: Function) -> None:
    loaded = loaded_by(handler_module(function))
    others = {handler_module(f) for f in FUNCTIONS} - {handler_module(function)}
    assert sorted(loaded & others) == []


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.name)
def test_a_handler_imports_no_other_functions_services(function: Function) -> None:
    loaded = loaded_by(handler_module(function))
    foreign = FOREIGN.get(function.name, NOT_API)
    assert [m for prefix in foreign for m in within(loaded, prefix)] == []


# The functions that only move the system's own records (domain/models.py: dataclasses) validate no input: pydantic
# was about a quarter of their import time (bench/cold_start.py).
MOVE_RECORDS = (DELIVERY, REDRIVE, SWEEPER, RECONCILER)


@pytest.mark.parametrize("function", MOVE_RECORDS, ids=lambda f: f.name)
def test_the_functions_that_move_records_load_no_validation_library(function: Function) -> None:
    assert within(loaded_by(handler_module(function)), "pydantic") == []


@pytest.mark.parametrize("function", [INGEST, API], ids=lambda f: f.name)
def test_the_functions_that_validate_requests_load_pydantic(function: Function) -> None:
    """The check above can fail: the functions that take requests validate them with pydantic."""
    assert within(loaded_by(handler_module(function)), "pydantic")


@pytest.mark.parametrize("tracing", ["true", None], ids=["disabled", "unset"])
@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.name)
def test_with_tracing_off_no_handler_imports_the_xray_sdk(function: Function, tracing: str | None) -> None:
    loaded = loaded_by(handler_module(function), tracing)
    assert within(loaded, "aws_xray_sdk") == []


def test_with_tracing_on_the_xray_sdk_is_loaded() -> None:
    """The check above can fail: with tracing on, Powertools' Tracer loads the X-Ray SDK."""
    assert within(loaded_by(handler_module(DELIVERY), "false"), "aws_xray_sdk")


# What a handler loads on the first request that needs it, never at a cold start.
ON_FIRST_USE = (
    "cryptography",  # about 40 ms; only Ed25519 keys need it, HMAC signing (most endpoints) never does
    "aws_lambda_powertools.utilities.idempotency",  # only requests with an Idempotency-Key
)


@pytest.mark.parametrize("module", ON_FIRST_USE)
@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.name)
def test_no_handler_imports_at_a_cold_start_what_only_some_requests_use(function: Function, module: str) -> None:
    assert within(loaded_by(handler_module(function)), module) == []


def test_an_ed25519_key_loads_cryptography_when_used() -> None:
    """The check above can fail: the first Ed25519 key used loads it."""
    program = (
        "import sys; from hookrelay.domain import signing; "
        "signing.public_key(signing.generate_private_key()); "
        "print(any(m.startswith('cryptography') for m in sys.modules))"
    )
    child = subprocess.run(  # noqa: S603 - this interpreter, a fixed program
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "True"


# Building a model with importlib.metadata's entry point lookup made to fail: pydantic's plugin lookup is the only
# reader of entry points at a handler's cold start.
PLUGIN_LOOKUP = (
    "import importlib.metadata as metadata\n"
    "def refused(**_):\n"
    "    raise SystemExit('entry points read')\n"
    "metadata.entry_points = refused\n"
    "import hookrelay.handlers.publish_schemas\n"
)


@pytest.mark.parametrize("environment", [INTERPRETER_ENVIRONMENT, {}], ids=["as-deployed", "without-it"])
def test_the_functions_environment_spares_pydantic_its_plugin_lookup(environment: dict[str, str]) -> None:
    """Every function's environment keeps pydantic from reading each installed distribution's entry points for
    plugins at its first model; without it (the control) the lookup happens."""
    env = {k: v for k, v in os.environ.items() if k not in INTERPRETER_ENVIRONMENT} | dict(environment)
    child = subprocess.run(  # noqa: S603 - this interpreter, a fixed program
        [sys.executable, "-c", PLUGIN_LOOKUP], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert (child.returncode == 0) == bool(environment), child.stderr
