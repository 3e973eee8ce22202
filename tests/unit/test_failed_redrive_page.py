"""What becomes of a redrive whose page's job failed repeatedly: never `running` with nothing carrying it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hookrelay.domain.clock import utcnow
from hookrelay.domain.redrive import FailedPage, Redrive, RedriveState, on_failed_page
from hookrelay.domain.status import DeliveryStatus

NOW = utcnow()


def redrive(page: int, state: RedriveState = RedriveState.RUNNING) -> Redrive:
    return Redrive(
        id="rdr_1",
        tenant_id="tn_1",
        endpoint_id="ep_1",
        since=NOW - timedelta(hours=1),
        until=NOW,
        status_filter=DeliveryStatus.DEAD,
        state=state,
        page=page,
        created_at=NOW,
        expires_at=0,
    )


@pytest.mark.parametrize(
    ("current", "failed", "action"),
    [
        (3, 3, FailedPage.FAIL),  # the page itself keeps failing
        (3, 2, FailedPage.RESUME),  # recorded, then the hand-over to page 3 failed
        (3, 1, FailedPage.NOTHING),  # an old copy: page 3's job carries the redrive
        (0, 0, FailedPage.FAIL),
    ],
)
def test_a_failed_page_of_a_running_redrive(current: int, failed: int, action: FailedPage) -> None:
    assert on_failed_page(redrive(current), failed) is action


def test_an_ended_or_missing_redrive_is_left_as_it_is() -> None:
    assert on_failed_page(redrive(2, RedriveState.COMPLETED), 2) is FailedPage.NOTHING
    assert on_failed_page(redrive(2, RedriveState.FAILED), 2) is FailedPage.NOTHING
    assert on_failed_page(None, 0) is FailedPage.NOTHING
