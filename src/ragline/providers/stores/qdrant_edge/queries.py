"""Search requests for Qdrant Edge: a ``StoreQuery`` becomes one ``QueryRequest``.

Kept apart from the provider so that single searches and batches
(``EdgeShard.query_batch``, measured ~2x cheaper per query than one call each for
32 hybrid SciFact queries) are built by the same code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import qdrant_edge as q

from ragline.core.filters import And, Eq, In, Node
from ragline.core.types import StoreQuery
from ragline.providers.stores.qdrant_common.filters import field_path

VECTOR = "dense"
TEXT = "text"


def linked_fields_only(where: Node | None, linked: frozenset[str]) -> bool:
    """True when ``where`` is one string value of a field with per-value HNSW links that
    keep a walk's recall (or an AND of such): the shape walked through the graph whatever
    its match count. ``linked`` holds metadata field names (keyword fields only, see
    ``QdrantEdgeStore._linked``). Not ``$in``/OR: measured at 100k, ``cat $in`` 3 values
    (15 %) walked the graph at recall@10 0.698-0.709 — the union of several values'
    links is not connected like one value's; nor ranges and negations, which no single
    value's links cover."""
    if where is None:
        return True
    if isinstance(where, Eq):
        return where.field in linked and isinstance(where.value, str)
    if isinstance(where, In):
        return (len(where.values) == 1 and where.field in linked
                and isinstance(where.values[0], str))
    if isinstance(where, And):
        return all(linked_fields_only(c, linked) for c in where.children)
    return False


MAX_SPLIT = 8
"""Most values of an ``$in`` that a dense search splits into one graph walk per value."""

BROAD_SHARE = 0.45
"""Share of a shard's points from which a filter is searched by one plain filtered HNSW
walk with the store's ``ef``. Measured at 100k (bench_filter_plans.py, clustered data,
ef 256, no links involved): recall@10 0.962 at 30 %, 0.991 at 40 %, 0.996 at 45 %, 0.998
at 50 %, 1.000 at 75 %; below that the walk loses recall (0.93 at 25 %). At ef 128 (the
default since): 0.996 at 45 % and 0.999 at 50 % of 100k, 0.995 and 0.997 of 1M."""


def linked_in(where: Node | None, linked: frozenset[str]) -> In | None:
    """The ``$in`` of 2..``MAX_SPLIT`` string values of a linked field that ``where`` is
    (alone, or ANDed with single-value conditions on linked fields), else None."""
    if isinstance(where, In):
        if (where.field in linked and 2 <= len(where.values) <= MAX_SPLIT
                and all(isinstance(v, str) for v in where.values)):
            return where
        return None
    if isinstance(where, And):
        ins = [c for c in where.children if isinstance(c, In) and linked_in(c, linked)]
        if len(ins) != 1:
            return None
        rest = [c for c in where.children if c is not ins[0]]
        if not all(linked_fields_only(c, linked) for c in rest):
            return None
        return ins[0]
    return None


def split_by_value(where: Node | None, linked: frozenset[str]) -> list[Node] | None:
    """``where`` as alternatives that each select one value of a linked field (their
    union is ``where``), or None when it has no :func:`linked_in`.

    Why: one value's points are connected by their own HNSW links, so a walk per value
    keeps recall@10 at ~1.0. Used when some of the values have no links of their own
    (fewer points than Edge's full-scan threshold: one walk over the union then ran on
    the plain graph, recall@10 0.688 for 3 of 20 values at 50k, 0.56-0.74 at 100k) and
    the union is too large for exact search. Not for ranges over integer fields: Edge's
    integer indexes do not give one value's points walkable links (a walk for
    ``tier = 0``, 25 % of 100k points, measured recall@10 0.931, and walks per value for
    ``tier $lte 1`` 0.935-0.963, against 0.996 for one walk over the range)."""
    node = linked_in(where, linked)
    if node is None:
        return None
    values = [Eq(node.field, v) for v in dict.fromkeys(node.values)]
    if isinstance(where, And):
        rest = [c for c in where.children if c is not node]
        return [And((*rest, part)) for part in values]
    return list(values)


