"""The rooms' import rules (docs/architecture.md#what-each-room-may-import), read from the source with `ast`.

domain ← services (against ports) ← adapters ← wiring ← handlers: each room may import the rooms to its left only,
with the named exceptions below, each with its reason.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "lambdas"
PACKAGE = PACKAGE_ROOT / "hookrelay"

AWS_SDKS = ("boto3", "botocore", "aws_lambda_powertools")
FORBIDDEN: dict[str, tuple[str, ...]] = {
    # The contract, pure Python: nothing that runs it, nothing of AWS, no validation library (its records are
    # dataclasses, which the functions that only move records load without pydantic: domain/models.py).
    "hookrelay.domain": (
        "pydantic",
        "hookrelay.services",
        "hookrelay.adapters",
        "hookrelay.handlers",
        "hookrelay.wiring",
        "hookrelay.functions",
        *AWS_SDKS,
    ),
    # Use cases against the ports: no AWS, no adapter, nothing above them.
    "hookrelay.services": ("hookrelay.adapters", "hookrelay.handlers", "hookrelay.wiring", *AWS_SDKS),
    # The ports' implementations: nothing above them.
    "hookrelay.adapters": ("hookrelay.handlers", "hookrelay.wiring"),
    # Thin entry points: services come from the wiring, never an adapter built or called by hand.
    "hookrelay.handlers": ("hookrelay.adapters",),
}

# (importing module, imported module, name): why a handler may import it from an adapter.
HANDLER_EXCEPTIONS: dict[tuple[str, str, str | None], str] = {
    ("hookrelay.handlers.delivery", "hookrelay.adapters.sqs", "parse_queue_message"): "parsing its SQS record",
    ("hookrelay.handlers.redrive", "hookrelay.adapters.redrive_sqs", "parse_job"): "parsing its SQS record",
    ("hookrelay.handlers.delivery", "hookrelay.adapters.telemetry", "METRICS_NAMESPACE"): "Powertools' namespace",
    ("hookrelay.handlers.delivery", "hookrelay.adapters.telemetry", "attempts_metric"): "the metric's one name",
    ("hookrelay.handlers.ingest", "hookrelay.adapters.telemetry", "METRICS_NAMESPACE"): "Powertools' namespace",
    ("hookrelay.handlers.http", "hookrelay.adapters.aws", "throttled"): "an AWS quota past the retries answers 503",
    ("hookrelay.handlers.http", "hookrelay.adapters.aws", "THROTTLED_RETRY_AFTER_SECONDS"): "its Retry-After",
    ("hookrelay.handlers.redrive", "hookrelay.adapters.telemetry", "METRICS_NAMESPACE"): "Powertools' namespace",
    ("hookrelay.handlers.sweeper", "hookrelay.adapters.telemetry", "METRICS_NAMESPACE"): "Powertools' namespace",
    ("hookrelay.handlers.reconciler", "hookrelay.adapters.telemetry", "METRICS_NAMESPACE"): "Powertools' namespace",
    ("hookrelay.handlers.idempotency", "hookrelay.adapters.aws", None): "Powertools idempotency's table client",
    ("hookrelay.handlers.idempotency", "hookrelay.adapters.schema", None): "Powertools idempotency's table name",
    ("hookrelay.handlers.delivery", "hookrelay.adapters.schema", "SQS_MAX_BATCH"): "its batch's workers",
    ("hookrelay.handlers.tracing", "hookrelay.adapters.schema", None): "the tracing switch's one name",
    (
        "hookrelay.handlers.delivery",
        "hookrelay.adapters.schema",
        "DELIVERY_MESSAGE_SECONDS",
    ): "a message's longest path",
}

PORTS = "hookrelay.services.ports"


@dataclass(frozen=True)
class Import:
    module: str  # the module imported from (a submodule when `from package import submodule`)
    name: str | None  # the name imported from it; None when the module itself is imported
    line: int


def module_name(path: Path, root: Path = PACKAGE_ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(dotted: str, root: Path) -> bool:
    base = root.joinpath(*dotted.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def imports_of(tree: ast.Module, module: str, *, is_package: bool = False, root: Path = PACKAGE_ROOT) -> list[Import]:
    """Every import in the module, at any depth (a function's lazy import counts), relative ones resolved."""
    found: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(Import(alias.name, None, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if _is_module(submodule, root):
                    found.append(Import(submodule, None, node.lineno))
                else:
                    found.append(Import(base, alias.name, node.lineno))
    return found


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def runtime_names(tree: ast.Module) -> set[str]:
    """Names the module uses outside annotations (called, subclassed, assigned, compared...)."""
    in_annotations: set[int] = set()
    for node in ast.walk(tree):
        annotations: list[ast.expr | None] = []
        if isinstance(node, ast.arg):
            annotations.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            annotations.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
        for annotation in annotations:
            if annotation is not None:
                in_annotations.update(id(n) for n in ast.walk(annotation))
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in in_annotations}


def violations(source: str, module: str, *, is_package: bool = False, root: Path = PACKAGE_ROOT) -> list[str]:
    """The import rules the module's source breaks, one line each."""
    tree = ast.parse(source)
    room = next((r for r in FORBIDDEN if _within(module, r)), None)
    if room is None:
        return []
    found: list[str] = []
    used_at_runtime = runtime_names(tree)
    for imported in imports_of(tree, module, is_package=is_package, root=root):
        where = f"{module}:{imported.line} imports {imported.module}" + (f".{imported.name}" if imported.name else "")
        forbidden = next((p for p in FORBIDDEN[room] if _within(imported.module, p)), None)
        if forbidden is not None and (module, imported.module, imported.name) not in HANDLER_EXCEPTIONS:
            found.append(f"{where}: the {room.rsplit('.', 1)[1]} may not import {forbidden}")
        if room == "hookrelay.adapters" and _within(imported.module, "hookrelay.services") and imported.module != PORTS:
            found.append(f"{where}: an adapter implements ports and may import no service")
        other_service = (
            room == "hookrelay.services"
            and _within(imported.module, "hookrelay.services")
            and imported.module not in (PORTS, module, "hookrelay.services")
        )
        if other_service and (imported.name is None or imported.name in used_at_runtime):
            found.append(
                f"{where}: a service takes another service only by injection (its type in annotations), "
                "never a helper; share rules through the domain and the ports"
            )
    return found


SOURCES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE_ROOT)))
def test_each_module_keeps_its_rooms_import_rules(path: Path) -> None:
    module = module_name(path)
    assert violations(path.read_text(), module, is_package=path.name == "__init__.py") == []


