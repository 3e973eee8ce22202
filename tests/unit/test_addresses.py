"""One rule for a public destination: registration refuses what the sender would refuse on every attempt."""

from __future__ import annotations

import pytest

from hookrelay.domain.addresses import is_public_address, validate_endpoint_url
from hookrelay.domain.errors import InvalidRequest


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/hook",  # plain http
        "https://127.0.0.1/hook",
        "https://10.0.0.8/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[::1]/hook",
        "https://239.1.2.3/hook",  # multicast: global, but never a webhook receiver
        "https://[ff0e::1]/hook",  # IPv6 multicast
        "https://[::ffff:10.0.0.8]/hook",  # a private IPv4 address, IPv4-mapped
        "https://localhost/hook",
        "https://user:pass@example.com/hook",
        "ftp://example.com/hook",
        "not a url",
    ],
)
def test_endpoint_urls_must_be_public_https(url: str) -> None:
    with pytest.raises(InvalidRequest):
        validate_endpoint_url(url, allow_private=False)


def test_public_https_urls_are_accepted_and_local_mode_allows_loopback() -> None:
    assert validate_endpoint_url("https://hooks.example.com/in", allow_private=False)
    assert validate_endpoint_url("http://127.0.0.1:8080/hook", allow_private=True)


def test_a_multicast_endpoint_is_refused_at_registration_not_on_every_attempt() -> None:
    """Registration once accepted it (`is_global` is true of 239.1.2.3) while the sender refused it every time."""
    with pytest.raises(InvalidRequest, match="public address"):
        validate_endpoint_url("https://239.1.2.3/hook", allow_private=False)


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.215.14", True),
        ("2606:2800:21f:cb07:6820:80da:af6b:8b2c", True),
        ("239.1.2.3", False),
        ("ff0e::1", False),
        ("10.0.0.8", False),
        ("::ffff:10.0.0.8", False),
        ("::ffff:93.184.215.14", True),
        ("169.254.169.254", False),
        ("100.64.0.1", False),  # carrier-grade NAT
    ],
)
def test_what_counts_as_public(address: str, public: bool) -> None:
    assert is_public_address(address) is public