def all_values_linked(shard: Any, info: Any, node: In, links_min: int) -> bool:
    """Whether every value of ``node`` has its own HNSW links: an index build gives them
    to a value with at least ``links_min`` points (Edge's full-scan threshold in points)
    *in a segment*, and Edge scans smaller value sets. Then one walk over the union keeps
    its recall: measured at 300k (15,000 points a value), ``cat $in`` 3 values 1.000 at
    ef 128-512, 8 ms p50 against 21 ms for walks one per value.

    The counts are the shard's (Edge's estimate of one keyword value is its index's
    count); a value's share of an indexed segment is taken as its count scaled by the
    indexed share of the points and divided among the segments but one (the appendable
    one), so points written since the last build, or a shard in several segments, never
    make a value look linked when its segment's links were built without it."""
    total = max(int(info.points_count), 1)
    share = int(info.indexed_vectors_count) / total / max(int(info.segments_count) - 1, 1)
    for v in dict.fromkeys(node.values):
        one = q.Filter(must=[q.FieldCondition(field_path(node.field), match=q.MatchValue(str(v)))])
        if int(shard.count(q.CountRequest(filter=one, exact=False))) * share < links_min:
            return False
    return True


PlanKind = Literal["scan", "exact", "links", "broad", "split", "acorn"]


@dataclass(frozen=True)
class DensePlan:
    """How one dense search (or a hybrid search's dense part) runs.

    ``kind``: ``scan`` (nothing indexed: Edge searches every segment exhaustively),
    ``exact`` (brute force over the filter's matches), ``links`` (one HNSW walk; no
    filter, one value of linked fields, or an ``$in`` of linked values that all have
    their own links), ``broad`` (one plain filtered HNSW walk,
    the filter keeps at least ``BROAD_SHARE`` of the points), ``split`` (one walk per
    value of an ``$in``, merged by score; ``parts`` are the per-value filters) or
    ``acorn``. ``estimate``: Edge's estimate of the filter's match count. Graph plans
    (``guarded``) can come back short; a short answer is redone exactly."""

    kind: PlanKind
    params: Any
    estimate: int
    parts: tuple[Node, ...] = ()

    @property
    def guarded(self) -> bool:
        return self.kind not in ("scan", "exact")


def dense_plan(shard: Any, info: Any, flt: Any, where: Node | None, linked: frozenset[str],
               bound: int, ef: int, links_min: int, split: bool = True) -> DensePlan:
    """The plan for one dense search, from Edge's estimate of the filter's match count
    (no exact count: it measured 1.7 ms for 15k and 19 ms for 50k matches at 100k, more
    than the search it was choosing). ``info`` is ``shard.info()``, read once per batch;
    ``links_min``: the fewest points a value has links for (Edge's full-scan threshold in
    points); ``split``: whether per-value walks may be used (dense searches only).

    Measured per filter shape at 100k (BENCHMARKS.md, "Filtered search plans"): one value
    of a linked field walks its links (Edge scans value sets below its full-scan
    threshold itself), and so does an ``$in`` of linked values that all have links;
    small match sets are searched exactly; filters keeping at least
    ``BROAD_SHARE`` of the points by one plain walk (``tier $lte 1``, 50 %: recall@10
    0.997-1.000, p50 x0.05-0.09 of the count + ACORN it had); an ``$in`` of linked values
    too large for exact search by one walk per value; the rest (a mid-selectivity
    filter on unlinked fields, a range, an integer value) by ACORN, slow but correct (a
    plain walk there measured recall 0.33-0.40 at 10 % and 0.93 at 25 %)."""
    total = max(int(info.points_count), 1)
    if info.indexed_vectors_count == 0:
        return DensePlan("scan", None, total)
    n = int(shard.count(q.CountRequest(filter=flt, exact=False)))
    graph = q.SearchParams(hnsw_ef=ef)
    if n >= total or linked_fields_only(where, linked):
        return DensePlan("links", graph, n)
    union = linked_in(where, linked)
    if union is not None and all_values_linked(shard, info, union, links_min):
        return DensePlan("links", graph, n)
    if n <= bound:
        return DensePlan("exact", q.SearchParams(exact=True), n)
    if n >= BROAD_SHARE * total:
        return DensePlan("broad", graph, n)
    parts = split_by_value(where, linked) if split else None
    if parts:
        return DensePlan("split", graph, n, tuple(parts))
    return DensePlan("acorn", q.SearchParams(hnsw_ef=ef, acorn=q.AcornSearchParams(
        enable=True, max_selectivity=0.5)), n)


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
