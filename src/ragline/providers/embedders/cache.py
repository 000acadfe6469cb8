"""An in-process LRU cache in front of any embedder.

Why: search embeds the same queries again and again (conversation follow-ups,
dashboards, retries), and a hosted embedder charges per call. The key is
``"{connection_id}:{model}"`` + ``input_type`` + sha256(text), so two endpoints or
models never share vectors, and query/document embeddings (which differ for
E5-style models) are kept apart. Only the texts that miss go to the inner
embedder, in one call.

Bounded twice: by entries (``max_entries``) and by bytes (``max_bytes``: each entry
counts its vector's bytes plus :data:`ENTRY_OVERHEAD` for the key, the array header
and the dictionary node), so a 3,072-d model's cache holds as many bytes as a 384-d
one's, not 8x as many (issue 39).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from ragline.observability import metrics
from ragline.providers.base import Health, ProviderConfig, config_schema
from ragline.providers.embedders.base import Embedder, InputType
from ragline.providers.embedders.util import check_inputs

log = logging.getLogger(__name__)

CacheKey = tuple[str, str, str]

ENTRY_OVERHEAD = 384
"""Bytes an entry costs beyond its vector's data: the key (a 3-tuple holding a 64-char
hex digest), the ndarray header and the ordered dictionary's node. Measured with
tracemalloc: 1,900 bytes an entry for 384-d float32 vectors (1,536 of them data)."""

DEFAULT_MAX_BYTES = 32 * 1024 * 1024


def entry_bytes(vector: npt.NDArray[np.float32]) -> int:
    """What one cached vector counts against ``max_bytes``."""
    return int(vector.nbytes) + ENTRY_OVERHEAD


class CachedEmbedder:
    """Wraps ``inner``; same protocol; thread-safe; bounded to ``max_entries`` vectors
    and ``max_bytes`` bytes (:func:`entry_bytes` each), least recently used out first.

    The lock is held only for dictionary work, never while the model runs, so
    concurrent misses for the same text may both embed it (harmless: same
    vector, last write wins) instead of serialising every caller.
    """

    name: ClassVar[str] = "cached"
    kind: ClassVar[str] = "embedder"
    Config: ClassVar[type[ProviderConfig]] = ProviderConfig

    def __init__(self, inner: Embedder, max_entries: int = 10_000,
                 connection: str | None = None,
                 max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        """``connection``: the id of the embedding connection (the name collections give
        in ``embed.provider``); the cache key is ``connection:model`` (spec 000), so every
        collection on the same connection and model shares the vectors. Unset: the
        embedder's own ``connection_id`` (its endpoint and credentials)."""
        if max_entries < 0:
            raise ValueError("max_entries must be >= 0")
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self.inner = inner
        self.connection = connection
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._bytes = 0
        self._entries: OrderedDict[CacheKey, npt.NDArray[np.float32]] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0

    def __repr__(self) -> str:
        return (f"CachedEmbedder({self.inner!r}, max_entries={self.max_entries}, "
                f"max_bytes={self.max_bytes})")

    # -- delegated protocol ------------------------------------------------------
    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    @property
    def max_input_tokens(self) -> int:
        return self.inner.max_input_tokens

    @property
    def connection_id(self) -> str:
        return self.inner.connection_id

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return config_schema(ProviderConfig)

    def capabilities(self) -> list[str]:
        return [*self.inner.capabilities(), "embedding_cache"]

    def health(self) -> Health:
        h = self.inner.health()
        return h.model_copy(update={"details": {**h.details, "cache": self.stats()}})

    # -- caching -----------------------------------------------------------------
    @property
    def cache_key(self) -> str:
        """``connectionId:model`` (spec 000, "Embedding Cache Efficiency")."""
        return f"{self.connection or self.inner.connection_id}:{self.inner.model}"

    def _namespace(self) -> str:
        return self.cache_key

    def _key(self, text: str, input_type: str, namespace: str | None = None) -> CacheKey:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        return (namespace or self._namespace(), input_type, digest)

    def embed(
        self, texts: list[str], input_type: InputType = "document"
    ) -> npt.NDArray[np.float32]:
        check_inputs(texts, input_type)
        namespace = self._namespace()
        keys = [self._key(t, input_type, namespace) for t in texts]
        found: dict[CacheKey, npt.NDArray[np.float32]] = {}
        with self._lock:
            for k in keys:
                vec = self._entries.get(k)
                if vec is not None:
                    self._entries.move_to_end(k)
                    found[k] = vec
        # Each distinct missing text is embedded once, even if repeated in `texts`.
        missing: dict[CacheKey, str] = {}
        for k, t in zip(keys, texts, strict=True):
            if k not in found and k not in missing:
                missing[k] = t
        hits = len(texts) - sum(1 for k in keys if k in missing)
        if hits:
            log.debug("embedding cache %s: %d hit(s), %d miss(es)", namespace, hits,
                      len(missing))
        if missing:
            fresh = np.asarray(self.inner.embed(list(missing.values()), input_type), np.float32)
            for k, vec in zip(missing, fresh, strict=True):
                row = vec.copy()
                row.setflags(write=False)  # shared between callers: must not be mutated
                found[k] = row
        if hits:
            metrics.EMBED_CACHE.labels("hit").inc(hits)
        if len(texts) - hits:
            metrics.EMBED_CACHE.labels("miss").inc(len(texts) - hits)
        if missing:
            metrics.EMBED_TEXTS.labels(self.model).inc(len(missing))
        with self._lock:
            self._hits += hits
            self._misses += len(texts) - hits
            for k in missing:
                self._put(k, found[k])
        if not texts:
            return np.zeros((0, self.inner.dimension), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    def lookup(self, text: str, input_type: InputType) -> npt.NDArray[np.float32] | None:
        """The cached vector of one text, or None (counted as a hit, never as a miss).

        The search path asks this before queueing a query for the micro-batcher, so
        a repeated query skips the batch window and the worker thread entirely.
        """
        if self.max_entries == 0 or self.max_bytes == 0:
            return None
        key = self._key(text, input_type)
        with self._lock:
            vec = self._entries.get(key)
            if vec is None:
                return None
            self._entries.move_to_end(key)
            self._hits += 1
        metrics.EMBED_CACHE.labels("hit").inc()
        log.debug("embedding cache %s: 1 hit", key[0])
        return vec

    def _put(self, key: CacheKey, vec: npt.NDArray[np.float32]) -> None:
        """Store one vector (lock held), then evict the least recently used entries
        until both bounds hold. A vector larger than ``max_bytes`` is not kept."""
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= entry_bytes(old)
        size = entry_bytes(vec)
        if size > self.max_bytes or self.max_entries == 0:
            return
        self._entries[key] = vec
        self._bytes += size
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            _, gone = self._entries.popitem(last=False)
            self._bytes -= entry_bytes(gone)

    def stats(self) -> dict[str, int]:
        """Hits and misses since start; ``size``: entries held; ``bytes``: what they count
        against ``max_bytes``."""
        with self._lock:
            return {"hits": self._hits, "misses": self._misses, "size": len(self._entries),
                    "bytes": self._bytes}

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0
