"""Generate the README's contract tables from the code that enforces them.

    python scripts/contract_tables.py           # print the generated section
    python scripts/contract_tables.py --check   # exit 1 if the README differs from it
    python scripts/contract_tables.py --write   # rewrite the README's generated section

Only the lines between the `contract:begin` and `contract:end` markers are touched.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `statemachine`, a top-level directory of the repository

import statemachine  # noqa: E402
from hookrelay.domain.classification import HARD_FAILURE_ATTEMPT_CAP, RESPONSE_RULES, outcome_description  # noqa: E402
from hookrelay.domain.clock import RETENTION_DAYS  # noqa: E402
from hookrelay.domain.schedule import (  # noqa: E402
    DEFAULT_SCHEDULE,
    MAX_ATTEMPTS,
    MAX_HORIZON_SECONDS,
    SHORT_SCHEDULE,
    RetrySchedule,
)
from hookrelay.domain.status import DeliveryStatus  # noqa: E402
from hookrelay.handlers.idempotency import IDEMPOTENCY_WINDOW_SECONDS  # noqa: E402

README = ROOT / "README.md"
REGION = re.compile(r"(<!-- contract:begin[^\n]*-->\n)(.*?)(<!-- contract:end -->)", re.DOTALL)
_UNITS = (("h", 3600), ("min", 60), ("s", 1))


def duration(seconds: float) -> str:
    """30 → "30 s", 2130 → "35 min 30 s", 259200 → "72 h"."""
    remaining = int(seconds)
    if remaining == 0:
        return "0 s"
    parts = []
    for name, size in _UNITS:
        count, remaining = divmod(remaining, size)
        if count:
            parts.append(f"{count} {name}")
    return " ".join(parts)


def days(seconds: int) -> str:
    return f"{seconds / 86400:g} days"


def schedule_table(schedule: RetrySchedule) -> list[str]:
    rows = ["| attempt | gap after the previous attempt | time since the first attempt |", "|---:|---:|---:|"]
    for planned in schedule.planned():
        gap = "immediately" if planned.number == 1 else f"+{duration(planned.gap)}"
        rows.append(f"| {planned.number} | {gap} | {duration(planned.offset)} |")
    return rows


def schedule_section(title: str, schedule: RetrySchedule) -> list[str]:
    return [
        f"**{title}** (`{schedule.name}`): {schedule.max_attempts} attempts within "
        f"{duration(schedule.horizon)} of the first; a `Retry-After` is honoured up to "
        f"{duration(schedule.effective_retry_after_cap)}.",
        "",
        *schedule_table(schedule),
        "",
    ]


def response_section() -> list[str]:
    rows = ["| response | what happens |", "|---|---|"]
    for rule in RESPONSE_RULES:
        outcome = outcome_description(rule.outcome)
        if rule.honours_retry_after:
            outcome += "; a `Retry-After` (seconds or HTTP date) pushes the next attempt later, never earlier"
        rows.append(f"| {rule.label} | {outcome} |")
    return rows


def status_section() -> list[str]:
    rows = ["| status | meaning |", "|---|---|"]
    rows += [f"| `{status.value}` | {status.meaning} |" for status in DeliveryStatus]
    return rows


def retention_section() -> list[str]:
    return [
        "| what | kept for |",
        "|---|---|",
        f"| events and delivery records, with every attempt | {RETENTION_DAYS} days after the delivery ends "
        "(delivered, dead or cancelled): the redrive window |",
        "| dead-letter and poison queue messages | minutes: the reconciler surfaces each as a dead delivery "
        "(`dead_reason`), then deletes it; the delivery record is the one truth of `dead` |",
        f"| `Idempotency-Key`s of `POST /v1/events` and redrives | {duration(IDEMPOTENCY_WINDOW_SECONDS)} |",
    ]


def unanswered_section() -> list[str]:
    timeout = duration(statemachine.ATTEMPT_TASK_TIMEOUT_SECONDS)
    resends = statemachine.resend_count()
    return [
        f"Each retry is sent through the delivery queue and the workflow waits {timeout} for the delivery "
        f"function's answer. If none comes (a lost message, a crashed worker), it sends the same attempt again, "
        f"up to {resends} times; a message for an attempt already made is answered with the delivery's "
        "current state and never sent twice. If all of them go unanswered, a message with "
        '`"reason": "attempt_lost"` goes to the dead-letter queue and the execution fails with '
        "`hookrelay.AttemptLost`; within minutes the reconciler records the delivery `dead` with `dead_reason` "
        "`attempt_lost` (alarmed: a platform fault, redrivable). Should one of those messages turn up before that, "
        "its attempt is still made (once), and a fresh execution carries the delivery on along its schedule; after "
        "it, the dead delivery is not attempted again until it is redriven.",
    ]


def generate() -> str:
    lines = [
        "### Responses",
        "",
        "Delivered means a 2xx within the attempt timeout; redirects are never followed.",
        "",
        *response_section(),
        "",
        "### Retry schedule",
        "",
        f"Gaps are ±{DEFAULT_SCHEDULE.jitter:.0%} jittered but anchored to the first attempt, so they never "
        "accumulate and no attempt is made after the horizon. When a `Retry-After` has pushed an attempt later "
        "than planned, every later attempt still comes at least its own gap (less the jitter) after the one "
        "before it, and those that no longer fit within the horizon are not made. Once an attempt fails hard "
        f"(3xx, most 4xx), the delivery gets at most {HARD_FAILURE_ATTEMPT_CAP} attempts in all. The schedule "
        "is deployment configuration (CDK context `retry_schedule`): a profile name, or a list of gaps in "
        f"seconds starting with 0, with a horizon of at most {days(MAX_HORIZON_SECONDS)} and at most "
        f"{MAX_ATTEMPTS} attempts.",
        "",
        *schedule_section("Default", DEFAULT_SCHEDULE),
        *schedule_section("Short", SHORT_SCHEDULE),
        "### Statuses",
        "",
        *status_section(),
        "",
        "### Retention",
        "",
        *retention_section(),
        "",
        "### When an attempt goes unanswered",
        "",
        *unanswered_section(),
    ]
    return "\n".join(lines) + "\n"


def with_generated_region(readme: str) -> str:
    match = REGION.search(readme)
    if match is None:
        raise ValueError("README.md has no contract:begin / contract:end markers")
    return readme[: match.start(2)] + generate() + readme[match.end(2) :]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help="rewrite the README's generated section")
    action.add_argument("--check", action="store_true", help="exit 1 if the README is out of date")
    args = parser.parse_args()
    if not (args.write or args.check):
        print(generate(), end="")
        return 0
    readme = README.read_text()
    updated = with_generated_region(readme)
    if args.write:
        README.write_text(updated)
    elif updated != readme:
        print("README.md contract tables are out of date: run python scripts/contract_tables.py --write")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
