"""Which destinations webhooks may go to: one rule, checked when an endpoint is registered and on every attempt.

Registration gives the early, friendly answer on the URL as written; the sender applies the same rule to
every address the host resolves to, and connects only to the address it checked. The rule covers the port
too: with the attempt's response excerpt, a relay that POSTs to any port of a public host is a port scanner.
"""

from __future__ import annotations

import ipaddress
import socket
from enum import StrEnum
from urllib.parse import SplitResult, urlsplit

from hookrelay.domain.errors import InvalidRequest

NOT_PUBLIC = "not a public address"  # all a tenant is told: never which address a name resolved to

# The ports a URL that names none means: always allowed, whatever the port policy.
SCHEME_PORTS = {"https": 443, "http": 80}
# HTTPS's own ports, always allowed; and the unprivileged ports a consumer's own server may listen on. The
# privileged ones below 1024 are where SSH, mail, DNS and databases listen, never a webhook receiver.
HTTPS_PORTS = frozenset({443, 8443})
UNPRIVILEGED_PORTS = range(1024, 65536)
ANY_PORT = range(1, 65536)  # port 0 is no port a server listens on: never


class EndpointPorts(StrEnum):
    """The deployment's port policy for endpoint URLs (CDK context `endpoint_ports`)."""

    WIDE = "wide"  # 443, 8443 and 1024-65535: the default
    NARROW = "narrow"  # 443 and 8443 only

    def allows(self, port: int) -> bool:
        return port in HTTPS_PORTS or (self is EndpointPorts.WIDE and port in UNPRIVILEGED_PORTS)

    @property
    def described(self) -> str:
        return "443, 8443 or 1024-65535" if self is EndpointPorts.WIDE else "443 or 8443"


DEFAULT_ENDPOINT_PORTS = EndpointPorts.WIDE


def endpoint_ports_from_config(raw: object) -> EndpointPorts:
    """The port policy (CDK context, function environment): "wide" or "narrow"; unset means the default."""
    if raw is None or raw == "":
        return DEFAULT_ENDPOINT_PORTS
    if isinstance(raw, str) and raw.lower() in {policy.value for policy in EndpointPorts}:
        return EndpointPorts(raw.lower())
    raise ValueError(f"{raw!r} is neither {EndpointPorts.WIDE.value!r} nor {EndpointPorts.NARROW.value!r}")


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


def is_loopback_address(address: str) -> bool:
    """127.0.0.0/8 or ::1, an IPv4-mapped loopback address included."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def checked_host(hostname: str) -> str:
    """The host the checks judge: one trailing dot stripped. `127.0.0.1.` is an absolute name that the resolver
    reads as 127.0.0.1, so it must be judged as that address, not waved through as a name. Two trailing dots, or
    nothing but dots, make no host at all."""
    host = hostname.removesuffix(".")
    if not host or host.endswith("."):
        raise InvalidRequest(f"url must name a host, with at most one trailing dot: {hostname!r} is none")
    return host


def check_port(scheme: str, port: int | None, ports: EndpointPorts, *, any_port: bool = False) -> None:
    """The port the URL names, held to the policy; `any_port` (local mode's loopback) lifts the policy, not 0."""
    if port is None or port == SCHEME_PORTS.get(scheme):
        return
    if port not in ANY_PORT:
        raise InvalidRequest(f"url must not use port {port}: give a port from 1 to 65535, or none")
    if not any_port and not ports.allows(port):
        raise InvalidRequest(f"url must not use port {port}: endpoints may listen on {ports.described}")


def _port_of(parts: SplitResult) -> int | None:
    try:
        return parts.port
    except ValueError:  # not a number, or above 65535
        raise InvalidRequest("url port must be a number from 1 to 65535") from None


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


def _is_local_name(host: str) -> bool:
    name = host.lower()
    return name == "localhost" or name.endswith(".localhost")


def _is_loopback_host(host: str) -> bool:
    """A loopback literal, or a name that means this machine: local mode's demo consumer and its like."""
    address = _literal_address(host)
    return _is_local_name(host) if address is None else is_loopback_address(address)


def _check_public(scheme: str, host: str, written: str) -> None:
    if scheme != "https":
        raise InvalidRequest("url must use https")
    address = _literal_address(host)
    if address is None:  # a name: what it resolves to is judged by the same rule at every attempt
        if _is_local_name(host):
            raise InvalidRequest("url must point to a public host")
    elif not is_public_address(address):
        raise InvalidRequest(f"url must point to a public address: {written} is {NOT_PUBLIC}")


def validate_endpoint_url(url: str, *, allow_private: bool, ports: EndpointPorts = DEFAULT_ENDPOINT_PORTS) -> str:
    """HTTPS to a public host on a port the policy allows; plain HTTP and loopback only where private destinations
    are allowed (local mode), where loopback may use any port (the demo consumer's is ephemeral).

    A host name is accepted as written: what it resolves to is checked at every attempt, since it may change.
    """
    try:
        parts = urlsplit(url)
    except ValueError:  # an unclosed IPv6 bracket, for one: a 422, never a 500
        raise InvalidRequest("url must be an absolute https:// URL") from None
    if parts.scheme not in SCHEME_PORTS or not parts.hostname:
        raise InvalidRequest("url must be an absolute https:// URL")
    if parts.username or parts.password:
        raise InvalidRequest("url must not carry credentials")
    host = checked_host(parts.hostname)
    port = _port_of(parts)
    if not allow_private:
        _check_public(parts.scheme, host, parts.hostname)
    check_port(parts.scheme, port, ports, any_port=allow_private and _is_loopback_host(host))
    return url
