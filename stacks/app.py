"""Build the CDK app: the stack plus the cdk-nag AWS Solutions checks. Used by app.py and the infrastructure tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from stacks.hookrelay_stack import HookrelayStack

STACK_NAME = "Hookrelay"


def build_app(context: Mapping[str, Any] | None = None, outdir: str | None = None) -> tuple[App, HookrelayStack]:
    app = App(context=dict(context) if context is not None else None, outdir=outdir)
    stack = HookrelayStack(
        app,
        STACK_NAME,
        description="Hookrelay: webhook delivery with a published retry contract, dead letters and redrive.",
    )
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack
