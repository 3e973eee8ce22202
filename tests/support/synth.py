"""The synthesized CDK app as the infrastructure tests read it: the template, its assets, and logical ids."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hookrelay.function_environment import Settings

ROOT = Path(__file__).resolve().parents[2]
CUSTOM_RETRY_SCHEDULE = "[0, 45, 90, 180]"
ALARM_EMAIL = "oncall@example.com"
ENFORCED_EVENT_CATALOGUE = "true"  # as `-c enforce_event_catalogue=true` passes it: a string
NARROW_ENDPOINT_PORTS = "NARROW"  # as `-c endpoint_ports=NARROW` passes it (the stage file's is "wide")
DELIVERY_SHARDS = "3"  # as `-c delivery_shards=3` passes it (the stage file's is 2): 6 delivery queues


def cdk_json_context() -> dict[str, Any]:
    """cdk.json's context, as the CLI hands it to the app: the CDK's feature flags (no deployment setting)."""
    return json.loads((ROOT / "cdk.json").read_text())["context"]


def stage_settings(stage: str | None = None) -> dict[str, Any]:
    """A stage file's settings (deploy/<stage>.json; the default stage unless named), as every synth reads them."""
    from stacks.stage import load, stage_name

    return load(stage_name(stage))


@dataclass(frozen=True)
class Synthesized:
    outdir: Path
    stack_name: str
    template: dict[str, Any]
    function_settings: Settings  # what the stack's functions were deployed with

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


# --- IAM: what the synthesized policies grant ---


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def role_statements(synthesized: Synthesized, role_id: str) -> list[dict[str, Any]]:
    """Every statement of every inline policy attached to a role."""
    return [
        statement
        for policy in synthesized.properties("AWS::IAM::Policy")
        if {"Ref": role_id} in policy["Roles"]
        for statement in policy["PolicyDocument"]["Statement"]
    ]


def function_role(synthesized: Synthesized, name: str) -> str:
    function = synthesized.template["Resources"][function_logical_ids(synthesized)[name]]
    return function["Properties"]["Role"]["Fn::GetAtt"][0]


def actions_on(statements: list[dict[str, Any]], prefix: str) -> set[str]:
    return {action for s in statements for action in as_list(s["Action"]) if action.startswith(prefix)}


def table_of(resource: Any) -> str | None:
    """The table logical id an IAM resource points at (the table or its indexes), or None."""
    if isinstance(resource, dict) and "Fn::GetAtt" in resource:
        return resource["Fn::GetAtt"][0]
    if isinstance(resource, dict) and "Fn::Join" in resource:
        for part in resource["Fn::Join"][1]:
            if isinstance(part, dict) and "Fn::GetAtt" in part:
                return part["Fn::GetAtt"][0]
    return None
