"""Deterministic chunk ids: UUIDv5 of the source id and the chunk's content hash.

Ids follow content, not position (spec 004 FR-007): editing one section of a
lesson leaves the other chunks' ids unchanged, so the incremental pipeline
re-embeds and rewrites only what changed and deletes ids that disappeared.
Identical chunks inside one source are told apart by their occurrence number
(0 for the first, which keeps the common case free of it).

``namespace`` scopes ids further, e.g. by tenant: two users uploading the same
``notes.pdf`` into one collection must not overwrite each other's points.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable

from ragline.ingest.types import Chunk

CHUNK_NAMESPACE = uuid.UUID("6f1d1c1e-3b8e-5a52-9b7e-2f5c3a9d4e10")
"""Fixed forever: changing it changes every chunk id in every existing index."""


def content_hash(text: str) -> str:
    """Hex SHA-256 of the UTF-8 text, as stored in ``Chunk.content_hash``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chunk_id(source_id: str, content_hash: str, occurrence: int = 0, *, namespace: str = "") -> str:
    """``str(uuid5(CHUNK_NAMESPACE, "[namespace\\x1f]source_id\\x1fcontent_hash[\\x1fN]"))``.

    The unit separator ``\\x1f`` cannot occur in paths or hex, so distinct
    inputs can never join into the same name.
    """
    if occurrence < 0:
        raise ValueError("occurrence must be >= 0")
    parts = [namespace] if namespace else []
    parts += [source_id, content_hash]
    if occurrence:
        parts.append(str(occurrence))
    return str(uuid.uuid5(CHUNK_NAMESPACE, "\x1f".join(parts)))


def assign_chunk_ids(source_id: str, chunks: Iterable[Chunk], *, namespace: str = "") -> list[str]:
    """Ids for a document's chunks in order; repeats of a text get occurrence 1, 2, …"""
    seen: dict[str, int] = {}
    ids: list[str] = []
    for chunk in chunks:
        occurrence = seen.get(chunk.content_hash, 0)
        seen[chunk.content_hash] = occurrence + 1
        ids.append(chunk_id(source_id, chunk.content_hash, occurrence, namespace=namespace))
    return ids
