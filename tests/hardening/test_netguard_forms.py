"""The SSRF guard unwraps IPv6 forms that carry IPv4 and refuses special-purpose ranges."""

from __future__ import annotations

import pytest

from ragline.errors import InvalidInput
from ragline.ingest.netguard import refusal_reason, resolve_checked


@pytest.mark.parametrize("address", [
    "2002:7f00:1::",             # 6to4 of 127.0.0.1
    "2002:a00:1::1",             # 6to4 of 10.0.0.1
    "2002:a9fe:a9fe::",          # 6to4 of 169.254.169.254
    "2001:0:4136:e378:8000:63bf:f5ff:fffe",  # Teredo, client 10.0.0.1
    "2001:0:a00:1::",            # Teredo with a private server
    "64:ff9b::7f00:1",           # NAT64 of 127.0.0.1
    "64:ff9b::a9fe:a9fe",        # NAT64 of the metadata address
    "64:ff9b:1::a00:1",          # local-use NAT64
    "::7f00:1",                  # IPv4-compatible 127.0.0.1
    "::ffff:10.0.0.1",           # mapped (kept)
    "fec0::1",                   # site-local
    "192.0.0.9",                 # PCP anycast: Python calls it global
    "192.0.0.10",                # TURN anycast
    "2001:1::1",                 # port control anycast
    "2001:3::1",                 # AMT
    "2001:4:112::1",             # AS112
    "2001:20::1",                # ORCHIDv2
    "192.88.99.1",               # 6to4 relay anycast
    "100::1",                    # discard-only
    "3fff::1",                   # documentation
])
def test_refused(address: str) -> None:
    assert refusal_reason(address) is not None
    with pytest.raises(InvalidInput, match="refusing to fetch"):
        resolve_checked(address, 80)


@pytest.mark.parametrize("address", [
    "93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "64:ff9b::5db8:d822",
    "::ffff:93.184.216.34",
])
def test_public_addresses_pass(address: str) -> None:
    assert refusal_reason(address) is None
