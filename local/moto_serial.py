"""DynamoDB on moto in one process answers one request at a time, as the local stack's DynamoDB server does.

moto's item updates are not safe against two threads at once: an UpdateItem that serialises an item while another
thread's update adds an attribute to it raises "dictionary changed size during iteration". DynamoDB itself has no
such limit, and the delivery function now attempts a batch's message groups on threads of its own (two groups of one
endpoint count its circuit's failures on one item), so the moto-backed tests, which run every handler in their
process, serialise DynamoDB's requests here. The local stack needs none of this: its DynamoDB is a server process
answering one request at a time (local/aws_endpoint.py). Nothing deployed imports this.
"""

from __future__ import annotations

import threading
from typing import Any

from moto.dynamodb.responses import DynamoHandler

from local.moto_patches import Patches

_LOCK = threading.RLock()
_call_action = DynamoHandler.call_action


def _one_at_a_time(self: DynamoHandler) -> Any:
    with _LOCK:
        return _call_action(self)


PATCHES = Patches((DynamoHandler, "call_action", _one_at_a_time))


def install() -> None:
    PATCHES.install()


def uninstall() -> None:
    PATCHES.uninstall()
