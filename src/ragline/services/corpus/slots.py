"""Building the provider slots (store, reranker) from Settings, through the registry.

Every slot is built the same way: the provider named in settings is looked up in
the registry and given its own typed config (``<slot>_options``), validated by
the provider's ``Config``. Settings carry no engine-specific knob at the top
level; the only things filled in here are those that come from the data
directory (an embedded store's ``path``) or from the spec-000 shorthand for the
cross-encoder.
"""

from __future__ import annotations

import logging
from typing import Any

from ragline.errors import InvalidInput
from ragline.providers.registry import registry
from ragline.providers.rerankers.base import Reranker
from ragline.providers.stores.base import VectorStore
from ragline.settings import Settings

log = logging.getLogger(__name__)


def configure_registry(settings: Settings) -> None:
    """Which plugins may load (``RAGLINE_PROVIDERS_ALLOW``): applied before any lookup."""
    registry.configure(settings.providers_allow)


def build_store(settings: Settings) -> VectorStore:
    options = dict(settings.store_options)
    fields = registry.get("stores", settings.store).Config.model_fields
    if "path" in fields and not options.get("host"):  # a store given a server is not embedded
        options.setdefault("path", settings.shards_dir())
    store: VectorStore = registry.build("stores", settings.store, options)
    return store


def check_model_name(model: Any) -> None:
    """A model asked for over the network must be a name, never a path on the server: which
    directories models load from is the operator's choice (``RAGLINE_EMBEDDER_OPTIONS``)."""
    if model is None:
        return
    if not isinstance(model, str) or not model.strip():
        raise InvalidInput("'embed.model' must be a non-empty string")
    if model.startswith((".", "~", "/", "\\")) or ".." in model or "\\" in model \
            or model.count("/") > 1:
        raise InvalidInput("'embed.model' must be a model name, not a path; model directories "
                           "are configured by the operator (RAGLINE_EMBEDDER_OPTIONS)")


def build_reranker(settings: Settings) -> Reranker | None:
    """The configured reranker, or ``None`` (logged) when none is configured.

    ``reranker`` + ``reranker_options`` name any registered reranker; without
    them, the cross-encoder shorthand of spec 000 applies (``--cross-encoder-path`` >
    ``--cross-encoder`` > ``CROSS_ENCODER_PATH`` > ``CROSS_ENCODER_MODEL``). A model
    that was asked for but cannot load raises ``ModelLoadError``.
    """
    if settings.reranker:
        reranker: Reranker = registry.build("rerankers", settings.reranker,
                                            settings.reranker_options)
        log.info("reranker %s loaded (%s)", settings.reranker, getattr(reranker, "model", ""))
        return reranker
    try:
        from ragline.providers.rerankers.cross_encoder import load_from_settings
    except ImportError:  # the rerank extra is not installed
        return None
    return load_from_settings(settings)


class RerankerSlot:
    """The loaded reranker (or ``None``), read at use: retrieval, ``/rerank`` and
    ``/health`` all see a model loaded or replaced after start-up. A store
    connection's services read the server's slot (``Borrowed.reranker``)."""

    def __init__(self, reranker: Reranker | None = None) -> None:
        self.current = reranker

    def __call__(self) -> Reranker | None:
        return self.current
