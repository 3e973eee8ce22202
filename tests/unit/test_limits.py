"""The per-tenant limits (issue 27): one definition (domain/limits.py), validated from CDK context, carried to the API
function alone, stated by the stage files and docs/deploying.md as the code states them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from hookrelay.adapters import schema
from hookrelay.domain.limits import DEFAULT_LIMITS, LIMITS, TenantLimits, content_filter_caps_table, limits_table
from hookrelay.function_environment import Resources, Settings, environment
from hookrelay.functions import API, FUNCTIONS
from stacks import config

ROOT = Path(__file__).resolve().parents[2]
REGION = re.compile(r"<!-- limits:begin[^\n]*-->\n(.*?)<!-- limits:end -->", re.DOTALL)


class _Node:
    def __init__(self, context: dict[str, Any]) -> None:
        self.context = context

    def try_get_context(self, key: str) -> Any:
        return self.context.get(key)


def test_the_deploying_docs_table_of_limits_is_the_codes() -> None:
    match = REGION.search((ROOT / "docs" / "deploying.md").read_text())
    assert match, "docs/deploying.md has no limits:begin/limits:end region"
    assert match.group(1).strip() == limits_table().strip()
    assert {name for name, *_ in LIMITS} <= config.setting_names()


@pytest.mark.parametrize("stage", ["dev", "production"])
def test_the_stage_files_state_the_defaults(stage: str) -> None:
    settings = json.loads((ROOT / "deploy" / f"{stage}.json").read_text())
    assert config.tenant_limits(_Node(settings)) == DEFAULT_LIMITS
    assert settings[config.MAX_ENDPOINTS_PER_TENANT_CONTEXT] == DEFAULT_LIMITS.max_endpoints_per_tenant
    assert settings[config.MAX_FILTERS_PER_ENDPOINT_CONTEXT] == DEFAULT_LIMITS.max_filters_per_endpoint


def test_the_context_is_validated_with_the_limit_named() -> None:
    assert config.tenant_limits(_Node({})) == DEFAULT_LIMITS
    given = config.tenant_limits(_Node({"max_endpoints_per_tenant": "50", "max_filters_per_endpoint": 5}))
    assert given == TenantLimits(max_endpoints_per_tenant=50, max_filters_per_endpoint=5)
    for bad in (
        {"max_endpoints_per_tenant": 0},
        {"max_endpoints_per_tenant": 10_001},
        {"max_filters_per_endpoint": 101},
        {"max_filters_per_endpoint": True},
        {"max_endpoints_per_tenant": "many"},
    ):
        with pytest.raises(config.InvalidConfiguration, match=next(iter(bad))):
            config.tenant_limits(_Node(bad))


def test_only_the_api_function_is_deployed_with_the_limits() -> None:
    resources = Resources(
        table_names={spec: spec.logical_name for spec in schema.ALL_TABLES},
        queue_urls={spec: spec.logical_name for spec in schema.all_queues(2)},
        topic_arns={spec: spec.logical_name for spec in schema.ALL_TOPICS},
        retry_state_machine_arn="arn",
        api_url="https://api.example",
    )
    settings = Settings("default", 10, "5", None, False, max_endpoints_per_tenant=7, max_filters_per_endpoint=3)
    for function in FUNCTIONS:
        env = environment(function, resources, settings)
        if function.name == API.name:
            assert env[schema.MAX_ENDPOINTS_PER_TENANT] == "7" and env[schema.MAX_FILTERS_PER_ENDPOINT] == "3"
        else:
            assert schema.MAX_ENDPOINTS_PER_TENANT not in env, function.name


def test_the_consumer_guides_table_of_filter_caps_is_the_codes() -> None:
    region = re.compile(r"<!-- filter-caps:begin[^\n]*-->\n(.*?)<!-- filter-caps:end -->", re.DOTALL)
    match = region.search((ROOT / "docs" / "consumer-guide.md").read_text())
    assert match, "docs/consumer-guide.md has no filter-caps:begin/filter-caps:end region"
    assert match.group(1).strip() == content_filter_caps_table().strip()
