"""Who an MCP caller is, from the same headers as the HTTP API.

``Authorization: Bearer KEY`` or ``X-API-Key: KEY``, plus ``X-Ragline-Tenant``
for an admin acting in one tenant; the rules are the facade's
(``rl.keys.authenticate``), so ``/mcp`` and the HTTP API agree on every key.
"""

from __future__ import annotations

from collections.abc import Mapping

from ragline.api.deps import key_from_headers
from ragline.core.principal import Principal
from ragline.facade import Ragline

TENANT_HEADER = "x-ragline-tenant"
PRINCIPAL_STATE = "ragline_principal"
"""Key under the ASGI scope's ``state`` where the HTTP transport leaves the caller."""


def resolve_principal(rl: Ragline, headers: Mapping[str, str]) -> Principal:
    """The caller of an HTTP request; raises ``AuthenticationError``/``Forbidden``."""
    return rl.keys.authenticate(key_from_headers(headers), headers.get(TENANT_HEADER),
                           public_ok=False)


def stdio_principal(rl: Ragline, key: str | None) -> Principal:
    """``ragline mcp``: the key's principal, or the data directory's owner without one
    (the process opened the data directory itself)."""
    return rl.keys.authenticate(key, None, public_ok=False) if key else rl.owner()
