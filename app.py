#!/usr/bin/env python3
"""The CDK app (`npx cdk synth`): environment-agnostic, no lookups, so it synthesizes with no AWS account."""

from __future__ import annotations

from stacks.app import build_app

if __name__ == "__main__":
    app, _ = build_app()
    app.synth()
