"""Search statements: a ``StoreQuery`` becomes one SQL statement.

One statement per query (hybrid included: both legs and the fusion run inside
PostgreSQL, so only ``limit`` rows cross the wire), and a batch is sent as one
pipeline: one round trip for all of it.

Fusion matches the embedded store (Qdrant's definitions):

* ``rrf``: score = sum over the legs of ``1 / (k + rank)``, rank from 0;
* ``dbsf``: each leg's scores are normalised by its mean ± 3 sample standard
  deviations, ``(s - (mean - 3 sd)) / (6 sd)``, a leg of one hit (or of equal
  scores) giving 0.5, then summed.

The sparse leg ranks with PostgreSQL full text (``ts_rank_cd`` over a stored
``tsvector``, normalised by log document length), which is not BM25: it has no
IDF, so scores and orders differ from the embedded store's BM25. A document
matches when it holds any query term (the query's lexemes OR-ed), like Qdrant's
text query.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from psycopg import sql

from ragline.core.types import StoreQuery
from ragline.providers.stores.pgvector.where_sql import tenant_where

#: the query text's lexemes, OR-ed: plainto_tsquery's canonical output quotes every
#: lexeme, and a lexeme never contains " & ", so swapping the operator is safe
_TSQUERY = sql.SQL(
    "replace(plainto_tsquery({cfg}::regconfig, %(qtext)s)::text, ' & ', ' | ')::tsquery")
_RANK = sql.SQL("ts_rank_cd(tsv, tq.q, 1)")


def _cols(with_vectors: bool) -> sql.SQL:
    return sql.SQL("id, text, metadata, tenant" + (", embedding" if with_vectors else ""))


def build(table: sql.Identifier, text_config: str, sq: StoreQuery
          ) -> tuple[sql.Composed, dict[str, Any]] | None:
    """The statement and parameters for ``sq``, or None when it cannot match anything
    (a sparse query without words). Rows come back as (score, id, text, metadata,
    tenant[, embedding]), best first, ties by id."""
    cond, params = tenant_where(sq.tenant, sq.where)
    tsq = _TSQUERY.format(cfg=sql.Literal(text_config))
    cols = _cols(sq.with_vectors)
    if sq.mode == "sparse":
        if not sq.text.strip():
            return None
        params["qtext"] = sq.text
        return sql.SQL(
            "WITH tq AS (SELECT {tsq} AS q) "
            "SELECT {rank} AS score, {cols} FROM {t}, tq "
            "WHERE {cond} AND tsv @@ tq.q ORDER BY score DESC, id LIMIT %(limit)s"
        ).format(tsq=tsq, rank=_RANK, cols=cols, t=table, cond=cond), {
            **params, "limit": sq.limit}
    if sq.vector is None:
        raise ValueError(f"a {sq.mode} query needs a vector")
    params["vec"] = np.asarray(sq.vector, dtype=np.float32)
    params["limit"] = sq.limit
    if sq.mode == "dense":
        thr = sql.SQL("")
        if sq.score_threshold is not None:
            params["maxdist"] = 1.0 - float(sq.score_threshold)
            thr = sql.SQL(" AND (embedding <=> %(vec)s) <= %(maxdist)s")
        return sql.SQL(
            "SELECT 1 - (embedding <=> %(vec)s) AS score, {cols} FROM {t} "
            "WHERE {cond}{thr} ORDER BY embedding <=> %(vec)s, id LIMIT %(limit)s"
        ).format(cols=cols, t=table, cond=cond, thr=thr), params
    if sq.mode != "hybrid":
        raise ValueError(f"unknown search mode {sq.mode!r}")
    params["depth"] = max(sq.candidates, sq.limit)
    params["qtext"] = sq.text
    if sq.fusion == "dbsf":
        fused = sql.SQL("CASE WHEN n = 1 OR sd IS NULL OR sd = 0 THEN 0.5 "
                        "ELSE (s - (mean - 3 * sd)) / (6 * sd) END")
    else:
        params["rrf_k"] = sq.rrf_k
        fused = sql.SQL("1.0 / (%(rrf_k)s + r)")
    stats = sql.SQL("row_number() OVER w - 1 AS r, count(*) OVER () AS n, "
                    "avg(s) OVER () AS mean, stddev_samp(s) OVER () AS sd")
    out_cols = sql.SQL("d.id, d.text, d.metadata, d.tenant"
                       + (", d.embedding" if sq.with_vectors else ""))
    return sql.SQL(
        "WITH tq AS (SELECT {tsq} AS q), "
        "dl AS (SELECT id, tenant, 1 - (embedding <=> %(vec)s) AS s FROM {t} WHERE {cond} "
        "       ORDER BY embedding <=> %(vec)s, id LIMIT %(depth)s), "
        "sl AS (SELECT id, tenant, {rank}::float8 AS s FROM {t}, tq WHERE {cond} "
        "       AND tsv @@ tq.q ORDER BY s DESC, id LIMIT %(depth)s), "
        "legs AS (SELECT id, tenant, s, {stats} FROM dl WINDOW w AS (ORDER BY s DESC, id) "
        "         UNION ALL "
        "         SELECT id, tenant, s, {stats} FROM sl WINDOW w AS (ORDER BY s DESC, id)), "
        "fused AS (SELECT id, tenant, sum({fused}) AS score FROM legs GROUP BY id, tenant "
        "          ORDER BY score DESC, id LIMIT %(limit)s) "
        "SELECT f.score, {out} FROM fused f JOIN {t} d ON d.id = f.id AND d.tenant = f.tenant "
        "ORDER BY f.score DESC, d.id"
    ).format(tsq=tsq, t=table, cond=cond, rank=_RANK, stats=stats, fused=fused,
             out=out_cols), params
