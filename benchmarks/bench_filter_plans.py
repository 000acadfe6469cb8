"""Search plans per filter shape, and what the index placement costs a swap.

The store picks a plan per query (``QdrantEdgeStore._plan``: exact, filtered HNSW
through per-value links, ACORN, or one walk per value of an ``$in``/range merged by
score); this measures each raw Edge plan and the store's own choice on the same
built shard, interleaved query by query, so the choice is measured, not guessed.
Library level (no HTTP): builds ``--size`` points of bench_scale's data twice, with
payload indexes ``pinned`` (Edge's default, in-memory) and ``cold`` (mmap, ragline's
default since issue 18), runs the background build on each, then

* times ``EdgeShard.load`` and ``close`` of each built generation, interleaved, with a
  thread ticking every 1 ms: its longest gap is how long the GIL was held (what a
  generation swap stalls a server for);
* times every plan for every filter shape on both placements, one query at a time.

    python benchmarks/bench_filter_plans.py --size 50000
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as q

sys.path.insert(0, str(Path(__file__).parent))
from bench_scale import DIM, SHAPES, Data

from ragline.core.filters import Limits, parse_where
from ragline.core.types import Record, SearchMode, StoreQuery
from ragline.providers.stores.qdrant_edge import generations
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
STORE = "store's plan (query_batch)"


class Ticker:
    """A thread that sleeps 1 ms at a time; the longest gap = longest GIL hold."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self._stop = False
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        last = time.perf_counter()
        while not self._stop:
            time.sleep(0.001)
            now = time.perf_counter()
            self.gaps.append(now - last)
            last = now

    def max_gap_ms(self, since: int) -> float:
        return max(self.gaps[since:], default=0.0) * 1000

    def stop(self) -> None:
        self._stop = True
        self._t.join()


def build(path: Path, data: Data, memory: str) -> QdrantEdgeStore:
    store = QdrantEdgeStore(QdrantEdgeConfig(path=path, index_memory=memory,  # type: ignore[arg-type]
                                             shard_processes=False))  # reads sh.shard
    store.create_shard("k", DIM)
    t = time.perf_counter()
    for lo in range(0, data.size, 1000):
        v = data.vectors(lo, lo + 1000)
        store.upsert("k", [Record(f"d{i}", f"chunk {i}", {
            "cat": f"c{data.cat[i]}", "tier": int(data.tier[i]), "score": float(i % 1000) / 10},
            v[i - lo]) for i in range(lo, lo + 1000)])
    print(f"{memory}: upsert {data.size / (time.perf_counter() - t):.0f}/s", file=sys.stderr)
    t = time.perf_counter()
    store.build_index("k")
    print(f"{memory}: build {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=50_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--load-reps", type=int, default=5)
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-plans-"))
    data = Data(args.size)
    out: dict[str, Any] = {"size": args.size}
    try:
        stores = {m: build(work / m, data, m) for m in ("pinned", "cold")}
        # -- the swap's GIL hold: load and close of each built generation, interleaved
        ticker = Ticker()
        loads: dict[str, list[tuple[float, float, float]]] = {m: [] for m in stores}
        for store in stores.values():
            store.close()
        for _ in range(args.load_reps):
            for m, store in stores.items():
                path = generations.current(store.root / "k")
                cfg = store._edge_config(DIM)
                mark = len(ticker.gaps)
                t = time.perf_counter()
                shard = q.EdgeShard.load(str(path), cfg)
                t_load = time.perf_counter() - t
                time.sleep(0.01)
                gap = ticker.max_gap_ms(mark)
                mark = len(ticker.gaps)
                t = time.perf_counter()
                shard.close()
                t_close = time.perf_counter() - t
                time.sleep(0.01)
                loads[m].append((t_load * 1000, t_close * 1000,
                                 max(gap, ticker.max_gap_ms(mark))))
        ticker.stop()
        print("\n| payload indexes | load ms (median) | close ms (median) | longest GIL gap "
              "ms (median of reps) |\n|---|---:|---:|---:|")
        for m, xs in loads.items():
            print(f"| {m} | {statistics.median(x[0] for x in xs):.0f} | "
                  f"{statistics.median(x[1] for x in xs):.0f} | "
                  f"{statistics.median(x[2] for x in xs):.0f} |")
        out["load"] = loads
        # -- plans, on both placements, interleaved per query
        stores = {m: QdrantEdgeStore(QdrantEdgeConfig(  # type: ignore[arg-type]
            path=work / m, index_memory=m, shard_processes=False))  # reads sh.shard
                  for m in stores}
        for store in stores.values():
            store.index_status("k")  # opens the shard
        rng = np.random.default_rng(99)
        queries = data.centres[rng.integers(0, 1000, args.queries)] + rng.normal(
            size=(args.queries, DIM)).astype(np.float32) * 0.6
        allv = data.vectors(0, args.size)
        allv /= np.linalg.norm(allv, axis=1, keepdims=True)
        scores = (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ allv.T
        rows = []
        for name, where in SHAPES.items():
            s = np.where(data.mask(where)[None, :], scores, -np.inf)
            truth = [{f"d{i}" for i in row} for row in np.argpartition(-s, 10, axis=1)[:, :10]]
            node = parse_where(where, Limits()) if where else None
            flt = tenant_filter("default", node)
            lat: dict[tuple[str, str], list[float]] = {}
            rec: dict[tuple[str, str], list[float]] = {}
            for qi, qv in enumerate(queries):
                for m, store in stores.items():
                    sh = store._shards["k"]
                    for plan in [*PLANS, STORE]:
                        t = time.perf_counter()
                        if plan == STORE:
                            got = {r.id for r in store.query_batch("k", [StoreQuery(
                                "default", SearchMode.DENSE, 10, vector=qv, where=node)])[0]}
                        else:
                            req = q.QueryRequest(
                                limit=10, query=q.Query.Nearest(qv.tolist(), using=VECTOR),
                                filter=flt, with_payload=True, params=PLANS[plan])
                            got = {p.payload["doc_id"] for p in sh.shard.query(req)}
                        lat.setdefault((m, plan), []).append((time.perf_counter() - t) * 1000)
                        rec.setdefault((m, plan), []).append(len(got & truth[qi]) / 10)
            for (m, plan), xs in lat.items():
                xs.sort()
                rows.append({"filter": name, "indexes": m, "plan": plan,
                             "p50": statistics.median(xs), "p95": xs[int(0.95 * len(xs)) - 1],
                             "recall": float(np.mean(rec[(m, plan)]))})
        print("\n| filter | payload indexes | plan | p50 ms | p95 ms | recall@10 |\n"
              "|---|---|---|---:|---:|---:|")
        for r in rows:
            print(f"| {r['filter']} | {r['indexes']} | {r['plan']} | {r['p50']:.2f} | "
                  f"{r['p95']:.2f} | {r['recall']:.3f} |")
        out["plans"] = rows
        for store in stores.values():
            store.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json_out:
        args.json_out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
