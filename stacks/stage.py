"""A deployment's settings, per stage: `deploy/<stage>.json`, read by every synth and deploy (`-c stage=<name>`).

The file is the one reviewed place for what a deployment sets (its stack name, alarm address, concurrency, retry
schedule...): a plain `cdk deploy` applies it again, so a redeploy changes nothing that was set. A `-c name=value`
on the command line still wins for a one-off, and is gone on the next deploy unless it is committed to the file.
cdk.json's context keeps only the CDK's own feature flags.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stacks.config import InvalidConfiguration, setting_names

STAGE_CONTEXT = "stage"
DEFAULT_STAGE = "dev"
STAGE_DIR = Path(__file__).resolve().parents[1] / "deploy"
_STAGE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")


class InvalidStage(InvalidConfiguration):
    pass


def stage_name(raw: Any) -> str:
    """The `stage` context, or the default stage; a name that cannot be a file of deploy/ is refused."""
    name = DEFAULT_STAGE if raw in (None, "") else raw
    if not isinstance(name, str) or not _STAGE_NAME.fullmatch(name):
        raise InvalidStage(f"CDK context {STAGE_CONTEXT}={raw!r} is not a stage name (lower case, digits, - and _)")
    return name


def load(stage: str, stage_dir: Path = STAGE_DIR) -> dict[str, Any]:
    """The stage file's settings, checked: a JSON object whose every key is a setting stacks/config.py reads."""
    path = stage_dir / f"{stage}.json"
    if not path.is_file():
        known = sorted(p.stem for p in stage_dir.glob("*.json"))
        raise InvalidStage(f"no stage file {path} for stage {stage!r} (stages: {', '.join(known) or 'none'})")
    try:
        settings = json.loads(path.read_text())
    except ValueError as error:
        raise InvalidStage(f"{path} is not valid JSON: {error}") from error
    if not isinstance(settings, dict):
        raise InvalidStage(f"{path} must hold a JSON object of settings")
    allowed = setting_names()
    unknown = sorted(set(settings) - allowed)
    if unknown:
        # A misspelt key would otherwise be ignored and its setting silently left at the default.
        names = ", ".join(repr(key) for key in unknown)
        raise InvalidStage(f"{path}: unknown setting {names}; the settings are {', '.join(sorted(allowed))}")
    return settings


def resolve(context: Mapping[str, Any], stage_dir: Path = STAGE_DIR) -> dict[str, Any]:
    """The settings a synth uses: the stage file's, each overridden by the same name given in `context` (the CLI's
    `-c`). Only deployment settings are returned (not CDK's feature flags)."""
    settings = load(stage_name(context.get(STAGE_CONTEXT)), stage_dir)
    overrides = {name: value for name, value in context.items() if name in setting_names() and value is not None}
    return {**settings, **overrides}


class Settings:
    """The resolved settings with a construct node's `try_get_context`, so stacks/config.py's readers (and their
    checks) serve the deploy script as they serve synth."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.values = dict(values)

    def try_get_context(self, key: str) -> Any:
        return self.values.get(key)
