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
from typing import cast

from ragline.core.types import CollectionInfo
from ragline.providers.embedders.base import Embedder
from ragline.services.embedders import EmbedderPool
from ragline.services.ingest_pipeline import Target
from ragline.settings import Settings

CHUNKER_VERSION = "1"
"""Part of every source's fingerprint: bump it when chunking changes."""
MAX_CHUNK_TOKENS = 512
"""Upper bound on chunk size whatever the embedder allows (spec 004: 400-512)."""


def build_target(settings: Settings, embedders: EmbedderPool, info: CollectionInfo,
                 tenant: str, reuse: bool) -> Target:
    assert info.embedding_provider is not None
    cached = embedders.get(info.embedding_provider, info.embedding_model)
    # the pool's query cache is bypassed: documents would evict queries, and
    # "full" must really recompute
    embedder = cast(Embedder, getattr(cached, "inner", cached))
    overhead = embedder.count_tokens("")
    limit = min(embedder.max_input_tokens, MAX_CHUNK_TOKENS) - overhead
    size = min(settings.ingest_chunk_tokens or limit, limit)
    meta_defaults = info.metadata.get("ingest_defaults")
    defaults = {**settings.ingest_defaults,
                **(meta_defaults if isinstance(meta_defaults, dict) else {})}
    pattern = info.metadata.get("ingest_path_pattern") or settings.ingest_path_pattern
    overlap = settings.ingest_chunk_overlap
    fingerprint = hashlib.sha256(json.dumps(
        [CHUNKER_VERSION, size, overlap, info.embedding_provider, embedder.model,
         defaults, pattern], sort_keys=True, default=str).encode()).hexdigest()[:16]

    def count(text: str) -> int:
        return max(0, embedder.count_tokens(text) - overhead)

    return Target(info, tenant, embedder, count, size, overlap, fingerprint, reuse,
                  defaults, pattern if isinstance(pattern, str) else None)
