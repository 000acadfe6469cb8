"""Embedder instances per (provider, model), each behind a cache and a micro-batcher.

One instance per (connection, model) means two collections on the same model
share one loaded model and one cache (spec 000, "Embedding Cache Efficiency").

A collection names its embedder in ``embed.provider``: a registered embedder
(configured by ``RAGLINE_EMBEDDER_OPTIONS``), or a named connection of kind
``embedders`` (``[connections.ID] kind = "embedders"``, or ``POST
/api/connections``), which brings its own provider and config. Either way that
name is the *connection id* of the cache key ``connectionId:model``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from pydantic import ValidationError

from ragline.core.config_errors import describe_validation_error
from ragline.errors import InvalidInput, RaglineError
from ragline.providers.base import ProviderConfig
from ragline.providers.embedders.batcher import MicroBatcher
from ragline.providers.embedders.cache import CachedEmbedder
from ragline.providers.registry import registry
from ragline.settings import Settings

log = logging.getLogger(__name__)

# connection id -> (provider name, its validated config), or None when no such connection
ConnectionLookup = Callable[[str], "tuple[str, ProviderConfig] | None"]


class EmbedderPool:
    def __init__(self, settings: Settings,
                 connections: ConnectionLookup = lambda _cid: None) -> None:
        """``connections``: the named embedder connections (``embed.provider`` may name
        one); the default knows none."""
        self.settings = settings
        self._embedders: dict[tuple[str, str | None], CachedEmbedder] = {}
        self._batchers: dict[tuple[str, str | None], MicroBatcher] = {}
        self._lock = threading.Lock()
        self._keys: dict[tuple[str, str | None], tuple[str, str | None]] = {}
        self.connections = connections
        self._loaded_names: set[str] = set()

    def names(self) -> list[str]:
        return registry.names("embedders")

    def _connection(self, provider: str) -> tuple[str, ProviderConfig] | None:
        """A named embedder connection (a registered provider name always wins)."""
        if registry.has("embedders", provider):
            return None
        return self.connections(provider)

    def known(self, provider: str | None) -> bool:
        """Whether ``provider`` names an embedder (asked on every search: a loaded one
        answers from memory, without a catalog read)."""
        if not provider:
            return False
        if provider in self._loaded_names or registry.has("embedders", provider):
            return True
        return self._connection(provider) is not None

    def _key(self, provider: str, model: str | None) -> tuple[str, str | None]:
        """(provider, model) with the provider's default model filled in, so "no model"
        and "the default model, by name" share one instance and one cache."""
        known = self._keys.get((provider, model))
        if known is not None:
            return known
        asked = (provider, model)
        conn = self._connection(provider) if model is None else None
        if conn is not None:
            model = getattr(conn[1], "model", None)
        elif model is None:
            try:
                options = self.settings.embedder_options.get(provider, {})
                model = options.get("model") or getattr(
                    registry.get("embedders", provider).Config(**options), "model", None)
            except Exception:  # a config without defaults: keep None
                model = None
        self._keys[asked] = (provider, model)
        return (provider, model)

    def get(self, provider: str, model: str | None = None) -> CachedEmbedder:
        key = self._key(provider, model)
        with self._lock:
            emb = self._embedders.get(key)
            if emb is not None:
                return emb
            try:
                inner = self._build(provider, model)
            except RaglineError:
                raise
            except ValidationError as exc:  # name the fields, never the values (secrets)
                raise InvalidInput(
                    f"Cannot load embedder '{provider}'"
                    + (f" with model '{model}'" if model else "")
                    + f": invalid options: {describe_validation_error(exc)}"
                ) from None
            except Exception as exc:  # the config is valid here: no raw option values
                raise InvalidInput(
                    f"Cannot load embedder '{provider}'"
                    + (f" with model '{model}'" if model else "") + f": {exc}"
                ) from exc
            emb = CachedEmbedder(inner, max_entries=self.settings.embedding_cache_size,
                                 connection=provider,
                                 max_bytes=self.settings.embedding_cache_bytes)
            self._loaded_names.add(provider)
            self._embedders[key] = emb
            self._batchers[key] = MicroBatcher(emb, max_batch=self.settings.embed_max_batch,
                                               max_wait_ms=self.settings.embed_max_wait_ms,
                                               workers=self.settings.embed_workers,
                                               wait_when_idle=self.settings.embed_wait_when_idle)
            log.info("loaded embedder %s (%s)", provider, emb.model)
            return emb

    def _build(self, provider: str, model: str | None) -> Any:
        """The embedder behind a connection id: a named connection's own provider and
        config, or the registered provider with its ``RAGLINE_EMBEDDER_OPTIONS``."""
        conn = self._connection(provider)
        if conn is not None:
            name, config = conn
            if model and "model" in type(config).model_fields:
                config = config.model_copy(update={"model": model})
            return registry.get("embedders", name)(config)
        cls = registry.get("embedders", provider)
        options = dict(self.settings.embedder_options.get(provider, {}))
        if model:
            options["model"] = model
        if "models_dir" in cls.Config.model_fields and self.settings.models_dir:
            options.setdefault("models_dir", self.settings.models_dir)
        return registry.build("embedders", provider, options)  # the one way

    def loaded(self, provider: str, model: str | None = None) -> CachedEmbedder | None:
        """The embedder if already loaded, else None (never loads a model)."""
        return self._embedders.get(self._key(provider, model))

    def batcher(self, provider: str, model: str | None = None) -> MicroBatcher:
        self.get(provider, model)
        return self._batchers[self._key(provider, model)]

    def loaded_batcher(self, provider: str, model: str | None = None) -> MicroBatcher | None:
        """The batcher if its model is already loaded, else None: a lookup cheap
        enough for the event loop (loading a model is not)."""
        return self._batchers.get(self._key(provider, model))

    def embed_documents(self, provider: str, model: str | None,
                        texts: list[str]) -> np.ndarray:
        return self.get(provider, model).embed(texts, input_type="document")

    def stats(self) -> dict[str, Any]:
        """Cache counters under each cache key ``connectionId:model``, with the
        micro-batcher's under ``batching``."""
        out: dict[str, Any] = {}
        for key, emb in list(self._embedders.items()):
            entry: dict[str, Any] = dict(emb.stats())
            batcher = self._batchers.get(key)
            if batcher is not None:
                entry["batching"] = batcher.stats()
            out[emb.cache_key] = entry
        return out
