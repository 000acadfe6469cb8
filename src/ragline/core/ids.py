"""Deterministic ids.

Stores address points by UUID; users address documents by any string. The
point id is a UUIDv5 of (tenant, document id) so the mapping needs no lookup
table and two tenants can use the same document id without colliding.
"""

from __future__ import annotations

import hashlib
import uuid

POINT_NAMESPACE = uuid.UUID("6c1f0a52-8b5e-4d0c-9a57-3f0e2b7d9c41")


_NAMESPACE_BYTES = POINT_NAMESPACE.bytes


def point_id(tenant: str, doc_id: str) -> str:
    """``str(uuid.uuid5(POINT_NAMESPACE, f"{tenant}\\x1f{doc_id}"))``, computed directly:
    the same bytes and bits as :func:`uuid.uuid5` without building a ``UUID`` object,
    about 3x faster (a bulk write computes one per document)."""
    h = bytearray(hashlib.sha1(_NAMESPACE_BYTES + f"{tenant}\x1f{doc_id}".encode(),
                               usedforsecurity=False).digest()[:16])
    h[6] = (h[6] & 0x0F) | 0x50  # version 5
    h[8] = (h[8] & 0x3F) | 0x80  # RFC 4122 variant
    x = h.hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


def new_doc_id() -> str:
    return str(uuid.uuid4())


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
