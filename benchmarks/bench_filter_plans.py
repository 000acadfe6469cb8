"""Which search plan per filter shape: exact vs filtered HNSW (per-value links) vs ACORN.

The store picks a plan per query from the filter's match count
(``queries.search_params``); this measures each plan on the same built shard so
the choice is measured, not guessed. Library level (no HTTP): builds ``--size``
points of bench_scale's data, runs the background build (``build_index``), then
times every plan for every filter shape, one query at a time.

    python benchmarks/bench_filter_plans.py --size 50000
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import qdrant_edge as q

sys.path.insert(0, str(Path(__file__).parent))
from bench_scale import DIM, SHAPES, Data

from ragline.core.filters import Limits, parse_where
from ragline.core.types import Record
from ragline.providers.stores.qdrant_edge.provider import (
    QdrantEdgeConfig,
    QdrantEdgeStore,
)
from ragline.providers.stores.qdrant_edge.queries import VECTOR
from ragline.providers.stores.qdrant_edge.translate import tenant_filter

PLANS = {
    "exact": q.SearchParams(exact=True),
    "hnsw ef=256 (links)": q.SearchParams(hnsw_ef=256),
    "acorn ef=256": q.SearchParams(hnsw_ef=256, acorn=q.AcornSearchParams(
        enable=True, max_selectivity=0.5)),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=50_000)
    ap.add_argument("--queries", type=int, default=100)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-plans-"))
    try:
        store = QdrantEdgeStore(QdrantEdgeConfig(path=work))
        store.create_shard("k", DIM)
        data = Data(args.size)
        t = time.perf_counter()
        for lo in range(0, args.size, 1000):
            v = data.vectors(lo, lo + 1000)
            store.upsert("k", [Record(f"d{i}", "t", {
                "cat": f"c{data.cat[i]}", "tier": int(data.tier[i])}, v[i - lo])
                for i in range(lo, lo + 1000)])
        print(f"upsert {args.size / (time.perf_counter() - t):.0f}/s", file=sys.stderr)
        t = time.perf_counter()
        store.build_index("k")
        print(f"build {time.perf_counter() - t:.0f} s", file=sys.stderr)
        sh = store._shards["k"]
        rng = np.random.default_rng(99)
        queries = data.centres[rng.integers(0, 1000, args.queries)] + rng.normal(
            size=(args.queries, DIM)).astype(np.float32) * 0.6
        allv = data.vectors(0, args.size)
        allv /= np.linalg.norm(allv, axis=1, keepdims=True)
        scores = (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ allv.T
        print("| filter | plan | p50 ms | p95 ms | recall@10 |\n|---|---|---:|---:|---:|")
        for name, where in SHAPES.items():
            s = np.where(data.mask(where)[None, :], scores, -np.inf)
            truth = [{f"d{i}" for i in row} for row in np.argpartition(-s, 10, axis=1)[:, :10]]
            flt = tenant_filter("default", parse_where(where, Limits()) if where else None)
            for plan, params in PLANS.items():
                lat, rec = [], []
                for qi, qv in enumerate(queries):
                    req = q.QueryRequest(limit=10, query=q.Query.Nearest(qv.tolist(), using=VECTOR),
                                         filter=flt, with_payload=True, params=params)
                    t = time.perf_counter()
                    pts = sh.shard.query(req)
                    lat.append((time.perf_counter() - t) * 1000)
                    got = {p.payload["doc_id"] for p in pts}
                    rec.append(len(got & truth[qi]) / 10)
                lat.sort()
                print(f"| {name} | {plan} | {statistics.median(lat):.2f} | "
                      f"{lat[int(0.95 * len(lat)) - 1]:.2f} | {np.mean(rec):.3f} |")
        store.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
