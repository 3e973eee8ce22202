"""One rule for a public destination: registration refuses what the sender would refuse on every attempt."""

from __future__ import annotations

import pytest

from hookrelay.domain.addresses import (
    EndpointPorts,
    endpoint_ports_from_config,
    is_loopback_address,
    is_public_address,
    validate_endpoint_url,
)
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


# --- Issue 27 (the finding itself: tests/unit/test_destination_finding.py) ---


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://127.0.0.1.:9311/", "127.0.0.1. is not a public address"),
        ("https://169.254.169.254./latest", "169.254.169.254. is not a public address"),
        ("https://2130706433./hook", "not a public address"),  # the legacy forms too
        ("https://localhost./hook", "public host"),
        ("https://./hook", "must name a host"),
        ("https://../hook", "must name a host"),
        ("https://hooks.example.com../in", "must name a host"),
    ],
)
def test_one_trailing_dot_is_stripped_before_the_checks_and_two_are_no_host(url: str, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        validate_endpoint_url(url, allow_private=False)


def test_a_name_with_one_trailing_dot_is_a_name_as_any_other() -> None:
    assert validate_endpoint_url("https://hooks.example.com./in", allow_private=False)
    with pytest.raises(InvalidRequest, match="must name a host"):  # two dots are no host in local mode either
        validate_endpoint_url("http://127.0.0.1..:9000/", allow_private=True)


@pytest.mark.parametrize(
    ("port", "wide", "narrow"),
    [
        (None, True, True),  # no port: the scheme's own
        (443, True, True),
        (8443, True, True),
        (1024, True, False),
        (9311, True, False),
        (65535, True, False),
        (1023, False, False),
        (22, False, False),
        (80, False, False),  # http's port, on https
        (0, False, False),
    ],
)
def test_the_port_policy(port: int | None, wide: bool, narrow: bool) -> None:
    url = "https://hooks.example.com" + ("" if port is None else f":{port}") + "/in"
    for ports, allowed in ((EndpointPorts.WIDE, wide), (EndpointPorts.NARROW, narrow)):
        if allowed:
            assert validate_endpoint_url(url, allow_private=False, ports=ports) == url
        else:
            with pytest.raises(InvalidRequest, match=f"must not use port {port}"):
                validate_endpoint_url(url, allow_private=False, ports=ports)


def test_a_refused_port_names_the_ports_the_policy_allows() -> None:
    with pytest.raises(InvalidRequest, match=r"port 22: endpoints may listen on 443, 8443 or 1024-65535"):
        validate_endpoint_url("https://8.8.8.8:22/", allow_private=False)
    with pytest.raises(InvalidRequest, match=r"port 9311: endpoints may listen on 443 or 8443$"):
        validate_endpoint_url("https://8.8.8.8:9311/", allow_private=False, ports=EndpointPorts.NARROW)
    with pytest.raises(InvalidRequest, match="from 1 to 65535"):
        validate_endpoint_url("https://8.8.8.8:0/", allow_private=False)


@pytest.mark.parametrize("url", ["https://hooks.example.com:99999/", "https://hooks.example.com:ssh/"])
def test_a_port_that_is_no_port_is_refused(url: str) -> None:
    with pytest.raises(InvalidRequest, match="port must be a number from 1 to 65535"):
        validate_endpoint_url(url, allow_private=False)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:22/",
        "http://127.0.0.1:1/hook",
        "http://127.0.0.1.:80/",
        "http://[::1]:9/",
        "http://localhost:25/",
    ],
)
def test_local_mode_lets_loopback_use_any_port(url: str) -> None:
    """The demo consumer listens on an ephemeral port, and a test's on whatever the system gives it."""
    assert validate_endpoint_url(url, allow_private=True, ports=EndpointPorts.NARROW) == url


def test_local_mode_holds_every_other_host_to_the_policy_and_port_0_is_never_allowed() -> None:
    assert validate_endpoint_url("http://consumer.example.test:8080/", allow_private=True)
    assert validate_endpoint_url("http://consumer.example.test/", allow_private=True)  # http's own port
    with pytest.raises(InvalidRequest, match="must not use port 22"):
        validate_endpoint_url("http://consumer.example.test:22/", allow_private=True)
    with pytest.raises(InvalidRequest, match="must not use port 0"):
        validate_endpoint_url("http://127.0.0.1:0/", allow_private=True)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, EndpointPorts.WIDE),
        ("", EndpointPorts.WIDE),
        ("wide", EndpointPorts.WIDE),
        ("NARROW", EndpointPorts.NARROW),
    ],
)
def test_the_setting_reads_wide_or_narrow_and_defaults_to_wide(raw: object, expected: EndpointPorts) -> None:
    assert endpoint_ports_from_config(raw) is expected


@pytest.mark.parametrize("raw", ["medium", "443", True, 443, ["narrow"]])
def test_any_other_setting_is_refused(raw: object) -> None:
    with pytest.raises(ValueError, match="neither 'wide' nor 'narrow'"):
        endpoint_ports_from_config(raw)


@pytest.mark.parametrize(
    ("address", "loopback"),
    [("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("::ffff:127.0.0.1", True), ("10.0.0.1", False)],
)
def test_what_counts_as_loopback(address: str, loopback: bool) -> None:
    assert is_loopback_address(address) is loopback
