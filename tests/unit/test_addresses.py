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
        "https://[64:ff9b::a00:1]/hook",  # NAT64 of a private address
        "https://[2002:a00:1::1]/hook",  # 6to4
        "https://[fec0::1]/hook",  # site-local
        "https://192.88.99.1/hook",  # 6to4 relay anycast
        "https://2130706433/hook",  # 127.0.0.1 as one number: the resolver reads it as an address
        "https://0x7f.1/hook",
        "https://127.1/hook",
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
        # Translating, tunnelling and deprecated ranges: refused whatever address they carry.
        ("64:ff9b::a00:1", False),  # NAT64 of 10.0.0.1
        ("64:ff9b::5db8:d70e", False),  # NAT64 of a public address: still the relay's choice where it goes
        ("64:ff9b:1::a00:1", False),  # local-use NAT64
        ("2002:a00:1::1", False),  # 6to4 of 10.0.0.1
        ("2002:5db8:d70e::1", False),
        ("::10.0.0.1", False),  # IPv4-compatible
        ("::93.184.215.14", False),
        ("::ffff:0:a00:1", False),  # SIIT, IPv4-translated
        ("::ffff:0:5db8:d70e", False),
        ("2606:2800:21f:cb07:0:5efe:a00:1", False),  # ISATAP under a global prefix
        ("2606:2800:21f:cb07:200:5efe:a00:1", False),  # ISATAP, universal/local bit set
        ("fec0::1", False),  # site-local
        ("192.88.99.1", False),  # 6to4 relay anycast
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False),  # Teredo
    ],
)
def test_what_counts_as_public(address: str, public: bool) -> None:
    assert is_public_address(address) is public


def test_registration_does_not_say_more_than_not_public() -> None:
    with pytest.raises(InvalidRequest) as refused:
        validate_endpoint_url("https://2130706433/hook", allow_private=False)
    assert "not a public address" in refused.value.detail and "127.0.0.1" not in refused.value.detail
