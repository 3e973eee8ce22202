"""The README's contract section is generated from the code that enforces it, and cannot drift from it."""

from __future__ import annotations

from hookrelay.domain.classification import RESPONSE_RULES
from hookrelay.domain.schedule import DEFAULT_SCHEDULE, SHORT_SCHEDULE, RetrySchedule
from hookrelay.domain.status import DeliveryStatus
from scripts import contract_tables
from scripts.contract_tables import README, duration, generate, schedule_table, with_generated_region


def test_the_readme_contract_section_is_exactly_the_generated_one() -> None:
    readme = README.read_text()
    assert with_generated_region(readme) == readme, "run: python scripts/contract_tables.py --write"


def test_only_the_marked_region_is_regenerated() -> None:
    readme = "# Title\n\nprose\n<!-- contract:begin (generated) -->\nstale\n<!-- contract:end -->\nafter\n"
    updated = with_generated_region(readme)
    assert updated.startswith("# Title\n\nprose\n<!-- contract:begin (generated) -->\n")
    assert updated.endswith("<!-- contract:end -->\nafter\n")
    assert "stale" not in updated and generate() in updated


def test_schedule_tables_have_one_row_per_planned_attempt() -> None:
    for schedule in (DEFAULT_SCHEDULE, SHORT_SCHEDULE):
        rows = schedule_table(schedule)[2:]
        assert len(rows) == schedule.max_attempts
        last = list(schedule.planned())[-1]
        assert rows[-1] == f"| {last.number} | +{duration(last.gap)} | {duration(last.offset)} |"


def test_a_changed_schedule_changes_the_table() -> None:
    custom = RetrySchedule(name="custom", gaps=(0, 45, 90), horizon=135)
    assert schedule_table(custom)[2:] == [
        "| 1 | immediately | 0 s |",
        "| 2 | +45 s | 45 s |",
        "| 3 | +1 min 30 s | 2 min 15 s |",
    ]


def test_every_response_rule_and_status_is_published() -> None:
    text = generate()
    assert all(f"| {rule.label} |" in text for rule in RESPONSE_RULES)
    assert all(f"| `{status.value}` | {status.meaning} |" in text for status in DeliveryStatus)


def test_durations() -> None:
    assert [duration(s) for s in (0, 30, 330, 7200, 9330, 72 * 3600)] == [
        "0 s",
        "30 s",
        "5 min 30 s",
        "2 h",
        "2 h 35 min 30 s",
        "72 h",
    ]


def test_check_mode_fails_on_a_drifted_readme(tmp_path, monkeypatch) -> None:
    drifted = tmp_path / "README.md"
    drifted.write_text("<!-- contract:begin x -->\nold table\n<!-- contract:end -->\n")
    monkeypatch.setattr(contract_tables, "README", drifted)
    monkeypatch.setattr("sys.argv", ["contract_tables.py", "--check"])
    assert contract_tables.main() == 1
    monkeypatch.setattr("sys.argv", ["contract_tables.py", "--write"])
    assert contract_tables.main() == 0
    monkeypatch.setattr("sys.argv", ["contract_tables.py", "--check"])
    assert contract_tables.main() == 0
