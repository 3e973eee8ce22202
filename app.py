#!/usr/bin/env python3
"""The CDK app (`npx cdk synth`): environment-agnostic, no lookups, so it synthesizes with no AWS account."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "lambdas"))  # the runtime's `hookrelay` package

from stacks.app import build_app

if __name__ == "__main__":
    app, _ = build_app()
    app.synth()
