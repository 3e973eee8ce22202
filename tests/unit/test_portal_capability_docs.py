"""docs/api.md's table of what a portal link may call is the code's (domain/portal.py's ROUTE_CAPABILITIES)."""

from __future__ import annotations

from pathlib import Path

from hookrelay.domain import portal

ROOT = Path(__file__).resolve().parents[2]


def test_the_api_doc_s_capability_table_is_the_code_s() -> None:
    readme = (ROOT / "docs" / "api.md").read_text()
    start, end = "<!-- portal-capabilities:start -->\n", "\n<!-- portal-capabilities:end -->"
    shown = readme[readme.index(start) + len(start) : readme.index(end)]
    assert shown == portal.capability_table()  # regenerate: print(portal.capability_table())
