"""Pull delivery: a poll endpoint's deliveries wait in its mailbox, and its consumer reads them with a cursor.

For consumers with no public URL. An endpoint of kind `poll` is sent nothing: each of its deliveries, when its first
message reaches the delivery function (from ingest, a replay, a redrive, the test event or the reconciler, as for any
endpoint), is posted to the endpoint's mailbox under the next number of the endpoint's own sequence, and recorded
`queued` until the consumer has it. The consumer reads `GET /v1/endpoints/{id}/messages?after=<seq>`: the messages
posted after `seq`, oldest first, each signed as its webhook would be (the same headers, verified the same way). The
cursor is the acknowledgement: reading after `seq` says every message up to `seq` was had, and those deliveries are
recorded delivered (one attempt, answered 200) and leave the mailbox. So each message is read at least once: until
the consumer moves its cursor past it, every read from an earlier cursor returns it again.

Order is the order of posting: a replay or a redrive posts a new delivery, after whatever was posted before it (a
cursor only moves forward, so nothing is posted behind it). A message stays readable for its delivery's retention;
the redrive window applies as to any delivery: a replay or redrive of it posts it again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

DEFAULT_READ_LIMIT = 10
MAX_READ_LIMIT = 100
# Acknowledged per read at most: a cursor moved far ahead is acknowledged over the next reads, never in one long one.
ACKNOWLEDGED_PER_READ = 100
# What a poll delivery's one recorded attempt says, once the consumer's cursor passed it.
ACKNOWLEDGED = "acknowledged by the consumer's cursor"


@dataclass(frozen=True)
class MailboxEntry:
    endpoint_id: str
    seq: int
    delivery_id: str
    event_id: str
    posted_at: datetime
    replay_of: str | None = None  # a replay's original: marked recovered when the replay is acknowledged


def sequence_space(endpoint_id: str) -> str:
    """The endpoint's own sequence (a counter beside the ordering keys' ones)."""
    return f"mailbox#{endpoint_id}"


def seq_key(seq: int) -> str:
    """An entry's sort key: zero-padded, so that entries sort by number as strings."""
    return f"{seq:020d}"
