"""Search requests for Qdrant Edge: a ``StoreQuery`` becomes one ``QueryRequest``.

Kept apart from the provider so that single searches and batches
(``EdgeShard.query_batch``, measured ~2x cheaper per query than one call each for
32 hybrid SciFact queries) are built by the same code.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import qdrant_edge as q

from ragline.core.filters import And, Eq, In, Node
from ragline.core.types import StoreQuery

VECTOR = "dense"
TEXT = "text"


def linked_fields_only(where: Node | None, linked: frozenset[str]) -> bool:
    """True when ``where`` is one value of a field with per-value HNSW links (or an AND
    of such), the shape whose graph walk keeps its recall (``linked`` holds metadata
    field names). Not ``$in``/OR: measured at 100k, ``cat $in`` 3 values (15 %) walked
    the graph at recall@10 0.698 — the union of several values' links is not connected
    like one value's; nor ranges and negations, which no single value's links cover."""
    if where is None:
        return True
    if isinstance(where, Eq):
        return where.field in linked and not isinstance(where.value, bool)
    if isinstance(where, In):
        return len(where.values) == 1 and where.field in linked
    if isinstance(where, And):
        return all(linked_fields_only(c, linked) for c in where.children)
    return False


COUNT_GUARD = 1000
"""The largest search limit: a match estimate at least this large needs no exact count."""

MAX_SPLIT = 8
"""Most values of an ``$in`` that a dense search splits into one graph walk per value."""


def split_by_value(where: Node | None, linked: frozenset[str]) -> list[Node] | None:
    """``where`` as alternatives that each select one value of a linked field (their
    union is ``where``), or None when it is not an ``$in`` of 2..``MAX_SPLIT`` values of a
    linked field (alone or ANDed with single-value conditions on linked fields).

    Why: one value's points are connected by their own HNSW links, so a walk per value
    keeps recall@10 at ~1.0, where a walk over the union of several values' points
    does not (0.688 measured for 3 of 20 values at 50k) and exact search over the
    union grows with the collection. Not for ranges over integer fields: walks per
    integer value measured recall@10 0.963 for ``tier $lte 1`` at 50k, against 0.998
    for one walk over the range (BENCHMARKS.md, "Scale")."""
    if isinstance(where, In):
        if (where.field in linked and 2 <= len(where.values) <= MAX_SPLIT
                and not any(isinstance(v, bool) for v in where.values)):
            return [Eq(where.field, v) for v in dict.fromkeys(where.values)]
        return None
    if isinstance(where, And):
        split = [(i, p) for i, c in enumerate(where.children)
                 if isinstance(c, In) and (p := split_by_value(c, linked)) is not None]
        if len(split) != 1:
            return None
        at, parts = split[0]
        rest = [c for i, c in enumerate(where.children) if i != at]
        if not all(linked_fields_only(c, linked) for c in rest):
            return None
        return [And((*rest, part)) for part in parts]
    return None


def search_params(
    shard: Any, info: Any, flt: Any, bound: int, ef: int, linked: bool
) -> tuple[Any, int]:
    """The plan for one dense search, and the number of points its filter matches.

    Measured (BENCHMARKS.md, "Scale"): with per-value HNSW links for the filtered
    fields (``linked``), filtered HNSW with the plain ``ef`` keeps recall@10 >= 0.99
    at every selectivity, so it is used whatever the count; without them it
    collapses between Edge's full-scan threshold and ~40 % selectivity (issue 2), so
    small match sets are searched exactly, mid-sized ones with ACORN, broad ones
    with a wide ``ef``. The match count comes from Edge's cheap estimate, made exact near the
    exact-search ``bound``; ``info`` is ``shard.info()``, read once per batch.
    """
    total = max(int(info.points_count), 1)
    if info.indexed_vectors_count == 0:
        return None, total  # nothing indexed: every segment is searched exhaustively
    n = int(shard.count(q.CountRequest(filter=flt, exact=False)))
    if (n >= total or linked) and n >= COUNT_GUARD:
        # the graph is used whatever the count, and an estimate of at least any limit
        # makes the never-short check "fewer than asked for": no exact count needed
        # (measured: it was 12 of 14 ms of an unfiltered search at 50k points)
        return q.SearchParams(hnsw_ef=ef), n
    if n <= 2 * bound:
        n = int(shard.count(q.CountRequest(filter=flt, exact=True)))
    if n >= total or linked:
        # the filter keeps everything, or its fields have per-value links: Edge's own
        # planner scans small match sets (below its full-scan threshold) and walks the
        # graph above; measured at 30k (bench_filter_plans): 1.5k and 4.5k matches as
        # fast as exact, 15k matches 10x faster than exact (1.2 vs 12.1 ms p50) at 0.997
        return q.SearchParams(hnsw_ef=ef), n
    if n <= bound:
        return q.SearchParams(exact=True), n
    if n <= total // 2:
        return q.SearchParams(hnsw_ef=ef, acorn=q.AcornSearchParams(
            enable=True, max_selectivity=0.5)), n
    return q.SearchParams(hnsw_ef=max(ef, 512)), n


EXACT = q.SearchParams(exact=True)


def build_request(sq: StoreQuery, flt: Any, params: Any) -> Any:
    """The Edge request for ``sq`` under filter ``flt``; None when it cannot match
    anything (a sparse query without words).

    Hybrid: dense and BM25 candidates under one filter, fused inside Edge —
    ``rrf``: score = sum of 1 / (k + rank), rank from 0; ``dbsf``: each list's
    scores normalised by its mean ± 3 standard deviations, then summed.
    """
    if sq.mode == "sparse":
        if not sq.text.strip():
            return None
        return q.QueryRequest(limit=sq.limit, query=q.TextQuery(TEXT, sq.text), filter=flt,
                              with_payload=True, with_vector=sq.with_vectors)
    if sq.vector is None:
        raise ValueError(f"a {sq.mode} query needs a vector")
    nearest = q.Query.Nearest(np.asarray(sq.vector, np.float32).tolist(), using=VECTOR)
    if sq.mode == "dense":
        return q.QueryRequest(limit=sq.limit, query=nearest, filter=flt, with_payload=True,
                              with_vector=sq.with_vectors, score_threshold=sq.score_threshold,
                              params=params)
    if sq.mode != "hybrid":
        raise ValueError(f"unknown search mode {sq.mode!r}")
    depth = max(sq.candidates, sq.limit)
    return q.QueryRequest(
        limit=sq.limit,
        prefetches=[
            q.Prefetch(limit=depth, filter=flt, params=params, query=nearest),
            q.Prefetch(limit=depth, filter=flt, query=q.TextQuery(TEXT, sq.text)),
        ],
        query=q.Fusion.Dbsf() if sq.fusion == "dbsf"  # type: ignore[arg-type]
        else q.Fusion.Rrf(k=sq.rrf_k),
        with_payload=True, with_vector=sq.with_vectors)
