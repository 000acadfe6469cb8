"""Cross-encoder reranking on onnxruntime + tokenizers: no torch at run time.

The model is exported once by ``ragline models build-reranker NAME_OR_PATH``
(:mod:`ragline.providers.rerankers.onnx_export`) into the models directory;
this provider only reads ``model.onnx``, ``tokenizer.json`` and the
``ragline_reranker.json`` manifest. It keeps the contract of
:class:`~ragline.providers.rerankers.cross_encoder.CrossEncoderReranker`
(same ``rerank()``, same errors, same score scale: the sigmoid of the logit
for one-label models, as sentence-transformers' ``CrossEncoder`` gives), so the
server picks it whenever the configured model is a built ONNX directory.

Pairs are tokenized like ``CrossEncoder`` does (query, document; longest-first
truncation to the model's limit), sorted by length so each batch pads little,
and scored in batches of ``batch_size``.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from ragline.errors import ModelLoadError, RaglineError
from ragline.providers.base import ProviderConfig
from ragline.providers.rerankers.base import LocalCrossEncoder
from ragline.providers.rerankers.onnx_export import MANIFEST, SUFFIX, slug

log = logging.getLogger(__name__)


class OnnxCrossEncoderConfig(ProviderConfig):
    model: str = Field(description="A built model directory, or the name it was built "
                       "from (looked up in models_dir).")
    models_dir: Path | None = Field(
        None, description="Where `ragline models build-reranker` wrote it (default "
        "$RAGLINE_MODELS_DIR or <venv>/share/ragline/models).")
    batch_size: int = Field(32, ge=1, description="Pairs per forward pass.")
    max_length: int | None = Field(
        None, ge=8, description="Token limit per pair (default: the manifest's).")
    threads: int | None = Field(
        None, ge=1, description="onnxruntime intra-op threads (default: onnxruntime's).")
    max_documents: int = Field(1000, ge=1, description="Most documents accepted per request.")
    max_chars: int = Field(4000, ge=1, description="Query and texts are clipped to this.")


def find_built_model(model: str, models_dir: Path | None = None) -> Path | None:
    """The directory of a built ONNX reranker for ``model`` (a path or a name), if any."""
    from ragline.providers.embedders.local_onnx import models_dir as default_models_dir

    root = default_models_dir(models_dir)
    direct = [Path(model).expanduser(), root / model]
    by_source = root / f"{slug(model)}{SUFFIX}"
    for path in [*direct, by_source]:
        if not ((path / MANIFEST).is_file() and (path / "model.onnx").is_file()):
            continue
        if path == by_source and not _built_from(path, model):
            continue  # another model whose name has the same last component
        return path.resolve()
    return None


def _built_from(path: Path, model: str) -> bool:
    try:
        source = str(json.loads((path / MANIFEST).read_text()).get("source", ""))
    except (OSError, ValueError, AttributeError):
        return False
    if source == model:
        return True
    try:
        return Path(source).expanduser().resolve() == Path(model).expanduser().resolve()
    except OSError:
        return False


class OnnxCrossEncoderReranker(LocalCrossEncoder):
    """Scores (query, document) pairs with an exported cross-encoder; thread-safe."""

    name: ClassVar[str] = "onnx-cross-encoder"
    kind: ClassVar[str] = "reranker"
    Config: ClassVar[type[ProviderConfig]] = OnnxCrossEncoderConfig
    CAPABILITIES: ClassVar[list[str]] = ["rerank", "local", "offline"]

    def __init__(self, config: OnnxCrossEncoderConfig) -> None:
        """Load the graph and tokenizer now (startup cost, not first-request cost)."""
        self.config = config
        path = find_built_model(config.model, config.models_dir)
        if path is None:
            raise ModelLoadError(
                f"Could not load ONNX cross-encoder '{config.model}': not built (run "
                f"`ragline models build-reranker {config.model}`)")
        self.path = path
        try:
            self.manifest: dict[str, Any] = json.loads((path / MANIFEST).read_text())
            self._inputs: list[str] = list(self.manifest.get(
                "inputs", ["input_ids", "attention_mask", "token_type_ids"]))
            self._sigmoid = self.manifest.get("activation", "sigmoid") == "sigmoid"
            limit = int(self.manifest.get("max_length", 512))
            self._max_length = min(config.max_length or limit, limit)
            self._tok = self._tokenizer(path / "tokenizer.json", self._max_length)
            self._session = self._load_session(path / "model.onnx", config.threads)
        except RaglineError:
            raise
        except Exception as exc:
            raise ModelLoadError(f"Could not load ONNX cross-encoder '{config.model}': "
                                 f"{type(exc).__name__}: {exc}") from exc
        # One forward pass at a time, as the torch path: concurrent runs on a few
        # cores only oversubscribe the CPU.
        self._lock = threading.Lock()

    @staticmethod
    def _tokenizer(path: Path, max_length: int) -> Any:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(path))
        tok.no_padding()  # padded per batch below, to the batch's longest pair
        tok.enable_truncation(max_length=max_length, strategy="longest_first")
        return tok

    @staticmethod
    def _load_session(path: Path, threads: int | None) -> Any:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = threads
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])

    def _logits(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        encodings = self._tok.encode_batch(pairs)
        order = sorted(range(len(pairs)), key=lambda i: len(encodings[i].ids))
        out = np.zeros(len(pairs), dtype=np.float64)
        step = self.config.batch_size
        for start in range(0, len(order), step):
            idx = order[start:start + step]
            width = max(len(encodings[i].ids) for i in idx)
            feeds = {name: np.zeros((len(idx), width), dtype=np.int64) for name in self._inputs}
            for row, i in enumerate(idx):
                enc, n = encodings[i], len(encodings[i].ids)
                feeds["input_ids"][row, :n] = enc.ids
                if "attention_mask" in feeds:
                    feeds["attention_mask"][row, :n] = enc.attention_mask
                if "token_type_ids" in feeds:
                    feeds["token_type_ids"][row, :n] = enc.type_ids
            logits = np.asarray(self._session.run(None, feeds)[0], dtype=np.float64)
            out[idx] = logits[:, -1] if logits.ndim > 1 else logits
        return out

    def _score(self, pairs: list[tuple[str, str]]) -> Any:
        with self._lock:
            logits = self._logits(pairs)
        return 1.0 / (1.0 + np.exp(-logits)) if self._sigmoid else logits
