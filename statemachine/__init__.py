"""The retry workflow's definition: one ASL file, rendered with the same substitutions everywhere.

The CDK stack loads the file with `DefinitionBody.from_file` and passes `definition_substitutions`;
the local stack and the tests call `render`. Both fill exactly `SUBSTITUTIONS`. Every placeholder sits
inside a JSON string, so the file stays valid JSON; the one number (the task timeout) is turned into a
number by the workflow itself (`States.StringToJson`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ASL_PATH = Path(__file__).with_name("retry.asl.json")
SUBSTITUTIONS = ("Partition", "DeadLetterQueueUrl", "AttemptTaskTimeoutSeconds")

# How long the workflow waits for the delivery Lambda to answer one sent attempt before re-sending it.
# It must cover the message's wait in its FIFO group plus one attempt (at most the function timeout);
# it is longer than SQS's 5-minute deduplication window too. A re-send is harmless (see the ASL).
ATTEMPT_TASK_TIMEOUT_SECONDS = 900

_PLACEHOLDER = re.compile(r"\$\{(\w+)\}")


def placeholders(text: str | None = None) -> set[str]:
    return set(_PLACEHOLDER.findall(text if text is not None else ASL_PATH.read_text()))


def render(values: dict[str, str]) -> str:
    text = ASL_PATH.read_text()
    missing = placeholders(text) - values.keys()
    if missing:
        raise KeyError(f"no value for ASL substitutions {sorted(missing)}")
    rendered = _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), text)
    json.loads(rendered)  # fail here, not in the service, if a substitution broke the JSON
    return rendered


def definition(values: dict[str, str]) -> dict[str, Any]:
    return json.loads(render(values))


def resend_count() -> int:
    """How many times an unanswered attempt is re-sent before it is reported lost (read from the ASL)."""
    retriers = json.loads(ASL_PATH.read_text())["States"]["ResendAttempt"]["Retry"]
    return 1 + next(retrier["MaxAttempts"] for retrier in retriers if retrier["ErrorEquals"] == ["States.ALL"])