def test_every_handler_exception_is_still_needed() -> None:
    """An exception nobody uses any more is removed, so that it cannot let a new import in unnoticed."""
    used: set[tuple[str, str, str | None]] = set()
    for path in (PACKAGE / "handlers").glob("*.py"):
        module = module_name(path)
        used |= {(module, i.module, i.name) for i in imports_of(ast.parse(path.read_text()), module)}
    assert set(HANDLER_EXCEPTIONS) <= used, set(HANDLER_EXCEPTIONS) - used


@pytest.mark.parametrize(
    ("module", "source", "broken"),
    [
        ("hookrelay.domain.x", "import boto3", "may not import boto3"),
        ("hookrelay.domain.x", "from pydantic import BaseModel", "may not import pydantic"),
        ("hookrelay.domain.x", "from hookrelay.adapters import schema", "may not import hookrelay.adapters"),
        ("hookrelay.domain.x", "def f():\n    from aws_lambda_powertools import Logger", "aws_lambda_powertools"),
        ("hookrelay.services.x", "from hookrelay.adapters.dynamodb import EventTable", "hookrelay.adapters"),
        ("hookrelay.services.x", "from botocore.exceptions import ClientError", "may not import botocore"),
        ("hookrelay.services.x", "from hookrelay.services.ingest import f\nf()", "never a helper"),
        ("hookrelay.services.x", "from hookrelay.services import ingest", "never a helper"),
        ("hookrelay.services.x", "from .ingest import RULE\nx = RULE", "never a helper"),
        ("hookrelay.adapters.x", "from hookrelay.services.delivery import DeliveryService", "may import no service"),
        ("hookrelay.adapters.x", "from hookrelay import wiring", "may not import hookrelay.wiring"),
        ("hookrelay.handlers.api", "from hookrelay.adapters.dynamodb import EventTable", "hookrelay.adapters"),
        ("hookrelay.handlers.api", "from hookrelay.adapters.sqs import parse_queue_message", "hookrelay.adapters"),
    ],
)
def test_a_broken_rule_is_reported(module: str, source: str, broken: str) -> None:
    found = violations(source, module)
    assert len(found) == 1 and broken in found[0], found


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("hookrelay.services.x", "from hookrelay.services.ports import DeliveryQueue\nq: DeliveryQueue"),
        ("hookrelay.services.x", "from hookrelay.services.replay import Replays\nclass S:\n    r: Replays"),
        ("hookrelay.services.x", "from hookrelay.services.api_keys import Key\ndef f() -> Key: ..."),
        ("hookrelay.adapters.x", "from hookrelay.services.ports import AttemptRecord"),
        ("hookrelay.handlers.delivery", "from hookrelay.adapters.sqs import parse_queue_message"),
        ("hookrelay.handlers.api", "from hookrelay.services.ingest import Accepted"),
    ],
)
def test_what_the_rules_allow_is_not_reported(module: str, source: str) -> None:
    assert violations(source, module) == []
