"""The default embedder: all-MiniLM-L6-v2 on onnxruntime, on the CPU, offline.

Why onnxruntime and not sentence-transformers: the fused int8 graph built by
``scripts/build_onnx_model.py`` is ~1.5-2x faster than torch fp32 here, starts in
~0.5 s instead of ~7 s, and keeps torch (1.6 GB) out of the runtime. Nothing in
this module imports torch or touches the Hugging Face Hub.

Two graphs, routed by length. Dynamic int8 serves almost everything: against
the fp32 graph, cosine mean 0.992 and min 0.985 over all 1,109 SciFact queries;
against sentence-transformers fp32, min 0.978 over the 30 mixed sentences of
tests/providers/embedders/test_local_onnx_accuracy.py (a URL of 22 word pieces);
SciFact retrieval quality is unchanged (hybrid nDCG@10 0.7327 int8, 0.7299 fp32).
The tiniest inputs ("ok", "a") are where int8 is worst, and they cost next to
nothing in fp32, so texts of at most ``fp32_max_tokens`` word pieces (default 8,
[CLS]/[SEP] included) run on the fused fp32 graph (``model_fp32.onnx``, exact).
Queries are mostly longer: int8 makes the search path ~1.6x cheaper than fp32
(BENCHMARKS.md). The route depends only on the text, so a text always gets the
same vector.
The fp32 graph is loaded on the first such text, not with the int8 one: it holds
~98 MB of weights that a process embedding passages only (ingestion) never needs.

Batches of at most ``max_batch_tokens`` padded word pieces (2,048: 8 passages of 256,
or the 32 texts of ``batch_size`` when they are queries): onnxruntime's arena keeps the
memory of the largest batch it ran, and 32 SciFact passages took it from 118 to 492 MB
RSS, 8 to 226 MB, at the same CPU per passage (measured, BENCHMARKS.md "Where the bytes
and milliseconds go").

``model`` is either a known name (resolved to ``<models dir>/<name>-onnx-int8``,
where the models dir is ``models_dir`` / ``$RAGLINE_MODELS_DIR`` /
``~/.cache/ragline/models/<recipe hash>``, see ``model_cache``) or a directory
holding ``model.onnx`` and ``tokenizer.json`` (plus an optional ``ragline_model.json`` manifest).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from pydantic import Field

from ragline.errors import InvalidInput, ModelNotLoaded
from ragline.providers.base import Health, ProviderConfig, config_schema
from ragline.providers.embedders.base import InputType
from ragline.providers.embedders.model_cache import default_models_dir
from ragline.providers.embedders.util import check_inputs, l2_normalise

log = logging.getLogger(__name__)

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# Known names -> directory name written by scripts/build_onnx_model.py.
KNOWN_MODELS = {
    "all-MiniLM-L6-v2": "all-MiniLM-L6-v2-onnx-int8",
    "sentence-transformers/all-MiniLM-L6-v2": "all-MiniLM-L6-v2-onnx-int8",
}
# Below this many word pieces in a call, one worker does it all (no hand-off cost).
PARALLEL_MIN_TOKENS = 1024
BUILD_HINT = "build it with: make install (or python scripts/ensure_model.py)"


# Extra padded word pieces a chunk may carry, as a share of its real ones.
MAX_PADDING = 0.1


def length_chunks(order: list[int], lens: list[int], size: int,
                  max_tokens: int | None = None) -> list[list[int]]:
    """Cut ``order`` (indices sorted by ``lens``) into chunks of at most ``size`` texts
    and ``max_tokens`` padded word pieces (one text alone may exceed it) whose padding
    stays under ``MAX_PADDING``.

    Why: a batch is padded to its longest text, and on this CPU onnxruntime
    gains at most ~15-20 % per text from batching equal lengths, while padding
    costs in full: 64 random SciFact queries in one call cost 11.6 ms each, one
    at a time 6.2 ms (22 word pieces on average, some over 50). So a batch
    is only as wide as its lengths allow; passages (all near max_length) still
    fill whole chunks.
    """
    chunks: list[list[int]] = []
    chunk: list[int] = []
    real = 0
    for i in order:
        n = lens[i]
        # sorted ascending: adding i pads every text in the chunk to n
        if chunk and (len(chunk) >= size or n * (len(chunk) + 1) > (real + n) * (1 + MAX_PADDING)
                      or (max_tokens is not None and n * (len(chunk) + 1) > max_tokens)):
            chunks.append(chunk)
            chunk, real = [], 0
        chunk.append(i)
        real += n
    if chunk:
        chunks.append(chunk)
    return chunks


class LocalOnnxConfig(ProviderConfig):
    model: str = Field(DEFAULT_MODEL, description="Known model name or a local model directory.")
    models_dir: Path | None = Field(
        None, description="Where named models are built (default $RAGLINE_MODELS_DIR or "
        "~/.cache/ragline/models/<recipe hash>)."
    )
    max_length: int = Field(256, ge=8, le=512, description="Word pieces per input, incl. specials.")
    batch_size: int = Field(32, ge=1, le=1024, description="Texts per onnxruntime call.")
    max_batch_tokens: int = Field(
        2048, ge=8, description="Padded word pieces per onnxruntime call (8 passages of 256; "
        "32 queries of ~22 fit): its arena keeps the memory of the largest batch it ran, "
        "+108 MB for 8 SciFact passages against +374 MB for 32, at the same CPU per passage.")
    threads: int | None = Field(
        None, ge=1, description="Batches run in parallel (default: all cores), each on one core."
    )
    fp32_max_tokens: int = Field(
        8, ge=0, description="Texts up to this many word pieces use model_fp32.onnx if present "
        "(0: always int8)."
    )


def models_dir(configured: Path | None = None) -> Path:
    if configured is not None:  # Settings.models_dir (RAGLINE_MODELS_DIR)
        return configured
    return default_models_dir()


def resolve_model_dir(model: str, configured_dir: Path | None = None) -> Path:
    """Turn a config ``model`` into a directory with model.onnx + tokenizer.json."""
    if model in KNOWN_MODELS:
        path = models_dir(configured_dir) / KNOWN_MODELS[model]
        missing_msg = f"Embedding model '{model}' is not built at {path}; {BUILD_HINT}"
    else:
        path = Path(model).expanduser()
        if not path.is_dir():
            known = ", ".join(sorted(KNOWN_MODELS))
            raise InvalidInput(
                f"Unknown local embedding model '{model}': not a known name ({known}) "
                "and not a directory"
            )
        missing_msg = f"Model directory {path} needs model.onnx and tokenizer.json"
    if not ((path / "model.onnx").is_file() and (path / "tokenizer.json").is_file()):
        raise ModelNotLoaded(missing_msg)
    return path.resolve()


class LocalOnnxEmbedder:
    """Mean-pooled, L2-normalised sentence embeddings from an ONNX BERT-style encoder.

    Thread-safe: an ORT ``InferenceSession.run`` may be called concurrently, and the
    tokenizers are never mutated after loading. The session is loaded lazily (under
    a lock) so building the provider is cheap and a CLI command that never embeds
    does not pay for it.

    Parallelism is across batches, not inside them: each session runs single-threaded
    and a large ``embed()`` is split over ``threads`` workers. ORT's intra-op threads
    meet at a barrier after every operator, so on a shared CPU one descheduled thread
    stalls the rest: measured under load, 2 intra-op threads gave 7.0 passages/s,
    1 thread 8.5, two single-threaded batches in parallel 11.8.
    """

    name: ClassVar[str] = "local"
    kind: ClassVar[str] = "embedder"
    Config: ClassVar[type[ProviderConfig]] = LocalOnnxConfig
    CAPABILITIES: ClassVar[list[str]] = ["embeddings", "local", "offline"]

    def __init__(self, config: LocalOnnxConfig | None = None, **overrides: Any) -> None:
        self.config = config or LocalOnnxConfig(**overrides)
        self.path = resolve_model_dir(self.config.model, self.config.models_dir)
        manifest_file = self.path / "ragline_model.json"
        self.manifest: dict[str, Any] = (
            json.loads(manifest_file.read_text()) if manifest_file.is_file() else {}
        )
        self._max_length = min(
            self.config.max_length, int(self.manifest.get("max_seq_length", 512))
        )
        self._dimension: int | None = self.manifest.get("dimension")
        self._lock = threading.Lock()
        self._session: Any = None
        self._fp32_session: Any = None  # loaded by the first short text (_short_session)
        self._has_fp32 = (self.config.fp32_max_tokens > 0
                          and (self.path / "model_fp32.onnx").is_file())
        self._pad_id = 0
        self._workers = self.config.threads or (os.cpu_count() or 1)
        self._executor: ThreadPoolExecutor | None = None
        self._tok: Any = None
        self._count_tok: Any = None
        size = (self.path / "model.onnx").stat().st_size
        digest = hashlib.sha256(f"{self.path}:{size}".encode()).hexdigest()[:12]
        self._connection_id = f"local:{digest}"

    def __repr__(self) -> str:
        return f"LocalOnnxEmbedder(model={self.model!r}, path='{self.path}')"

    def close(self) -> None:
        """Stop the worker threads (the sessions are freed with the object)."""
        with self._lock:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None

    # -- loading ---------------------------------------------------------------
    def _session_for(self, filename: str) -> Any:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1  # parallelism is across batches, see embed()
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        return ort.InferenceSession(
            str(self.path / filename), opts, providers=["CPUExecutionProvider"]
        )

    def _load(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            from tokenizers import Tokenizer

            # MiniLM's tokenizer.json has Fixed(128) padding and truncation 128 baked
            # in: drop both; we truncate at max_length and pad per batch ourselves.
            tok = Tokenizer.from_file(str(self.path / "tokenizer.json"))
            tok.no_padding()
            tok.enable_truncation(max_length=self._max_length)
            count_tok = Tokenizer.from_file(str(self.path / "tokenizer.json"))
            count_tok.no_truncation()
            count_tok.no_padding()
            pad_id = tok.token_to_id("[PAD]")
            self._pad_id = 0 if pad_id is None else pad_id

            session = self._session_for("model.onnx")
            if self._dimension is None:  # no manifest: ask the graph, or run it once
                last = session.get_outputs()[0].shape[-1]
                probe = [tok.encode("dimension probe")]
                dim = last if isinstance(last, int) else self._run(session, probe).shape[1]
                self._dimension = int(dim)
            self._tok, self._count_tok = tok, count_tok
            self._session = session
            log.info("loaded embedding model %s from %s", self.model, self.path)

    # -- protocol --------------------------------------------------------------
    @property
    def model(self) -> str:
        return str(self.manifest.get("name") or self.config.model)

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._load()
        assert self._dimension is not None
        return self._dimension

    @property
    def max_input_tokens(self) -> int:
        return self._max_length

    @property
    def connection_id(self) -> str:
        """Local models have no endpoint; the model files' identity is what matters."""
        return self._connection_id

    def embed(
        self, texts: list[str], input_type: InputType = "document"
    ) -> npt.NDArray[np.float32]:
        check_inputs(texts, input_type)
        self._load()
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        # one text (a search query): encode, not encode_batch (0.06 against 0.16 ms p50)
        encs = (self._tok.encode_batch(list(texts)) if len(texts) > 1
                else [self._tok.encode(texts[0])])
        lens = [len(e.ids) for e in encs]
        # Sorted by length, cut into chunks of near-equal length (see length_chunks).
        order = sorted(range(len(texts)), key=lambda i: lens[i])
        cut = self.config.fp32_max_tokens if self._has_fp32 else 0
        short = [i for i in order if lens[i] <= cut]
        routes = [(self._short_session() if short else None, short),
                  (self._session, order[len(short) :])]
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        parallel = sum(lens) >= PARALLEL_MIN_TOKENS  # worth all workers
        jobs: list[tuple[Any, list[int]]] = []
        for session, idx in routes:
            size = self.config.batch_size
            if parallel:
                size = min(size, -(-len(idx) // self._workers))
            jobs += [(session, chunk) for chunk in
                     length_chunks(idx, lens, size, self.config.max_batch_tokens)]

        def run(job: tuple[Any, list[int]]) -> None:
            session, chunk = job
            out[chunk] = self._run(session, [encs[i] for i in chunk])

        if len(jobs) == 1 or not parallel or self._workers == 1:
            for job in jobs:
                run(job)
        else:
            list(self._pool().map(run, jobs))
        return out

    def _short_session(self) -> Any:
        """The fp32 graph for texts of at most ``fp32_max_tokens`` word pieces, loaded
        on the first one."""
        if self._fp32_session is None:
            with self._lock:
                if self._fp32_session is None:
                    self._fp32_session = self._session_for("model_fp32.onnx")
        return self._fp32_session

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    self._workers, thread_name_prefix="ragline-onnx"
                )
            return self._executor

    def _run(self, session: Any, encs: list[Any]) -> npt.NDArray[np.float32]:
        width = max(len(e.ids) for e in encs)
        ids = np.full((len(encs), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(encs), width), dtype=np.int64)
        types = np.zeros((len(encs), width), dtype=np.int64)
        for row, e in enumerate(encs):
            n = len(e.ids)
            ids[row, :n], mask[row, :n], types[row, :n] = e.ids, e.attention_mask, e.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        names = [i.name for i in session.get_inputs()]
        hidden = session.run(None, {k: feeds[k] for k in names})[0]
        m = mask[..., None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1.0)
        return l2_normalise(pooled)

    def count_tokens(self, text: str) -> int:
        """Word pieces including [CLS]/[SEP], untruncated.

        So ``count_tokens(t) <= max_input_tokens`` exactly when ``t`` is embedded
        without truncation.
        """
        self._load()
        return len(self._count_tok.encode(text).ids)

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return config_schema(LocalOnnxConfig)

    def capabilities(self) -> list[str]:
        return list(self.CAPABILITIES)

    def health(self) -> Health:
        details: dict[str, Any] = {"model": self.model, "path": str(self.path)}
        try:
            self._load()
            details.update(dimension=self.dimension, max_input_tokens=self.max_input_tokens)
            return Health.now("ok", details)
        except Exception as exc:  # health reports, it does not raise
            return Health.now("down", details, error=f"{type(exc).__name__}: {exc}")
