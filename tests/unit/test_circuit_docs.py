"""The circuit's numbers in the README and docs/endpoint-health.md are the code's."""

from __future__ import annotations

from pathlib import Path

from hookrelay.adapters import schema
from hookrelay.domain import circuit

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_states_the_opening_rule_and_the_drain_window_of_the_code() -> None:
    readme = (ROOT / "README.md").read_text()
    assert f"**{circuit.OPEN_AFTER_FAILURES}** retriable failures in a row" in readme
    assert f"at most {circuit.DRAIN_WINDOW_PER_SLOT} per slot in flight" in readme


def test_the_endpoint_health_doc_states_the_numbers_of_the_code() -> None:
    doc = (ROOT / "docs" / "endpoint-health.md").read_text()
    assert f"{circuit.OPEN_AFTER_FAILURES} retriable failures in a row (`OPEN_AFTER_FAILURES`)" in doc
    assert f"`min({circuit.DRAIN_WINDOW_PER_SLOT} \u00d7 max_in_flight, {circuit.DRAIN_WINDOW_MAX})`" in doc


def test_the_endpoint_health_doc_states_the_lots_shards_of_the_code() -> None:
    doc = (ROOT / "docs" / "endpoint-health.md").read_text()
    assert f"`LOT_SHARDS` ({schema.LOT_SHARDS}) partitions" in doc
