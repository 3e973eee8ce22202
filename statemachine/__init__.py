"""The retry workflow's definition: one ASL file, rendered with the same substitutions everywhere.

The CDK stack loads the file with `DefinitionBody.from_file` and passes `definition_substitutions`;
the local stack and the tests call `render`. Both fill exactly `SUBSTITUTIONS`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ASL_PATH = Path(__file__).with_name("retry.asl.json")
SUBSTITUTIONS = ("Partition", "DeliveryQueueUrl")
_PLACEHOLDER = re.compile(r"\$\{(\w+)\}")


def placeholders(text: str | None = None) -> set[str]:
    return set(_PLACEHOLDER.findall(text if text is not None else ASL_PATH.read_text()))


def render(values: dict[str, str]) -> str:
    text = ASL_PATH.read_text()
    missing = placeholders(text) - values.keys()
    if missing:
        raise KeyError(f"no value for ASL substitutions {sorted(missing)}")
    rendered = _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)
    json.loads(rendered)  # fail here, not in the service, if a substitution broke the JSON
    return rendered


def definition(values: dict[str, str]) -> dict[str, Any]:
    return json.loads(render(values))
