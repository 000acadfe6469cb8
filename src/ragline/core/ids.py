"""Deterministic ids.

Stores address points by UUID; users address documents by any string. The
point id is a UUIDv5 of (tenant, document id) so the mapping needs no lookup
table and two tenants can use the same document id without colliding.
"""

from __future__ import annotations

import hashlib
import uuid

POINT_NAMESPACE = uuid.UUID("6c1f0a52-8b5e-4d0c-9a57-3f0e2b7d9c41")


def point_id(tenant: str, doc_id: str) -> str:
    return str(uuid.uuid5(POINT_NAMESPACE, f"{tenant}\x1f{doc_id}"))


def new_doc_id() -> str:
    return str(uuid.uuid4())


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
