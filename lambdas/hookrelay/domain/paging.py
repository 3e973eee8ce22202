"""Reading page by page: where a read resumes is opaque to everything but the adapter that read it."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NewType

from hookrelay.domain.errors import InvalidCursor

# A token the storage adapter makes from (and turns back into) its own resume key. Services store it (a
# redrive's progress), wrap it (an API cursor) and hand it back, but never look inside.
Position = NewType("Position", str)


@dataclass(frozen=True)
class BoundedCount:
    """A count that reads no further than a limit, so that it costs the same however many there are: an open
    circuit's parked deliveries (domain/circuit.py PARKED_COUNT_LIMIT), a redrive's window (domain/redrive.py
    REDRIVE_COUNT_LIMIT)."""

    counted: int
    exact: bool  # False: there are at least `counted`

    @classmethod
    def of(cls, read: int, limit: int) -> BoundedCount:
        """From a count that read up to `limit` + 1 (the one more tells "exactly" from "more")."""
        return cls(min(read, limit), read <= limit)


# API cursors over a position: opaque to clients and bound to the query (the tenant included) that produced them,
# the delivery log's (services/delivery_log.py) and GET /v1/endpoints' alike.

FOREIGN_CURSOR = "the cursor belongs to a different query: repeat the same filters, or start over"


def _scope_fingerprint(scope: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(dict(scope), sort_keys=True).encode()).hexdigest()[:32]


def encode_cursor(scope: Mapping[str, Any], position: Position) -> str:
    document = json.dumps({"q": _scope_fingerprint(scope), "p": position}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(document.encode()).decode().rstrip("=")


def decode_cursor(scope: Mapping[str, Any], cursor: str) -> Position:
    """The position in `cursor`, or InvalidCursor (400) for a cursor another query or tenant was given, or a
    forgery. Tenant safety does not rest on this: the adapter checks the position is the tenant's again."""
    try:
        document = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError):
        raise InvalidCursor("the cursor is not one this API issued") from None
    if not isinstance(document, dict) or not isinstance(document.get("p"), str):
        raise InvalidCursor("the cursor is not one this API issued")
    if document.get("q") != _scope_fingerprint(scope):
        raise InvalidCursor(FOREIGN_CURSOR)
    return Position(document["p"])
