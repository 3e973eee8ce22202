"""Which destinations webhooks may go to: one rule, checked when an endpoint is registered and on every attempt.

Registration gives the early, friendly answer on the URL as written; the sender applies the same rule to
every address the host resolves to, and connects only to the address it checked.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from hookrelay.domain.errors import InvalidRequest

NOT_PUBLIC = "not a public address"  # all a tenant is told: never which address a name resolved to

# Refused outright, whatever they carry: ranges that translate or tunnel to other addresses (an IPv4 address
# inside may be internal, and where the packet ends up is the relay's choice), and deprecated ones. Python's
# `is_global` calls several of them global, and its answers differ between versions: this list does not.
_REFUSED = tuple(
    ipaddress.ip_network(network)
    for network in (
        "64:ff9b::/96",  # NAT64, well-known prefix (RFC 6052)
        "64:ff9b:1::/48",  # NAT64, local-use prefix (RFC 8215)
        "2002::/16",  # 6to4 (RFC 3056)
        "2001::/32",  # Teredo (RFC 4380)
        "::/96",  # IPv4-compatible, deprecated (RFC 4291)
        "::ffff:0:0:0/96",  # SIIT, IPv4-translated (RFC 2765)
        "fec0::/10",  # site-local, deprecated (RFC 3879)
        "192.88.99.0/24",  # 6to4 relay anycast (RFC 7526)
    )
)


def _is_isatap(ip: ipaddress.IPv6Address) -> bool:
    """An ISATAP interface identifier (`…:0:5efe:a.b.c.d`, u/g bits aside, RFC 5214) under any prefix."""
    return (int(ip) >> 32) & 0xFCFFFFFF == 0x00005EFE


def is_public_address(address: str) -> bool:
    """A globally routable unicast address: not private, loopback, link-local (cloud metadata), reserved,
    multicast, nor any of the translating, tunnelling or deprecated ranges above. An IPv4-mapped IPv6 address
    (`::ffff:10.0.0.1`) is judged as the IPv4 address it carries."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif _is_isatap(ip):
            return False
    if any(ip.version == network.version and ip in network for network in _REFUSED):
        return False
    return ip.is_global and not ip.is_multicast


def _literal_address(host: str) -> str | None:
    """The address a host written as an address stands for: IPv4 and IPv6 literals, and the legacy IPv4 forms
    the resolver also reads as addresses (`127.1`, `0x7f000001`, `2130706433`), which are no names."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        return socket.inet_ntoa(socket.inet_aton(host))
    except OSError:
        return None


def _is_local_name(hostname: str) -> bool:
    name = hostname.lower().rstrip(".")
    return name == "localhost" or name.endswith(".localhost")


def validate_endpoint_url(url: str, *, allow_private: bool) -> str:
    """HTTPS to a public host; plain HTTP and loopback only where private destinations are allowed (local mode).

    A host name is accepted as written: what it resolves to is checked at every attempt, since it may change.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise InvalidRequest("url must be an absolute https:// URL")
    if parts.username or parts.password:
        raise InvalidRequest("url must not carry credentials")
    if allow_private:
        return url
    if parts.scheme != "https":
        raise InvalidRequest("url must use https")
    address = _literal_address(parts.hostname)
    if address is None:  # a name: what it resolves to is judged by the same rule at every attempt
        if _is_local_name(parts.hostname):
            raise InvalidRequest("url must point to a public host")
        return url
    if not is_public_address(address):
        raise InvalidRequest(f"url must point to a public address: {parts.hostname} is {NOT_PUBLIC}")
    return url
