"""How a collection is chunked and embedded: the :class:`Target` of an ingestion run.

The chunk size comes from the collection's embedder, in its own tokens, minus
the tokens the model adds itself (``[CLS]``/``[SEP]``), so no chunk is ever
truncated at embedding time. Everything that decides what the chunks of a
source look like goes into a fingerprint stored with each source's state: when
it changes (a new chunk size, other metadata defaults, a new chunker version),
the next incremental run re-chunks every source, still reusing the vectors of
texts that did not change.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, cast

from ragline.core.types import CollectionInfo
from ragline.ingest.budgets import ParserLimits
from ragline.providers.embedders.base import Embedder
from ragline.services.corpus.embedders import EmbedderPool
from ragline.services.ingestion.ingest_pipeline import Target
from ragline.settings import Settings

CHUNKER_VERSION = "3"
"""Part of every source's fingerprint: bump it when chunking changes.
2: structure from markdown-it-py (setext headings, indented ATX headings,
pipe-less tables); ordinary documents give the same chunks, so a re-chunk
reuses their vectors.
3: chunks under 100 tokens merged (spec 004 EC-4), captions kept with their code,
merged chunks filed under their largest section (issue 36)."""
CONTEXT_HEADER_KEY = "context_header"
"""Collection metadata key overriding ``settings.ingest_context_header``."""
CONTEXT_HEADERS = ("off", "embed", "text")
FRONTMATTER_DEFAULTS_KEY = "frontmatter_defaults"
"""Collection metadata key overriding ``settings.ingest_frontmatter_defaults``."""

log = logging.getLogger(__name__)
HEADER_RESERVE_TOKENS = 32
"""Tokens kept free in each chunk for its contextual header (``Title > Heading``): on the
real book headers took 3-30 word pieces, so chunks filled to the model's limit lost up
to 30 at embedding time without it."""
MAX_CHUNK_TOKENS = 512
"""Upper bound on chunk size whatever the embedder allows (spec 004: 400-512)."""


def parser_limits(settings: Settings) -> ParserLimits:
    """The parser budgets of ``settings`` (``html_max_tags`` ...), handed to every parser."""
    return ParserLimits(html_max_tags=settings.html_max_tags,
                        html_max_depth=settings.html_max_depth,
                        pdf_max_pages=settings.pdf_max_pages,
                        pdf_max_text_chars=settings.pdf_max_text_chars)


def frontmatter_defaults(settings: Settings, info: CollectionInfo | None) -> dict[str, Any]:
    """Spec-004 defaults for Markdown fields, per collection.

    The collection's ``metadata.frontmatter_defaults`` (a mapping of field to
    string, number or boolean; ``{}`` turns the rule off) wins over
    ``settings.ingest_frontmatter_defaults``. A malformed value is ignored with
    a warning rather than failing every ingestion into the collection.
    """
    configured = info.metadata.get(FRONTMATTER_DEFAULTS_KEY) if info is not None else None
    if configured is None:
        return dict(settings.ingest_frontmatter_defaults)
    if isinstance(configured, dict) and all(
        isinstance(k, str) and isinstance(v, str | int | float | bool)
        for k, v in configured.items()
    ):
        return dict(configured)
    log.warning("collection %s: metadata.%s must map field names to strings, numbers or "
                "booleans; using the server's defaults", info.name if info else "?",
                FRONTMATTER_DEFAULTS_KEY)
    return dict(settings.ingest_frontmatter_defaults)


def context_header(settings: Settings, info: CollectionInfo | None) -> str:
    """The contextual-chunk-header mode of a collection: its ``metadata.context_header``
    when that is one of :data:`CONTEXT_HEADERS`, else the server's setting."""
    configured = info.metadata.get(CONTEXT_HEADER_KEY) if info is not None else None
    if configured in CONTEXT_HEADERS:
        return str(configured)
    if configured is not None:
        log.warning("collection %s: metadata.%s must be one of %s; using the server's "
                    "setting", info.name if info else "?", CONTEXT_HEADER_KEY,
                    ", ".join(CONTEXT_HEADERS))
    return settings.ingest_context_header


def build_target(settings: Settings, embedders: EmbedderPool, info: CollectionInfo,
                 tenant: str, reuse: bool) -> Target:
    assert info.embedding_provider is not None
    cached = embedders.get(info.embedding_provider, info.embedding_model)
    # the pool's query cache is bypassed: documents would evict queries, and
    # "full" must really recompute
    embedder = cast(Embedder, getattr(cached, "inner", cached))
    overhead = embedder.count_tokens("")
    header = context_header(settings, info)
    # a contextual header goes in front of the chunk's embedded text: leave it room, so
    # the end of a full chunk is not cut at embedding time
    reserve = HEADER_RESERVE_TOKENS if header != "off" else 0
    limit = min(embedder.max_input_tokens, MAX_CHUNK_TOKENS) - overhead - reserve
    size = min(settings.ingest_chunk_tokens or limit, limit)
    meta_defaults = info.metadata.get("ingest_defaults")
    defaults = {**settings.ingest_defaults,
                **(meta_defaults if isinstance(meta_defaults, dict) else {})}
    pattern = info.metadata.get("ingest_path_pattern") or settings.ingest_path_pattern
    overlap = settings.ingest_chunk_overlap
    fm_defaults = frontmatter_defaults(settings, info)
    parts: list[Any] = [CHUNKER_VERSION, size, overlap, info.embedding_provider, embedder.model,
                        defaults, pattern, fm_defaults]
    if header != "off":  # collections without headers keep their fingerprints
        parts.append(header)
    fingerprint = hashlib.sha256(json.dumps(
        parts, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def count(text: str) -> int:
        return max(0, embedder.count_tokens(text) - overhead)

    return Target(info, tenant, embedder, count, size, overlap, fingerprint, reuse,
                  defaults, pattern if isinstance(pattern, str) else None, fm_defaults, header,
                  book_id_of(settings, info))


def book_id_of(settings: Settings, info: CollectionInfo, root: Path | None = None) -> str:
    """Spec 004's ``book_id`` for chunks whose frontmatter names none: the collection's
    ``metadata.book_id``, else ``settings.ingest_book_id``, else the ingestion root's
    directory name (directory runs), else the collection's name."""
    configured = info.metadata.get("book_id")
    if isinstance(configured, str) and configured:
        return configured
    if settings.ingest_book_id:
        return settings.ingest_book_id
    if root is not None and root.name:
        return root.name
    return info.name
