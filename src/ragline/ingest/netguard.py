"""SSRF guard: which addresses a server-side fetch may connect to.

A URL submitted by a user is fetched *by the server*, from inside its network.
Without a guard, ``http://169.254.169.254/`` reads cloud credentials and
``http://localhost:6333/`` reaches internal services. Every address a host
name resolves to is checked (one bad address is enough to refuse: an attacker
controls the order), and the caller connects to a checked address only, so
a DNS answer that changes between check and connect cannot slip through.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable

from ragline.errors import InvalidInput

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]

METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    {
        ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack, ...
        ipaddress.ip_address("169.254.170.2"),  # AWS ECS task metadata
        ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
        ipaddress.ip_address("fd00:ec2::254"),  # AWS IMDS over IPv6
    }
)

SPECIAL_PURPOSE: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = tuple(
    ipaddress.ip_network(n) for n in (
        "192.0.0.0/24",      # IETF protocol assignments (PCP/TURN anycast marked global)
        "192.88.99.0/24",    # 6to4 relay anycast (deprecated)
        "2001::/23",         # IETF protocol assignments (AMT, AS112, ORCHIDv2 marked global)
        "2002::/16",         # 6to4 that did not unwrap to a public IPv4 address
        "64:ff9b::/96",      # NAT64 well-known prefix (unwrapped first)
        "64:ff9b:1::/48",    # local-use NAT64
        "100::/64",          # discard-only
        "3fff::/20",         # documentation (2024)
        "5f00::/16",         # SRv6 SIDs
        "fec0::/10",         # site-local (deprecated, still routed inside some networks)
    ))
"""Special-purpose ranges (IANA registries) that Python's ``ipaddress`` may call
global or not know: none of them is a web server a user means (issue 10)."""

NAT64 = ipaddress.ip_network("64:ff9b::/96")


def embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries: mapped, 6to4, Teredo (either end), NAT64
    or IPv4-compatible. A request to such an address reaches that IPv4 host."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        server, client = ip.teredo
        # the client is where traffic goes; a private server is refused by the caller too
        return client if refusal_reason(str(server)) is None else server
    if ip in NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if int(ip) >> 32 == 0 and int(ip) > 1:  # ::a.b.c.d (deprecated IPv4-compatible)
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


_CHECKS: tuple[tuple[str, Callable[[IPAddress], bool]], ...] = (
    ("a cloud metadata address", lambda ip: ip in METADATA_ADDRESSES),
    ("an unspecified address", lambda ip: ip.is_unspecified),
    ("a loopback address", lambda ip: ip.is_loopback),
    ("a link-local address", lambda ip: ip.is_link_local),
    ("a multicast address", lambda ip: ip.is_multicast),
    ("a reserved address", lambda ip: ip.is_reserved),
    ("a private address", lambda ip: ip.is_private),
    ("a site-local address", lambda ip: isinstance(ip, ipaddress.IPv6Address)
     and ip.is_site_local),
    ("a special-purpose address", lambda ip: any(
        ip.version == n.version and ip in n for n in SPECIAL_PURPOSE)),
    ("a non-public address", lambda ip: not ip.is_global),
)


def system_resolver(host: str, port: int) -> list[str]:
    """All addresses ``getaddrinfo`` gives for ``host``, in its order, deduplicated."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise InvalidInput(f"cannot resolve host {host!r} ({exc})") from exc
    return list(dict.fromkeys(str(info[4][0]).split("%")[0] for info in infos))


def refusal_reason(address: str) -> str | None:
    """Why ``address`` must not be fetched, or ``None`` if it is a public address."""
    ip: IPAddress = ipaddress.ip_address(address)
    inner = embedded_ipv4(ip)
    if inner is not None:  # ::ffff:10.0.0.1, 2002:0a00:0001::, 64:ff9b::a00:1 are 10.0.0.1
        reason = refusal_reason(str(inner))
        if reason is not None:
            return reason  # the message names the address as given
        if isinstance(ip, ipaddress.IPv6Address) and (ip.ipv4_mapped is not None
                                                      or ip in NAT64):
            return None  # a plain route to a public IPv4 host
    for reason, check in _CHECKS:
        if check(ip):
            return reason
    return None


def resolve_checked(
    host: str, port: int, *, allow_private: bool = False, resolver: Resolver | None = None
) -> list[str]:
    """The addresses to connect to for ``host``, after the SSRF check.

    Raises :class:`InvalidInput` naming the address and the reason, e.g.
    ``URL resolves to a private address (10.0.0.5); refusing to fetch``.
    """
    try:
        addresses = [str(ipaddress.ip_address(host.strip("[]")))]
    except ValueError:
        addresses = (resolver or system_resolver)(host, port)
    if not addresses:
        raise InvalidInput(f"cannot resolve host {host!r}")
    if not allow_private:
        for address in addresses:
            reason = refusal_reason(address)
            if reason is not None:
                raise InvalidInput(
                    f"URL resolves to {reason} ({address}); refusing to fetch (setting "
                    "allow_private_urls permits private addresses)",
                    details={"host": host, "address": address, "reason": reason},
                )
    return addresses
