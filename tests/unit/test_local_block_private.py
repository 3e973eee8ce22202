"""`python -m local --block-private`: the deployed destination guard, on the local stack; `make run` unchanged."""

from __future__ import annotations

from hookrelay.adapters import aws, schema
from local.as_deployed import LOCAL_ONLY
from local.stack import local_only_environment, parse_args


def test_by_default_the_local_stack_lets_endpoints_on_127_0_0_1_receive_webhooks() -> None:
    args = parse_args([])
    assert args.block_private is False
    env = local_only_environment(fast=args.fast, block_private=args.block_private)
    assert env == {schema.ALLOW_PRIVATE_DESTINATIONS: "true", aws.LOCAL_MOTO_CALLS: "true"}


def test_block_private_runs_the_deployed_guard() -> None:
    """ "false", what the deployed functions' unset variable means, spelt out: a shell's "true" cannot come back."""
    args = parse_args(["--block-private", "--fast"])
    env = local_only_environment(fast=args.fast, block_private=args.block_private)
    assert env[schema.ALLOW_PRIVATE_DESTINATIONS] == "false"
    assert set(env) <= set(LOCAL_ONLY)
