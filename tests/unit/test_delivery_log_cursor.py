"""Cursors of the delivery log stay valid across a filter added later (`recovered`), while it is unset."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import replace

import pytest

from hookrelay.domain.errors import InvalidCursor
from hookrelay.domain.paging import Position
from hookrelay.services.delivery_log import decode_cursor, encode_cursor
from hookrelay.services.ports import DeliveryFilter


def cursor_from_before_recovered(where: DeliveryFilter, position: str) -> str:
    """A cursor as the API issued it before the `recovered` filter existed: its digest over the other fields."""
    fields = {
        "tenant_id": where.tenant_id,
        "status": where.status,
        "endpoint_id": where.endpoint_id,
        "event_id": where.event_id,
        "since": None,
        "until": None,
        "ended_before": None,
    }
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:32]
    document = json.dumps({"q": digest, "p": position}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(document.encode()).decode().rstrip("=")


def test_a_cursor_from_before_the_recovered_filter_still_resumes_its_query() -> None:
    where = DeliveryFilter(tenant_id="ten_1", endpoint_id="ep_1")
    assert decode_cursor(where, cursor_from_before_recovered(where, "abc")) == Position("abc")


def test_the_recovered_filter_is_part_of_the_query_a_cursor_resumes() -> None:
    unrecovered = DeliveryFilter(tenant_id="ten_1", recovered=False)
    cursor = encode_cursor(unrecovered, Position("abc"))
    assert decode_cursor(unrecovered, cursor) == Position("abc")
    for other in (replace(unrecovered, recovered=None), replace(unrecovered, recovered=True)):
        with pytest.raises(InvalidCursor):
            decode_cursor(other, cursor)
