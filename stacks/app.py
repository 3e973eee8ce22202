"""Build the CDK app: the stage's settings, the stack, and the cdk-nag AWS Solutions checks. Used by app.py, the
deploy script's rehearsal and the infrastructure tests."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from stacks import config, stage
from stacks.hookrelay_stack import HookrelayStack


def build_app(
    context: Mapping[str, Any] | None = None, outdir: str | None = None, stage_dir: Path = stage.STAGE_DIR
) -> tuple[App, HookrelayStack]:
    """`context` as the CLI gives it (cdk.json's, then `-c`); the stage file fills every setting it does not name."""
    app = App(context=dict(context) if context is not None else None, outdir=outdir)
    node = app.node
    for name, value in stage.load(stage.stage_name(node.try_get_context(stage.STAGE_CONTEXT)), stage_dir).items():
        if node.try_get_context(name) is None:  # a -c of the same name is a one-off override
            node.set_context(name, value)
    stack = HookrelayStack(
        app,
        config.stack_name(node),
        description="Hookrelay: webhook delivery with a published retry contract, dead letters and redrive.",
    )
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack
