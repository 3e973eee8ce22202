"""Hookrelay as a CDK construct library: `HookRelay(stack, "Webhooks", HookRelayProps(...))` (docs/embedding.md).

The public names; the implementation is the `stacks` package the app's own stack is built from."""

from __future__ import annotations

from stacks.config import InvalidConfiguration
from stacks.construct import HookRelay
from stacks.props import HookRelayProps

__all__ = ["HookRelay", "HookRelayProps", "InvalidConfiguration"]
