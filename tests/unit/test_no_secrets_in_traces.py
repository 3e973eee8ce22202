"""Responses never go into X-Ray: some carry API keys and signing secrets, shown once and kept nowhere else."""

from __future__ import annotations

import ast
from pathlib import Path

HANDLERS = Path(__file__).resolve().parents[2] / "lambdas" / "hookrelay" / "handlers"
TRACER_DECORATORS = {"capture_lambda_handler", "capture_method"}


def tracer_decorators() -> list[tuple[str, ast.expr]]:
    found = []
    for source in sorted(HANDLERS.glob("*.py")):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.FunctionDef):
                for decorator in node.decorator_list:
                    target = decorator.func if isinstance(decorator, ast.Call) else decorator
                    if isinstance(target, ast.Attribute) and target.attr in TRACER_DECORATORS:
                        found.append((f"{source.name}:{node.name}", decorator))
    return found


def test_every_traced_handler_leaves_its_response_out_of_the_trace() -> None:
    decorators = tracer_decorators()
    assert decorators, "no traced handlers found: the check would pass vacuously"
    for where, decorator in decorators:
        keywords = {k.arg: k.value for k in decorator.keywords} if isinstance(decorator, ast.Call) else {}
        capture = keywords.get("capture_response")
        assert isinstance(capture, ast.Constant) and capture.value is False, where
