"""Synthesize the real app once per test session (jsii is slow) and hand the tests its cloud assembly.

The app gets cdk.json's context, as `cdk synth` would, plus a custom retry schedule given the way the CLI
passes one (`-c retry_schedule='[...]'`: a JSON string), so the schedule's path to the functions is tested
on the same synth.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CUSTOM_RETRY_SCHEDULE = "[0, 45, 90, 180]"


def cdk_json_context() -> dict[str, Any]:
    return json.loads((ROOT / "cdk.json").read_text())["context"]


@dataclass(frozen=True)
class Synthesized:
    outdir: Path
    stack_name: str
    template: dict[str, Any]

    def resources(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {
            logical_id: resource
            for logical_id, resource in self.template["Resources"].items()
            if resource["Type"] == resource_type
        }

    def properties(self, resource_type: str) -> list[dict[str, Any]]:
        return [resource.get("Properties", {}) for resource in self.resources(resource_type).values()]

    @property
    def assets(self) -> dict[str, Any]:
        return json.loads((self.outdir / f"{self.stack_name}.assets.json").read_text())["files"]

    def asset_path(self, asset_hash: str) -> Path:
        return self.outdir / self.assets[asset_hash]["source"]["path"]

    @property
    def metadata(self) -> dict[str, list[dict[str, Any]]]:
        return json.loads((self.outdir / f"{self.stack_name}.metadata.json").read_text())


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    from stacks.app import build_app

    outdir = tmp_path_factory.mktemp("cdk.out")
    app, stack = build_app({**cdk_json_context(), "retry_schedule": CUSTOM_RETRY_SCHEDULE}, outdir=str(outdir))
    try:
        app.synth()  # runs the cdk-nag AWS Solutions checks: unacknowledged findings fail here
    except RuntimeError as error:
        report = outdir / "validation-report.json"
        details = report.read_text() if report.exists() else ""
        pytest.fail(f"cdk synth failed: {error}\n{details}")
    template = json.loads((outdir / stack.template_file).read_text())
    yield Synthesized(outdir=outdir, stack_name=stack.stack_name, template=template)


def function_logical_ids(synthesized: Synthesized) -> dict[str, str]:
    """Function name (in the table of functions) -> the logical id of its AWS::Lambda::Function."""
    from hookrelay.functions import FUNCTIONS

    by_handler = {
        resource["Properties"]["Handler"]: logical_id
        for logical_id, resource in synthesized.resources("AWS::Lambda::Function").items()
    }
    return {function.name: by_handler[function.handler] for function in FUNCTIONS}


def logical_id_of(synthesized: Synthesized, resource_type: str, construct_path: str) -> str:
    """The logical id CDK gave the resource at a construct path ("Queues/DeliveryQueue": path parts + a hash)."""
    pattern = re.compile(re.escape(construct_path.replace("/", "")) + "[0-9A-F]{8}")
    matches = [logical_id for logical_id in synthesized.resources(resource_type) if pattern.fullmatch(logical_id)]
    assert len(matches) == 1, (resource_type, construct_path, matches)
    return matches[0]
