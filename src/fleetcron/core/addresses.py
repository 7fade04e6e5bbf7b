"""Which network addresses are not public: loopback, link-local (cloud metadata endpoints
among them), private, reserved, multicast, and any of these carried inside an IPv6 address.

The one classification for every setting that keeps the scheduler from reaching its own
host's services or its network's: ``webhook_refuse_private`` (``notify/webhook.py``) and
``ssh_refuse_private_hosts`` (``services/targets/pairing.py``). Pure: callers resolve names.
"""

from __future__ import annotations

import ipaddress
from typing import TypeAlias

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
#: NAT64's well-known prefix (RFC 6052): the IPv4 address is the last 32 bits
NAT64_WELL_KNOWN = ipaddress.IPv6Network("64:ff9b::/96")
#: NAT64's local-use prefix (RFC 8215): where the IPv4 address sits depends on the prefix
#: length the network chose, so the whole prefix is refused
NAT64_LOCAL_USE = ipaddress.IPv6Network("64:ff9b:1::/48")
#: IPv4-compatible addresses (``::a.b.c.d``, deprecated by RFC 4291)
IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (IPv4-mapped, NAT64, 6to4,
    IPv4-compatible), which is where a connection to it ends up; None otherwise."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in NAT64_WELL_KNOWN or (
        address in IPV4_COMPATIBLE and int(address) > 1  # not :: or ::1
    ):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def private_reason(address: IPAddress) -> str | None:
    """Why ``address`` is not a public one (loopback,
    link-local, private, reserved, multicast, site-local, or any of these carried inside an
    IPv6 address); None for a public address."""
    if isinstance(address, ipaddress.IPv6Address):
        if address in NAT64_LOCAL_USE:
            return "a local-use NAT64 address"
        if address.is_site_local:
            return "a site-local address"
        if address.teredo is not None:
            return "a Teredo address"
    inner = embedded_ipv4(address)
    if inner is not None:
        reason = private_reason(inner)
        return None if reason is None else f"an address carrying {inner}, {reason}"
    if not address.is_global or address.is_multicast:
        return "a non-public address"
    return None
