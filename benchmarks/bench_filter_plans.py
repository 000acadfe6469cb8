"""Search plans per filter shape, and what the index placement costs a swap.

The store picks a plan per query (``queries.dense_plan``: exact, one walk through a
value's links, one plain filtered walk for broad filters, one walk per value of an
``$in`` merged by score, or ACORN); this measures each raw Edge plan and the store's
own choice on the same built shard, interleaved query by query, so the choice is
measured, not guessed. Library level (no HTTP): builds ``--size`` points of
bench_scale's data, with payload indexes ``pinned`` (Edge's default, in-memory) and/or
``cold`` (mmap, ragline's default since issue 18), runs the background build on each, then

* times ``EdgeShard.load`` and ``close`` of each built generation, interleaved, with a
  thread ticking every 1 ms: its longest gap is how long the GIL was held (what a
  generation swap stalls a server for); ``--skip-swap`` leaves this out;
* times every plan for every filter shape, one query at a time.

``--dir`` keeps the built shards and reuses them on the next run (a 1M build takes
long); running the script with ``PYTHONPATH=/work/main/src`` measures main's store
plan on the same shards (the "before"). ``--extra-shapes`` adds filters around the
plan's thresholds (an integer value, float ranges of 10-50 %).

    python benchmarks/bench_filter_plans.py --size 50000
    python benchmarks/bench_filter_plans.py --size 100000 --placements cold --skip-swap \
        --dir /tmp/plans100k --queries 200
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as q

sys.path.insert(0, str(Path(__file__).parent))
from bench_scale import DIM, SHAPES, Data

from ragline.core.filters import Limits, parse_where
from ragline.core.types import Record, SearchMode, StoreQuery
from ragline.providers.stores.qdrant_edge import generations
from ragline.providers.stores.qdrant_edge.host import edge_config, open_generation
from ragline.providers.stores.qdrant_edge.provider import (
    QdrantEdgeConfig,
    QdrantEdgeStore,
)
from ragline.providers.stores.qdrant_edge.queries import VECTOR
from ragline.providers.stores.qdrant_edge.translate import tenant_filter

PLANS = {
    "exact": q.SearchParams(exact=True),
    "hnsw ef=128": q.SearchParams(hnsw_ef=128),
    "hnsw ef=256": q.SearchParams(hnsw_ef=256),
    "hnsw ef=512": q.SearchParams(hnsw_ef=512),
    "acorn ef=256": q.SearchParams(hnsw_ef=256, acorn=q.AcornSearchParams(
        enable=True, max_selectivity=0.5)),
}
SPLIT = "walk per value ef=256"  # one single query per value, merged by score
STORE = "store's plan (query_batch)"
NEW = "this tree's plan, raw Edge calls"
OLD = "baseline's plan, raw Edge calls"
EXTRA: dict[str, tuple[dict[str, Any], Callable[[Data], np.ndarray]]] = {
    "tier = one value (25%)": ({"tier": 0}, lambda d: d.tier == 0),
    "score $lt 10 (10%)": ({"score": {"$lt": 10}}, lambda d: d.score() < 10),
    "score $lt 30 (30%)": ({"score": {"$lt": 30}}, lambda d: d.score() < 30),
    "score $lt 40 (40%)": ({"score": {"$lt": 40}}, lambda d: d.score() < 40),
    "score $lt 45 (45%)": ({"score": {"$lt": 45}}, lambda d: d.score() < 45),
    "score $lt 50 (50%)": ({"score": {"$lt": 50}}, lambda d: d.score() < 50),
}


def value_parts(where: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """The per-value filters of an ``$in`` (what the store's split plan walks)."""
    if where and len(where) == 1:
        (field, cond), = where.items()
        if isinstance(cond, dict) and "$in" in cond:
            return [{field: v} for v in cond["$in"]]
    return None


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


def build(path: Path, data: Data, memory: str, nice: int = 10) -> QdrantEdgeStore:
    store = QdrantEdgeStore(QdrantEdgeConfig(path=path, index_memory=memory,  # type: ignore[arg-type]
                                             build_nice=nice))
    if store.index_status("k") == (data.size, data.size):
        print(f"{memory}: reusing the built shard in {path}", file=sys.stderr)
        return store
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
    ap.add_argument("--placements", default="pinned,cold",
                    help="payload index placements to build and measure, comma-separated")
    ap.add_argument("--dir", type=Path, help="keep the built shards here (and reuse them)")
    ap.add_argument("--skip-swap", action="store_true", help="no load/close timing")
    ap.add_argument("--build-nice", type=int, default=10,
                    help="niceness of the build process (the store's default: 10)")
    ap.add_argument("--extra-shapes", action="store_true",
                    help="also filters around the plan's thresholds")
    ap.add_argument("--baseline-queries", type=Path,
                    help="another checkout's qdrant_edge/queries.py: its plan (search_params, "
                    "split_by_value, exact re-run of short answers) is measured interleaved "
                    "with this tree's, both as raw Edge calls")
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args()
    global BASELINE
    if args.baseline_queries:
        spec = importlib.util.spec_from_file_location("baseline_queries", args.baseline_queries)
        assert spec and spec.loader
        BASELINE = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(BASELINE)
    work = args.dir or Path(tempfile.mkdtemp(prefix="bench-plans-"))
    data = Data(args.size)
    out: dict[str, Any] = {"size": args.size, "uptime": [uptime()]}
    try:
        stores = {m: build(work / m, data, m, args.build_nice)
                  for m in args.placements.split(",")}
        for store in stores.values():
            store.close()
        if not args.skip_swap:
            out["load"] = swap_times(stores, args.load_reps)
        # -- plans, on every placement, interleaved per query
        here = {m: Here(work / m, m) for m in stores}
        rng = np.random.default_rng(99)
        queries = data.centres[rng.integers(0, 1000, args.queries)] + rng.normal(
            size=(args.queries, DIM)).astype(np.float32) * 0.6
        unit_q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
        scores = np.zeros((args.queries, args.size), np.float32)
        for lo in range(0, args.size, 100_000):
            v = data.vectors(lo, min(lo + 100_000, args.size))
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            scores[:, lo:lo + len(v)] = unit_q @ v.T
        shapes = {n: (w, data.mask(w)) for n, w in SHAPES.items()}
        if args.extra_shapes:
            shapes.update({n: (w, f(data)) for n, (w, f) in EXTRA.items()})
        rows = []
        for name, (where, mask) in shapes.items():
            rows.extend(measure_shape(here, name, where, mask, scores, queries))
        print("\n| filter | indexes | plan | p50 ms | p95 ms | recall@10 |\n"
              "|---|---|---|---:|---:|---:|")
        for r in rows:
            print(f"| {r['filter']} | {r['indexes']} | {r['plan']} | {r['p50']:.2f} | "
                  f"{r['p95']:.2f} | {r['recall']:.3f} |")
        out["plans"] = rows
        for h in here.values():
            h.gen.close()
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    out["uptime"].append(uptime())
    print(f"load: {out['uptime'][0]} -> {out['uptime'][1]}")
    if args.json_out:
        args.json_out.write_text(json.dumps(out, indent=1))


def uptime() -> str:
    """The load averages (the machine is shared: every figure is read with them)."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def swap_times(stores: dict[str, QdrantEdgeStore],
               reps: int) -> dict[str, list[tuple[float, float, float]]]:
    """``EdgeShard.load`` and ``close`` of each built generation, interleaved, with the
    longest GIL hold seen by a 1 ms ticker thread."""
    ticker = Ticker()
    loads: dict[str, list[tuple[float, float, float]]] = {m: [] for m in stores}
    for _ in range(reps):
        for m, store in stores.items():
            path = generations.current(store.root / "k")
            cfg = edge_config(store.config, DIM)
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
            loads[m].append((t_load * 1000, t_close * 1000, max(gap, ticker.max_gap_ms(mark))))
    ticker.stop()
    print("\n| payload indexes | load ms (median) | close ms (median) | longest GIL gap "
          "ms (median of reps) |\n|---|---:|---:|---:|")
    for m, xs in loads.items():
        print(f"| {m} | {statistics.median(x[0] for x in xs):.0f} | "
              f"{statistics.median(x[1] for x in xs):.0f} | "
              f"{statistics.median(x[2] for x in xs):.0f} |")
    return loads


class Here:
    """A built shard's generation opened in this process, as a host opens it (the store
    closed): the store's plan is ``Generation.query_batch`` without the round trip to a
    host, the raw plans are calls of its Edge shard."""

    def __init__(self, path: Path, memory: str) -> None:
        self.config = QdrantEdgeConfig(path=path, index_memory=memory)  # type: ignore[arg-type]
        self.gen = open_generation("open", generations.current(path / "k"), DIM, self.config)
        self.shard = self.gen.shard

    def query_batch(self, key: str, sqs: list[StoreQuery]) -> list[list[Any]]:
        return self.gen.query_batch(sqs)

    def plan(self, key: str, sq: StoreQuery) -> Any:
        return self.gen.plan(sq)


def measure_shape(stores: dict[str, Here], name: str,
                  where: dict[str, Any] | None, mask: np.ndarray, scores: np.ndarray,
                  queries: np.ndarray) -> list[dict[str, Any]]:
    """Every plan for one filter shape, interleaved query by query: p50/p95 and
    recall@10 against exact top-10 computed with numpy over the matching points."""
    s = np.where(mask[None, :], scores, -np.inf)
    truth = [{f"d{i}" for i in row} for row in np.argpartition(-s, 10, axis=1)[:, :10]]
    node = parse_where(where, Limits()) if where else None
    flt = tenant_filter("default", node)
    parts = value_parts(where)
    part_flts = [tenant_filter("default", parse_where(w, Limits())) for w in parts or []]
    plans = [*PLANS, *([SPLIT] if parts else []), STORE, NEW, *([OLD] if BASELINE else [])]
    lat: dict[tuple[str, str], list[float]] = {}
    rec: dict[tuple[str, str], list[float]] = {}
    chosen: dict[str, str] = {}
    for m, store in stores.items():
        sq = StoreQuery("default", SearchMode.DENSE, 10, vector=queries[0], where=node)
        dp = store.plan("k", sq) if hasattr(store, "plan") else None  # main has none
        chosen[m] = f"{STORE}: {dp.kind}, estimate {dp.estimate}" if dp else STORE
    for qi, qv in enumerate(queries):
        for m, store in stores.items():
            sh = store
            turn = qi % len(plans)  # the order rotates: no plan always follows a slow one
            for plan in plans[turn:] + plans[:turn]:
                t = time.perf_counter()
                if plan == STORE:
                    got = {r.id for r in store.query_batch("k", [StoreQuery(
                        "default", SearchMode.DENSE, 10, vector=qv, where=node)])[0]}
                elif plan == SPLIT:
                    got = {p.payload["doc_id"] for p in merge([
                        sh.shard.query(request(qv, f, PLANS["hnsw ef=256"]))
                        for f in part_flts])}
                elif plan in (NEW, OLD):
                    got = {p.payload["doc_id"]
                           for p in (new_plan if plan == NEW else old_plan)(store, node, qv)}
                else:
                    got = {p.payload["doc_id"] for p in sh.shard.query(
                        request(qv, flt, PLANS[plan]))}
                lat.setdefault((m, plan), []).append((time.perf_counter() - t) * 1000)
                rec.setdefault((m, plan), []).append(len(got & truth[qi]) / 10)
    rows = []
    for (m, plan), xs in lat.items():
        xs.sort()
        rows.append({"filter": name, "indexes": m,
                     "plan": chosen[m] if plan == STORE else plan,
                     "p50": statistics.median(xs), "p95": xs[int(0.95 * len(xs)) - 1],
                     "recall": float(np.mean(rec[(m, plan)]))})
    return rows


BASELINE: Any = None


def merge(parts: list[list[Any]]) -> list[Any]:
    best: dict[Any, Any] = {}
    for pts in parts:
        for p in pts:
            if p.id not in best or p.score > best[p.id].score:
                best[p.id] = p
    return sorted(best.values(), key=lambda p: p.score, reverse=True)[:10]


def new_plan(store: Here, node: Any, qv: np.ndarray) -> list[Any]:
    """This tree's plan as raw Edge calls (the store's plan + the short re-run)."""
    sh = store
    flt = tenant_filter("default", node)
    # the whole plan, Edge parameters included (store.plan leaves them out: a plan made
    # in a host has to cross a socket); the generation is opened in this process here
    info = sh.shard.info()
    dp = sh.gen._dense_plan(info, sh.gen.linked(info),
                            StoreQuery("default", SearchMode.DENSE, 10, vector=qv, where=node),
                            False)  # with the tenant condition, as measured
    if dp.kind == "split":
        pts = merge([sh.shard.query(request(qv, tenant_filter("default", part), dp.params))
                     for part in dp.parts])
    else:
        pts = sh.shard.query(request(qv, flt, dp.params))
    if dp.guarded and len(pts) < 10:
        pts = sh.shard.query(request(qv, flt, PLANS["exact"]))
    return pts


def old_plan(store: Here, node: Any, qv: np.ndarray) -> list[Any]:
    """The baseline checkout's plan (its ``search_params`` and ``split_by_value``, as its
    provider calls them) as raw Edge calls; its linked fields: every metadata field
    with per-value links (keyword and integer)."""
    sh = store
    info = sh.shard.info()
    flt = tenant_filter("default", node)
    linked = frozenset(p[len("metadata."):] for p, pi in info.payload_schema.items()
                       if p.startswith("metadata.") and getattr(pi.params, "enable_hnsw", False))
    params, n = BASELINE.search_params(sh.shard, info, flt, store.config.exact_search_max_matches,
                                       store.config.hnsw_ef,
                                       BASELINE.linked_fields_only(node, linked))
    parts = (BASELINE.split_by_value(node, linked)
             if params is not None and not params.exact else None)
    if parts:
        graph = q.SearchParams(hnsw_ef=store.config.hnsw_ef)
        pts = merge([sh.shard.query(request(qv, tenant_filter("default", part), graph))
                     for part in parts])
    else:
        pts = sh.shard.query(request(qv, flt, params))
    if params is not None and not params.exact and len(pts) < min(10, n):
        pts = sh.shard.query(request(qv, flt, PLANS["exact"]))
    return pts


def request(qv: np.ndarray, flt: Any, params: Any) -> Any:
    return q.QueryRequest(limit=10, query=q.Query.Nearest(qv.tolist(), using=VECTOR),
                          filter=flt, with_payload=True, params=params)


if __name__ == "__main__":
    main()
