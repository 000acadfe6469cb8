"""What the tenant condition costs a search in Qdrant Edge (issue 18 item 2).

Every ragline search is scoped to the caller's tenant by a ``tenant`` condition, which
Edge checks at every point its graph walk visits. On a shard whose points are all one
tenant's, ragline leaves it out (``Generation.alone``). This measures that choice on a
built generation of ``bench_scale.py`` (its data recipe and queries): each query with and
without the condition, paired and alternating which goes first, per filter shape; the
plan's default walk (``hnsw_ef`` 128), payloads and vectors returned as ragline asks.

Run on a built generation (no server may have it open)::

    python benchmarks/bench_tenant_condition.py \
        /tmp/s1m/w/data/collections/<shard>/g3 --size 1000000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as q

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_scale as bs

SHAPES: dict[str, list[Any]] = {
    "unfiltered": [],
    "cat = one value (5%)": [q.FieldCondition("metadata.cat", match=q.MatchValue("c3"))],
    "cat $in 3 values (15%), one walk": [
        q.FieldCondition("metadata.cat", match=q.MatchAny(["c1", "c2", "c7"]))],
    "tier $lte 1 (50%)": [q.FieldCondition("metadata.tier", range=q.RangeFloat(lte=1))],
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("generation", type=Path, help="a built generation directory (g<N>)")
    ap.add_argument("--size", type=int, default=100_000, help="bench_scale.py's --size")
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    shard = q.EdgeShard.load(str(args.generation))
    data = bs.Data(args.size)
    rng = np.random.default_rng(99)
    queries = data.centres[rng.integers(0, 1000, args.queries)] + rng.normal(
        size=(args.queries, bs.DIM)).astype(np.float32) * 0.6
    tenant = q.FieldCondition("tenant", match=q.MatchValue("default"))

    def request(qv: np.ndarray, conds: list[Any]) -> Any:
        return q.QueryRequest(limit=10, query=q.Query.Nearest(qv.tolist(), using="dense"),
                              filter=q.Filter(must=conds) if conds else None,
                              with_payload=True, with_vector=True,
                              params=q.SearchParams(hnsw_ef=128))

    for qv in queries[:50]:  # warm-up
        shard.query(request(qv, [tenant]))
    print("| shape | with the condition p50 / p95 ms | without | ratio of p50s |")
    print("|---|---:|---:|---:|")
    for name, conds in SHAPES.items():
        times: dict[bool, list[float]] = {True: [], False: []}
        for i, qv in enumerate(queries):
            for scoped in ((True, False) if i % 2 == 0 else (False, True)):
                req = request(qv, [tenant, *conds] if scoped else conds)
                t = time.perf_counter()
                shard.query(req)
                times[scoped].append((time.perf_counter() - t) * 1000)
        p50 = {k: statistics.median(v) for k, v in times.items()}
        p95 = {k: sorted(v)[int(0.95 * len(v)) - 1] for k, v in times.items()}
        print(f"| {name} | {p50[True]:.2f} / {p95[True]:.2f} | {p50[False]:.2f} / "
              f"{p95[False]:.2f} | x{p50[False] / p50[True]:.2f} |")
    shard.close()


if __name__ == "__main__":
    main()
