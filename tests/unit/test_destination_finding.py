"""Issue 27's finding, reproduced: with the guard on, a trailing-dot literal of an internal address and any port
passed registration, and an attempt went to whatever port a stored URL named.

Written against the interfaces that existed before the fix (no port policy named), so it runs, and fails, on the
old code. The rules themselves are tested in tests/unit/test_addresses.py and tests/unit/test_http_sender.py.
"""

from __future__ import annotations

import socket

import pytest

from hookrelay.adapters.http_sender import RequestsSender
from hookrelay.domain.addresses import validate_endpoint_url
from hookrelay.domain.classification import FailureKind
from hookrelay.domain.errors import InvalidRequest


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1.:9311/",  # loopback, written as an absolute name: was taken for a name
        "https://169.254.169.254.:9311/",  # the metadata service, likewise
        "https://8.8.8.8:22/",  # SSH of a public host: with the response excerpt, a port scanner
        "https://8.8.8.8:0/",
    ],
)
def test_registration_with_the_guard_on_refuses_the_findings_urls(url: str) -> None:
    with pytest.raises(InvalidRequest):
        validate_endpoint_url(url, allow_private=False)


def test_an_attempt_at_a_stored_url_on_port_22_is_blocked_before_any_lookup() -> None:
    lookups: list[str] = []

    def resolver(host: str, port: int) -> list[str]:  # the old code looked it up (and would then connect)
        lookups.append(f"{host}:{port}")
        raise socket.gaierror(socket.EAI_NONAME, "not looked up in this test")

    result = RequestsSender(timeout_seconds=1, resolver=resolver).send("https://hooks.example.test:22/", {}, b"{}")
    assert result.error is FailureKind.BLOCKED
    assert lookups == []
