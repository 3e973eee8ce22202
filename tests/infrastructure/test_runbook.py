"""Every operator alarm has its section in docs/runbook.md (what it means, what to do), and says where it is."""

from __future__ import annotations

import re

from tests.support.synth import ROOT, Synthesized

RUNBOOK = ROOT / "docs" / "runbook.md"


def _alarm_names(synthesized: Synthesized) -> set[str]:
    names = set()
    for logical_id in synthesized.resources("AWS::CloudWatch::Alarm"):
        found = re.fullmatch(r"Observability(\w+?)[0-9A-F]{8}", logical_id)
        assert found, logical_id
        names.add(found.group(1))
    return names


def test_every_alarm_has_a_runbook_section_with_what_it_means_and_what_to_do(synthesized: Synthesized) -> None:
    sections = re.split(r"^### ", RUNBOOK.read_text(), flags=re.MULTILINE)[1:]
    by_name = {
        name.strip(): body for section in sections for body in [section] for name in section.split("\n")[0].split(",")
    }
    names = _alarm_names(synthesized)
    assert len(names) > 10
    for name in names:
        assert name in by_name, f"docs/runbook.md has no section for the alarm {name}"
        assert "**Means**" in by_name[name] and "**Do**" in by_name[name], name


def test_every_alarm_points_to_its_section(synthesized: Synthesized) -> None:
    for alarm in synthesized.properties("AWS::CloudWatch::Alarm"):
        assert "Runbook: docs/runbook.md" in alarm["AlarmDescription"], alarm["AlarmDescription"]
