"""Cross-encoder reranking with ``sentence_transformers.CrossEncoder`` (spec 000).

A cross-encoder reads the query and a document together, so it ranks far
better than vector similarity, at the price of one model pass per document.
That is why it is optional, loaded once at startup, and why a model that was
asked for but cannot load is fatal (:class:`ModelLoadError`): a server that
silently serves without the reranker it was told to use hides a broken deploy.

Where the model comes from, highest priority first (spec 000 "Priority order"):
``--cross-encoder-path`` > ``--cross-encoder`` > env ``CROSS_ENCODER_PATH`` >
env ``CROSS_ENCODER_MODEL``. A name that is an existing directory is loaded as a
path, so ``--cross-encoder ./models/x`` works too.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal

import numpy as np
from pydantic import Field

from ragline.errors import ModelLoadError
from ragline.providers.base import ProviderConfig
from ragline.providers.rerankers.base import LocalCrossEncoder
from ragline.providers.rerankers.catalog import enable_hint

if TYPE_CHECKING:
    from ragline.providers.rerankers.onnx_cross_encoder import OnnxCrossEncoderReranker
    from ragline.settings import Settings

log = logging.getLogger(__name__)

ENV_MODEL: Final = "CROSS_ENCODER_MODEL"
ENV_PATH: Final = "CROSS_ENCODER_PATH"
Origin = Literal[
    "--cross-encoder-path", "--cross-encoder", "CROSS_ENCODER_PATH", "CROSS_ENCODER_MODEL"
]


@dataclass(frozen=True)
class ModelSource:
    """Which model to load and which option or variable asked for it (for logs and errors)."""

    value: str
    origin: Origin

    @property
    def is_path(self) -> bool:
        """Paths skip the hub entirely; a name that exists on disk counts as a path."""
        return self.origin in ("--cross-encoder-path", ENV_PATH) or Path(self.value).exists()


def resolve_model_source(
    cli_path: str | os.PathLike[str] | None,
    cli_name: str | None,
    env: Mapping[str, str] | None = None,
) -> ModelSource | None:
    """Apply the priority order path flag > name flag > env; ``None`` means reranking is off."""
    env = {} if env is None else env
    candidates: list[tuple[str | os.PathLike[str] | None, Origin]] = [
        (cli_path, "--cross-encoder-path"),
        (cli_name, "--cross-encoder"),
        (env.get(ENV_PATH), ENV_PATH),
        (env.get(ENV_MODEL), ENV_MODEL),
    ]
    for value, origin in candidates:
        if value is not None and str(value).strip():
            return ModelSource(str(value).strip(), origin)
    return None


class CrossEncoderConfig(ProviderConfig):
    model: str = Field(description="Hugging Face model name or local directory.")
    device: str = Field("cpu", description="Torch device; the server runs on CPU by default.")
    batch_size: int = Field(32, ge=1, description="Pairs per forward pass.")
    max_length: int | None = Field(
        None, ge=8, description="Token limit per pair (the model's own limit when unset)."
    )
    max_documents: int = Field(1000, ge=1, description="Most documents accepted per request.")
    max_chars: int = Field(4000, ge=1, description="Query and texts are clipped to this.")
    local_files_only: bool = Field(False, description="Never contact the hub.")


class CrossEncoderReranker(LocalCrossEncoder):
    """Scores (query, document) pairs with a loaded CrossEncoder; thread-safe."""

    name: ClassVar[str] = "cross-encoder"
    kind: ClassVar[str] = "reranker"
    Config: ClassVar[type[ProviderConfig]] = CrossEncoderConfig
    CAPABILITIES: ClassVar[list[str]] = ["rerank"]

    def __init__(self, config: CrossEncoderConfig, model: Any | None = None) -> None:
        """Load the model now (startup cost, not first-request cost); ``model`` injects one."""
        self.config = config
        self._model = model if model is not None else self._load(config)
        # One forward pass at a time: concurrent torch calls on 2 cores only
        # oversubscribe the CPU and make every request slower.
        self._lock = threading.Lock()

    @staticmethod
    def _load(config: CrossEncoderConfig) -> Any:
        try:
            from sentence_transformers import CrossEncoder

            return CrossEncoder(
                config.model,
                device=config.device,
                max_length=config.max_length,
                local_files_only=config.local_files_only,
            )
        except Exception as exc:
            raise ModelLoadError(
                f"Could not load cross-encoder '{config.model}': {type(exc).__name__}: {exc}"
            ) from exc

    @classmethod
    def from_source(cls, source: ModelSource, **options: Any) -> CrossEncoderReranker:
        """Build from a resolved source; a missing path fails fast instead of trying the hub."""
        if source.origin in ("--cross-encoder-path", ENV_PATH) and not Path(source.value).is_dir():
            raise ModelLoadError(
                f"Could not load cross-encoder: {source.origin} '{source.value}' is not a directory"
            )
        config = CrossEncoderConfig(model=source.value, local_files_only=source.is_path, **options)
        return cls(config)

    def _score(self, pairs: list[tuple[str, str]]) -> Any:
        with self._lock:
            raw = self._model.predict(
                pairs, batch_size=self.config.batch_size, show_progress_bar=False
            )
        scores = np.asarray(raw, dtype=np.float64)
        # multi-label heads: the last column is "relevant"
        return scores[:, -1] if scores.ndim > 1 else scores


def load_from_settings(
    settings: Settings, env: Mapping[str, str] | None = None
) -> CrossEncoderReranker | OnnxCrossEncoderReranker | None:
    """Startup entry point: the configured reranker, or ``None`` (logged) when none is set.

    A model that ``ragline models build-reranker`` exported (its directory, or
    the name it was built from, found in ``settings.models_dir``) is served by
    the ONNX provider, without torch; anything else by sentence-transformers.

    Raises :class:`ModelLoadError` when a model was asked for and fails; the
    CLI logs it as fatal and exits non-zero (spec 000).
    """
    if env is None:  # the spec-000 variables, as Settings read them
        env = {ENV_PATH: settings.cross_encoder_env_path or "",
               ENV_MODEL: settings.cross_encoder_env_model or ""}
    source = resolve_model_source(settings.cross_encoder_path, settings.cross_encoder_model, env)
    if source is None:
        log.info("cross-encoder disabled: /rerank will answer 503. %s", enable_hint())
        return None
    where = "path" if source.is_path else "model"
    log.info("loading cross-encoder %s %s (from %s)", where, source.value, source.origin)
    started = time.perf_counter()
    from ragline.providers.registry import registry  # the one way providers are built
    from ragline.providers.rerankers.onnx_cross_encoder import find_built_model

    reranker: CrossEncoderReranker | OnnxCrossEncoderReranker
    if find_built_model(source.value, settings.models_dir) is not None:
        where = f"ONNX {where}"
        reranker = registry.build("rerankers", "onnx-cross-encoder", {
            "model": source.value, "models_dir": settings.models_dir,
            "max_documents": settings.rerank_max_documents,
            "max_chars": settings.rerank_max_chars,
        })
    else:
        if source.origin in ("--cross-encoder-path", ENV_PATH) and not Path(
            source.value
        ).is_dir():
            raise ModelLoadError(
                f"Could not load cross-encoder: {source.origin} '{source.value}' is not a "
                "directory"
            )
        reranker = registry.build("rerankers", "cross-encoder", {
            "model": source.value, "local_files_only": source.is_path,
            "max_documents": settings.rerank_max_documents,
            "max_chars": settings.rerank_max_chars,
        })
    log.info(
        "cross-encoder loaded: %s %s in %.1f s",
        where,
        source.value,
        time.perf_counter() - started,
    )
    return reranker
