#!/usr/bin/env python
"""Chroma store vs the embedded default (Qdrant Edge), same data, same run (issue 17).

Data, filter shapes and ground truth come from ``bench_store.py`` (the engine
bake-off recipe: 384-d clustered unit vectors; ``team``, ``tier``, ``module`` and
a ``tags`` list as metadata; 60-word texts). Each store gets the same records
through the store protocol (no HTTP, no service layer):

* bulk write: ``upsert`` in batches of 1,000 records, records/s over the whole
  load (Chroma: including the read of existing keys that every write does, see
  ``providers/stores/chroma/encoding.py``);
* filtered search: per filter shape, dense top-10 through ``query_batch`` (a batch
  of one), ``--queries`` timed queries after 10 warm-up ones, p50 and p95 in ms,
  and recall@10 against exact numpy top-10 on the matching subset.

Stores, in this order, each on a fresh temporary directory: ``edge`` (never
optimized, as served), ``chroma`` (in-process ``PersistentClient``) and, with
``--server``, ``chroma-server`` (a ``chroma run`` started here, over HTTP on
loopback). The stores run one after another, so a store's numbers are not taken
while another one indexes.

    .venv/bin/python benchmarks/bench_chroma.py                        # 100k docs
    .venv/bin/python benchmarks/bench_chroma.py --n 5000 --queries 30  # smoke

Prints a markdown table and writes JSON to benchmarks/results/chroma_<ts>.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_store as bs

from ragline.core.types import SearchMode, StoreQuery
from ragline.providers.stores.chroma.config import ChromaConfig
from ragline.providers.stores.chroma.provider import ChromaStore
from ragline.providers.stores.qdrant_edge.provider import (
    QdrantEdgeConfig,
    QdrantEdgeStore,
)
from ragline.testing.chroma_server import chroma_server

SHAPES = [s for s in bs.SHAPES if s.name in (
    "unfiltered", "team", "team_and_tier", "module_in3", "team_or_module", "tags_contains",
    "tier_ne")]


@contextmanager
def open_store(kind: str, root: Path) -> Iterator[Any]:
    if kind == "edge":
        store: Any = QdrantEdgeStore(QdrantEdgeConfig(path=root / "edge"))
        try:
            yield store
        finally:
            store.close()
    elif kind == "chroma":
        store = ChromaStore(ChromaConfig(path=root / "chroma"))
        try:
            yield store
        finally:
            store.close()
    else:
        with chroma_server(root / "chroma-server") as (host, port):
            store = ChromaStore(ChromaConfig(host=host, port=port))
            try:
                yield store
            finally:
                store.close()


def bench_store(kind: str, root: Path, d: bs.Data, plans: dict[str, bs.Plan], n: int,
                nq: int) -> dict[str, Any]:
    out: dict[str, Any] = {"store": kind}
    with open_store(kind, root) as store:
        ing = bs.ingest(store, bs.KEY, d, n)
        out["ingest"] = {**ing, "records_per_s": n / ing["upsert_s"],
                         "count": store.count(bs.KEY, bs.TENANT, None)}
        print(f"  {kind}: wrote {n} in {ing['upsert_s']:.1f} s "
              f"({n / ing['upsert_s']:.0f}/s)", flush=True)
        out["shapes"] = {}
        for shape in SHAPES:
            plan = plans[shape.name]

            def one(i: int, plan: bs.Plan = plan) -> list[str]:
                sq = StoreQuery(bs.TENANT, SearchMode.DENSE, bs.K, vector=d.Q[i],
                                where=plan.nodes[i])
                return [h.id for h in store.query_batch(bs.KEY, [sq])[0]]

            lat, res = bs.run_queries(one, nq)
            recall = float(np.mean([
                len({int(x) for x in r} & {int(t) for t in plan.truth[i]}) / bs.K
                for i, r in enumerate(res)]))
            out["shapes"][shape.name] = {
                "p50_ms": bs.pct(lat, 50), "p95_ms": bs.pct(lat, 95), "recall": recall,
                "matches_mean": float(np.mean([plan.matches(i) for i in range(nq)]))}
            print(f"    {shape.name:15s} p50 {bs.pct(lat, 50):7.2f} ms  p95 "
                  f"{bs.pct(lat, 95):7.2f} ms  recall {recall:.3f}", flush=True)
    return out


def markdown(r: dict[str, Any]) -> str:
    stores = [s["store"] for s in r["stores"]]
    by = {s["store"]: s for s in r["stores"]}
    base = by["edge"]
    lines = [f"{r['n']:,} documents, {r['queries']} queries per shape; ratios are "
             "store / edge (same run).", "",
             "| | " + " | ".join(stores) + " |", "|---" * (len(stores) + 1) + "|"]
    rate = [f"{by[s]['ingest']['records_per_s']:,.0f}" + (
        "" if s == "edge" else
        f" ({by[s]['ingest']['records_per_s'] / base['ingest']['records_per_s']:.2f}x)")
        for s in stores]
    lines.append("| bulk write, records/s (batches of 1,000) | " + " | ".join(rate) + " |")
    for shape in SHAPES:
        cells = []
        for s in stores:
            m = by[s]["shapes"][shape.name]
            b = base["shapes"][shape.name]
            ratio = "" if s == "edge" else f" ({m['p50_ms'] / b['p50_ms']:.1f}x)"
            cells.append(f"{m['p50_ms']:.2f} / {m['p95_ms']:.2f}{ratio}, R {m['recall']:.3f}")
        lines.append(f"| {shape.label} top-10, p50 / p95 ms, recall@10 | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--server", action="store_true", help="also a `chroma run` server")
    args = ap.parse_args()
    t0 = time.time()
    d = bs.make_data(args.n, args.queries, args.seed)
    plans = {s.name: bs.make_plan(d, s, args.queries, args.seed) for s in SHAPES}
    kinds = ["edge", "chroma"] + (["chroma-server"] if args.server else [])
    results = []
    for kind in kinds:
        with tempfile.TemporaryDirectory(prefix=f"bench-{kind}-") as tmp:
            results.append(bench_store(kind, Path(tmp), d, plans, args.n, args.queries))
    r = {"n": args.n, "queries": args.queries, "seed": args.seed, "stores": results,
         "python": platform.python_version(), "machine": platform.machine(),
         "loadavg_end": bs.loadavg(), "wall_s": time.time() - t0}
    import chromadb

    r["chromadb"] = chromadb.__version__
    print()
    print(markdown(r))
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    path = out / f"chroma_{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps(r, indent=1))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
