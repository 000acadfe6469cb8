"""Micro-batching of concurrent single-text embeddings (the search path).

Why: under concurrent search, each request embeds one short query. A model call
has a fixed overhead, and running the model on the event loop would stall every
other request, so calls are coalesced (``ragline.core.coalesce``): a query that
finds a worker free is embedded at once; queries that arrive while every worker is
busy leave together (up to ``max_batch``) in one ``embed()`` in a worker thread, each
caller handed its row (``max_wait_ms > 0``: they also wait that long for company,
the default before issue 38). One batch takes one input type.

Up to ``workers`` batches run at once: the local model runs each batch on one
core, so one batch at a time would leave the second core idle meanwhile. A text
the embedder's cache already holds (``CachedEmbedder.lookup``) is answered at
once, without waiting for a batch or a thread.

A batch the model fails is embedded text by text, so a text that breaks the model
fails its own caller only; an outage (``ServiceUnavailable``, ``ProviderError``: the
upstream is down or refused, and would refuse every text again) reaches every caller
of that batch at once instead of being retried once per text.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ragline.core.coalesce import Coalescer
from ragline.errors import ProviderError, ServiceUnavailable
from ragline.observability import metrics
from ragline.providers.embedders.base import Embedder, InputType
from ragline.providers.embedders.util import check_inputs

Vec = npt.NDArray[np.float32]


class MicroBatcher:
    """``await batcher.embed_one(text, input_type)`` -> 1-D float32 vector."""

    def __init__(
        self, embedder: Embedder, max_batch: int = 64, max_wait_ms: float = 0, workers: int = 1,
        wait_when_idle: bool = False,
    ) -> None:
        self.embedder = embedder
        self._lookup = getattr(embedder, "lookup", None)  # a cache in front of the model
        self._coalescer: Coalescer[InputType, str, Vec] = Coalescer(
            self._embed, max_batch=max_batch, max_wait_ms=max_wait_ms, workers=workers,
            name="embed", on_batch=metrics.observe_batch, isolate=_one_text_may_be_at_fault,
            wait_when_idle=wait_when_idle)

    def _embed(self, input_type: InputType, texts: list[str]) -> list[Vec]:
        vecs = self.embedder.embed(texts, input_type)
        if len(vecs) != len(texts):
            raise RuntimeError(f"embedder returned {len(vecs)} vectors for {len(texts)} texts")
        return [np.asarray(v, dtype=np.float32) for v in vecs]

    @property
    def max_batch(self) -> int:
        return self._coalescer.max_batch

    @property
    def workers(self) -> int:
        return self._coalescer.workers

    @property
    def batches(self) -> int:
        """embed() calls made, for metrics and tests."""
        return self._coalescer.batches

    async def embed_one(self, text: str, input_type: InputType = "query") -> Vec:
        check_inputs([text], input_type)
        if self._lookup is not None:
            hit = self._lookup(text, input_type)
            if hit is not None:
                return np.asarray(hit, dtype=np.float32)
        return await self._coalescer.submit(input_type, text)

    def stats(self) -> dict[str, float]:
        """For ``/info``: how well concurrent queries are being batched."""
        s = self._coalescer.stats()
        return {"batches": s["batches"], "texts": s["items"], "mean_batch": s["mean_batch"]}

    async def aclose(self) -> None:
        await self._coalescer.aclose()


def _one_text_may_be_at_fault(exc: BaseException) -> bool:
    """Whether a failed batch is worth embedding text by text (see the module doc)."""
    return not isinstance(exc, (ServiceUnavailable, ProviderError))
