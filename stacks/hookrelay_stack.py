"""The app's own stack: the HookRelay construct (stacks/construct.py), its props read from the stage file and
`-c` values (stacks/config.py checks each)."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack
from constructs import Construct

from stacks.construct import DEFAULT_ID, HookRelay
from stacks.props import HookRelayProps


class HookrelayStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        # First: bad configuration fails synth before anything is built.
        props = HookRelayProps.from_context(self)
        # DEFAULT_ID: the CDK leaves it out of logical IDs, so every resource keeps the ID it had when this stack
        # built them itself (a changed ID would replace the deployed tables and queues).
        self.hookrelay = HookRelay(self, DEFAULT_ID, props)
        self.function_settings = self.hookrelay.function_settings
