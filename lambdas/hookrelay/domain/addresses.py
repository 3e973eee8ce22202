"""Which destinations webhooks may go to: one rule, checked when an endpoint is registered and on every attempt.

Registration gives the early, friendly answer on the URL as written; the sender applies the same rule to
every address the host resolves to, and connects only to the address it checked.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from hookrelay.domain.errors import InvalidRequest


def is_public_address(address: str) -> bool:
    """A globally routable unicast address: not private, loopback, link-local (cloud metadata), reserved or
    multicast. An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`) is judged as the IPv4 address it carries."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


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
    try:
        public = is_public_address(parts.hostname)
    except ValueError:  # a name, not an address literal
        if _is_local_name(parts.hostname):
            raise InvalidRequest("url must point to a public host") from None
        return url
    if not public:
        raise InvalidRequest("url must point to a public address")
    return url
