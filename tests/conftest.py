from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from scripts.create_admin_key import create_admin_key
from tests.support.aws import moto_stack
from tests.support.consumer import ScriptedConsumer
from tests.support.platform import Platform

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")


@pytest.fixture
def platform() -> Iterator[Platform]:
    with moto_stack() as env:
        admin = create_admin_key(env["API_KEYS_TABLE"])
        yield Platform(env=env, admin_token=admin.token)


@pytest.fixture
def consumer() -> Iterator[ScriptedConsumer]:
    server = ScriptedConsumer()
    yield server
    server.close()
