"""Numbers and names with one definition stay that way: a second copy written by hand fails here.

Each rule is a pattern that matches a hand-written copy (a literal where the constant should be imported)
and the one file allowed to hold the definition. Comments and prose may still mention the values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("app.py", "bench", "lambdas", "local", "scripts", "stacks", "statemachine", "tests")


@dataclass(frozen=True)
class OneDefinition:
    what: str
    pattern: str
    home: tuple[str, ...]  # the files allowed to match: where the definition lives


RULES = (
    OneDefinition(
        "the attempt timeout (8 s)",
        r"ATTEMPT_TIMEOUT_SECONDS\s*=\s*\d|timeout_seconds\s*:\s*float\s*=\s*\d|ATTEMPT_TIMEOUT_SECONDS,\s*[\"']\d",
        ("lambdas/hookrelay/domain/classification.py",),
    ),
    OneDefinition(
        "the metrics namespace",
        r"[\"']Hookrelay[\"']|namespace\s*=\s*[\"']",
        ("lambdas/hookrelay/adapters/telemetry.py", "stacks/config.py"),  # stacks/config.py: the stack's name
    ),
    OneDefinition(
        "SQS's 10 messages per call",
        r"min\(\s*10\s*,|MaxNumberOfMessages\s*=\s*10\b|batch_size\s*(:\s*int\s*)?=\s*10\b|\+\s*10\s*\]|"
        r"range\(.*,\s*10\s*\)|SQS_\w*\s*=\s*10\b",
        ("lambdas/hookrelay/adapters/schema.py",),
    ),
    OneDefinition(
        "truncation to milliseconds",
        r"microsecond\s*//\s*1000|//\s*1000\s*\)?\s*\*\s*1000",
        ("lambdas/hookrelay/domain/clock.py",),
    ),
    OneDefinition(
        "the endpoint-health warnings (1 and 3 days)",
        r"(?<![\w.])1 and 3\b|\(3 days\)",
        ("lambdas/hookrelay/services/auto_disable.py",),
    ),
    OneDefinition(
        "the attempts metric's name",
        r"Attempts_",
        ("lambdas/hookrelay/adapters/telemetry.py",),
    ),
    OneDefinition(
        "a queue's URL variable",
        r"[\"'][A-Z_]+_QUEUE_URL[\"']",
        ("lambdas/hookrelay/adapters/schema.py",),
    ),
    OneDefinition(
        "a handler's module path",
        r"[\"']hookrelay\.handlers\.\w+\.handler[\"']",
        ("lambdas/hookrelay/functions.py",),
    ),
)


def _sources() -> list[Path]:
    files: list[Path] = []
    for name in SCANNED:
        path = ROOT / name
        files.extend([path] if path.is_file() else sorted(path.rglob("*.py")))
    return [f for f in files if f != Path(__file__).resolve()]


def _code(line: str) -> str:
    """The line without its comment (a `#` inside a string is rare enough here not to matter)."""
    return line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""


@pytest.mark.parametrize("rule", RULES, ids=[rule.what for rule in RULES])
def test_each_is_defined_once(rule: OneDefinition) -> None:
    pattern = re.compile(rule.pattern)
    copies = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _sources()
        if str(path.relative_to(ROOT)) not in rule.home
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if pattern.search(_code(line))
    ]
    assert not copies, f"{rule.what} is defined in {', '.join(rule.home)}; import it instead of:\n" + "\n".join(copies)


@pytest.mark.parametrize("rule", RULES, ids=[rule.what for rule in RULES])
def test_each_definition_is_where_the_rule_says(rule: OneDefinition) -> None:
    pattern = re.compile(rule.pattern)
    assert any(pattern.search((ROOT / home).read_text()) for home in rule.home), rule.what
