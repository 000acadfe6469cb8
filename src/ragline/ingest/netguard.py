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

_CHECKS: tuple[tuple[str, Callable[[IPAddress], bool]], ...] = (
    ("a cloud metadata address", lambda ip: ip in METADATA_ADDRESSES),
    ("an unspecified address", lambda ip: ip.is_unspecified),
    ("a loopback address", lambda ip: ip.is_loopback),
    ("a link-local address", lambda ip: ip.is_link_local),
    ("a multicast address", lambda ip: ip.is_multicast),
    ("a reserved address", lambda ip: ip.is_reserved),
    ("a private address", lambda ip: ip.is_private),
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
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:10.0.0.1 is 10.0.0.1
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
                    f"URL resolves to {reason} ({address}); refusing to fetch",
                    details={"host": host, "address": address, "reason": reason},
                )
    return addresses
