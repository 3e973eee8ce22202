"""The `endpoint_ports` setting's way from CDK context to the functions that hold endpoint URLs to it."""

from __future__ import annotations

from typing import Any

import pytest

from hookrelay.adapters import schema
from hookrelay.domain.addresses import EndpointPorts
from stacks import config
from tests.support.synth import NARROW_ENDPOINT_PORTS, Synthesized, function_logical_ids, stage_settings


class _Node:
    def __init__(self, context: dict[str, Any]) -> None:
        self.context = context

    def try_get_context(self, key: str) -> Any:
        return self.context.get(key)


def test_the_setting_reaches_the_api_and_the_delivery_function_only(synthesized: Synthesized) -> None:
    """The API registers and changes endpoint URLs, the delivery function sends to them; no other function does."""
    for name, logical_id in function_logical_ids(synthesized).items():
        environment = synthesized.template["Resources"][logical_id]["Properties"]["Environment"]["Variables"]
        expected = "narrow" if name in ("api", "delivery") else None
        assert environment.get(schema.ENDPOINT_PORTS) == expected, name
    assert synthesized.function_settings.endpoint_ports is EndpointPorts.NARROW
    assert NARROW_ENDPOINT_PORTS != "narrow"  # the context's spelling, normalized on its way


@pytest.mark.parametrize(
    ("given", "expected"),
    [(None, EndpointPorts.WIDE), ("wide", EndpointPorts.WIDE), ("narrow", EndpointPorts.NARROW)],
)
def test_the_port_policy_is_wide_unless_the_context_narrows_it(given: object, expected: EndpointPorts) -> None:
    node: Any = _Node({} if given is None else {config.ENDPOINT_PORTS_CONTEXT: given})
    assert config.endpoint_ports(node) is expected
    assert stage_settings()[config.ENDPOINT_PORTS_CONTEXT] == "wide"  # deploy/dev.json states the default


@pytest.mark.parametrize("bad", ["medium", 443, True, ["narrow"]])
def test_a_bad_port_policy_fails_synth_with_a_clear_message(bad: object) -> None:
    node: Any = _Node({config.ENDPOINT_PORTS_CONTEXT: bad})
    with pytest.raises(config.InvalidConfiguration, match=r"endpoint_ports.*wide.*narrow"):
        config.endpoint_ports(node)
