"""Who an MCP caller is, from the same API key headers as the HTTP API.

Until API keys exist on the server every caller is the data directory's owner,
as on the HTTP API (``ragline.api.deps.get_caller``); a key sent today is
accepted and ignored.
"""

from __future__ import annotations

from collections.abc import Mapping

from ragline.core.principal import Principal
from ragline.facade import Ragline


def key_from_headers(headers: Mapping[str, str]) -> str | None:
    """``Authorization: Bearer KEY`` or ``X-API-Key: KEY`` (names lower-cased)."""
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    return headers.get("x-api-key", "").strip() or None


def resolve_principal(rl: Ragline, key: str | None) -> Principal:
    """The principal of ``key``; raises ``AuthenticationError`` for a refused key."""
    return rl.owner()
