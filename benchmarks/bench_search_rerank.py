"""Search latency added by ``rerank: true`` (issue 5).

Runs the same SciFact queries through the retrieval service (the API's code path)
with and without the cross-encoder stage, in one run, on a collection loaded by
``ragline eval beir``. The cross-encoder is a randomly initialised model with the
architecture of cross-encoder/ms-marco-MiniLM-L-6-v2 (weights do not change cost;
real weights cannot be downloaded here).

    python benchmarks/bench_search_rerank.py --data-dir /tmp/evald --queries 40
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from ragline.facade import Ragline, SearchRequest
from ragline.settings import Settings
from ragline.testing.cross_encoder import MINILM_L6, build_random_cross_encoder


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--collection", default="scifact")
    ap.add_argument("--dataset", default="../shared/data/beir/scifact")
    ap.add_argument("--queries", type=int, default=40)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as tmp:
        path = build_random_cross_encoder(Path(tmp) / "ce", MINILM_L6)
        rl = Ragline(Settings(data_dir=Path(args.data_dir), cross_encoder_path=path)).start()
        me = rl.owner()
        lines = Path(args.dataset, "queries.jsonl").read_text().splitlines()
        qs = [json.loads(x)["text"] for x in lines[: args.queries]]
        rows = []
        for label, kw in [("hybrid", {}), ("hybrid + rerank 10", {"rerank": True,
                          "rerank_candidates": 10}),
                          ("hybrid + rerank 50", {"rerank": True, "rerank_candidates": 50})]:
            for q in qs[:3]:  # warm-up (also fills the query-embedding cache for every row)
                rl.search.query_sync(me, SearchRequest(args.collection, query=q, **kw))
            lat = []
            for q in qs:
                rl.search.query_sync(me, SearchRequest(args.collection, query=q))
                t = time.perf_counter()
                res = rl.search.query_sync(me, SearchRequest(args.collection, query=q, **kw))
                lat.append((time.perf_counter() - t) * 1000)
            rows.append((label, statistics.median(lat), pct(lat, 95), res.stages))
    base = rows[0][1]
    print(f"| search | p50 ms | p95 ms | added p50 ms | stages |  ({len(qs)} queries, "
          f"load {os.getloadavg()[0]:.1f})")
    print("|---|---|---|---|---|")
    for label, p50, p95, stages in rows:
        print(f"| {label} | {p50:.1f} | {p95:.1f} | {p50 - base:.1f} | {','.join(stages)} |")
    rl.close()


if __name__ == "__main__":
    main()
