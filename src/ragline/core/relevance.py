"""The one relevance scale, and the one threshold rule over it.

A hit's relevance is ``0.5 + cosine/2`` between the query's and the chunk's
embeddings, in [0, 1] — MongoDB Atlas's ``vectorSearchScore`` for cosine indexes,
the scale spec 001's 0.75 was chosen on. It depends only on the query and the
chunk, never on the mode, fusion or reranker that ranked the hit, so a threshold
keeps the same hits in dense, sparse and hybrid search.

Search (each hit's ``relevance`` and ``relevance_threshold``), the chat
(``rag_relevance_threshold`` on the top document) and the answer services' hits
all take their number from here, through the search pipeline:

* no query vector or no chunk vector: no relevance (``None``), which never passes
  a threshold, however low;
* a vector without direction (all zeros) or of another dimension: 0.5, the middle
  of the scale (input validation refuses such vectors, so only a broken embedder
  could produce one);
* opposite directions: 0.0 (the scale is clamped to [0, 1]);
* a threshold is passed at equality (``>=``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np


def relevance_to(query: Any) -> Callable[[Any], float | None]:
    """The relevance of many chunks to one query: the query's norm and its float64 copy
    are made once (per hit, ``np.linalg.norm`` and the cast were ~20 us of a search's
    ~60 us of relevance for 10 hits, measured). ``np.linalg.norm`` of a real vector is
    ``sqrt(x.dot(x))``, and ``np.dot`` of a float32 and a float64 vector casts the
    float32 one first, so every caller gets the same number bit for bit."""
    if query is None:
        return lambda vector: None
    qn = float(np.linalg.norm(query))  # of the query as given (float32 from an embedder)
    q64 = np.asarray(query, dtype=np.float64)
    shape = q64.shape

    def one(vector: Any) -> float | None:
        if vector is None:
            return None
        v = np.asarray(vector, dtype=np.float64)
        vn = math.sqrt(v.dot(v)) if v.ndim == 1 else float(np.linalg.norm(v))
        if qn == 0 or vn == 0 or v.shape != shape:
            return 0.5
        cos = float(q64.dot(v) / (qn * vn))
        return min(1.0, max(0.0, 0.5 + cos / 2))

    return one


def relevance_of(query: Any, vector: Any) -> float | None:
    """:func:`relevance_to` for one chunk."""
    return relevance_to(query)(vector)


def passes(relevance: float | None, threshold: float) -> bool:
    """Whether a relevance reaches a threshold: at equality it does; none never does."""
    return relevance is not None and relevance >= threshold
