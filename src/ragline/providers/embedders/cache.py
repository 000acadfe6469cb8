"""An in-process LRU cache in front of any embedder.

Why: search embeds the same queries again and again (conversation follow-ups,
dashboards, retries), and a hosted embedder charges per call. The key is
``"{connection_id}:{model}"`` + ``input_type`` + sha256(text), so two endpoints or
models never share vectors, and query/document embeddings (which differ for
E5-style models) are kept apart. Only the texts that miss go to the inner
embedder, in one call.
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


class CachedEmbedder:
    """Wraps ``inner``; same protocol; thread-safe; bounded to ``max_entries`` vectors.

    The lock is held only for dictionary work, never while the model runs, so
    concurrent misses for the same text may both embed it (harmless: same
    vector, last write wins) instead of serialising every caller.
    """

    name: ClassVar[str] = "cached"
    kind: ClassVar[str] = "embedder"
    Config: ClassVar[type[ProviderConfig]] = ProviderConfig

    def __init__(self, inner: Embedder, max_entries: int = 10_000,
                 connection: str | None = None) -> None:
        """``connection``: the id of the embedding connection (the name collections give
        in ``embed.provider``); the cache key is ``connection:model`` (spec 000), so every
        collection on the same connection and model shares the vectors. Unset: the
        embedder's own ``connection_id`` (its endpoint and credentials)."""
        if max_entries < 0:
            raise ValueError("max_entries must be >= 0")
        self.inner = inner
        self.connection = connection
        self.max_entries = max_entries
        self._entries: OrderedDict[CacheKey, npt.NDArray[np.float32]] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, max_entries={self.max_entries})"

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
                self._entries[k] = found[k]
                self._entries.move_to_end(k)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        if not texts:
            return np.zeros((0, self.inner.dimension), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    def lookup(self, text: str, input_type: InputType) -> npt.NDArray[np.float32] | None:
        """The cached vector of one text, or None (counted as a hit, never as a miss).

        The search path asks this before queueing a query for the micro-batcher, so
        a repeated query skips the batch window and the worker thread entirely.
        """
        if self.max_entries == 0:
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

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"hits": self._hits, "misses": self._misses, "size": len(self._entries)}

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
