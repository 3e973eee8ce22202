"""`redrive`: how the CLI shows a redrive's progress, its count a floor or exact."""

from __future__ import annotations

from datetime import UTC, datetime

from hookrelay_client.cli import describe_redrive
from hookrelay_client.models import Redrive

AT = datetime(2030, 1, 1, tzinfo=UTC)


def a_redrive(**fields: object) -> Redrive:
    return Redrive.model_validate({"id": "rdr_1", "endpoint_id": "ep_1", "since": AT, "until": AT, **fields})


def replayed_line(redrive: Redrive) -> str:
    return next(line for line in describe_redrive(redrive).splitlines() if line.lstrip().startswith("replayed"))


def test_a_count_that_stopped_at_its_limit_is_shown_as_at_least() -> None:
    assert replayed_line(a_redrive(state="running", total=10_000, total_exact=False, replayed=100)).endswith(
        "100/10000+"
    )


def test_an_exact_count_and_one_not_yet_made() -> None:
    assert replayed_line(a_redrive(state="completed", total=12_345, total_exact=True, replayed=12_345)).endswith(
        "12345/12345"
    )
    assert replayed_line(a_redrive(state="running", replayed=0)).endswith("0/?")


def test_a_record_from_before_the_limit_reads_as_exact() -> None:
    assert a_redrive(state="completed", total=3, replayed=3).total_exact is True
