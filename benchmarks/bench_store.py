#!/usr/bin/env python
"""Store benchmark (issue 2): the Qdrant Edge store class, measured directly.

Data is the engine bake-off recipe (``research/engine-bakeoff.md``): 1,000 unit
Gaussian centres in 384-d, doc = centre + N(0, 0.05^2) noise, L2-normalised;
queries drawn the same way with another seed. Metadata: ``team`` (10 strings),
``tier`` (int 1-4), ``module`` (20 strings), ``tags`` (1-3 of 30 strings), all
independent of the cluster; text of 60 words (Zipf vocabulary plus 12 cluster topic
words), which the store indexes for BM25. Filter values rotate per query.

What is timed (the store's own numbers, no HTTP, no service layer except for
``empty``):

* ingest: ``upsert`` in batches of 1,000 ``Record``s; ``optimize()`` once,
  separately (it holds the GIL for its whole run);
* per filter shape: ``list_page(limit=100)`` with its total (the "where query +
  count"), filtered top-10 ``search`` and recall@10 against exact numpy top-10
  on the matching subset; plus unfiltered search. Each shape: 10 warm-up
  queries, then ``--queries`` timed queries, ``--reps`` times; the table shows
  the median over reps of p50 and of p95;
* baseline in the same run, interleaved rep by rep: exact numpy brute force over
  the same float32 matrix, with the filter's row indices precomputed (timed:
  gather + matmul + top-10);
* QPS with 1 and 4 threads (ThreadPoolExecutor), unfiltered and team AND tier;
* ``CollectionService.empty()`` on a 50k-document collection vs
  ``store.delete_where(None)`` on an identical shard.

All query figures are taken on plain segments (never optimized) and, unless
``--no-optimize``, again after ``optimize()``.

    .venv/bin/python benchmarks/bench_store.py                 # full: 100k docs, ~10 min
    .venv/bin/python benchmarks/bench_store.py --n 5000 --queries 50 --reps 3   # smoke

Prints a markdown table and writes JSON to benchmarks/results/store_<ts>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# The numpy baseline runs single-threaded like one store query does; on this 2-core,
# shared box multi-threaded BLAS made small mat-vecs slower and far noisier.
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from edge_here import edge_here  # noqa: E402

from ragline.catalog.sqlite import Catalog  # noqa: E402
from ragline.core.filters import Node, parse_where  # noqa: E402
from ragline.core.types import Record, SearchMode, StoreQuery  # noqa: E402
from ragline.providers.stores.qdrant_edge.provider import (  # noqa: E402
    QdrantEdgeConfig,
    QdrantEdgeStore,
)
from ragline.providers.stores.qdrant_edge.translate import tenant_filter  # noqa: E402
from ragline.services.corpus.collections import CollectionService  # noqa: E402

DIM = 384
N_CENTRES = 1000
NOISE = 0.05
TENANT = "default"
KEY = "bench"
BATCH = 1000
WARMUP = 10
K = 10

TEAMS = [f"team-{i}" for i in range(10)]
MODULES = [f"mod-{i:02d}" for i in range(20)]
TAGS = [f"tag-{i:02d}" for i in range(30)]
VOCAB_SIZE = 5000
WORDS = 60
VOCAB = [f"w{i}" for i in range(VOCAB_SIZE)]


# -- data --------------------------------------------------------------------------
def _unit(x: np.ndarray) -> np.ndarray:
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def _draw(rng: np.random.Generator, centres: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    out = np.empty((n, DIM), np.float32)
    assign = rng.integers(0, N_CENTRES, n)
    for s in range(0, n, 10_000):  # chunked: keeps the float temporaries small
        e = min(n, s + 10_000)
        out[s:e] = centres[assign[s:e]] + rng.standard_normal((e - s, DIM), np.float32) * NOISE
    return _unit(out), assign


@dataclass
class Data:
    X: np.ndarray  # (n, DIM) float32, unit rows
    Q: np.ndarray  # (nq + WARMUP, DIM)
    team: np.ndarray
    tier: np.ndarray
    module: np.ndarray
    tags: np.ndarray  # (n, 30) bool
    words: np.ndarray  # (n, WORDS) int16 word ids of the text (BM25-indexed by the store)

    def meta(self, i: int) -> dict[str, Any]:
        return {
            "team": TEAMS[self.team[i]],
            "tier": int(self.tier[i]),
            "module": MODULES[self.module[i]],
            "tags": [TAGS[t] for t in np.flatnonzero(self.tags[i])],
        }

    def records(self, s: int, e: int) -> list[Record]:
        return [
            Record(
                str(i), " ".join(VOCAB[w] for w in self.words[i]), self.meta(i), self.X[i], TENANT
            )
            for i in range(s, e)
        ]


def make_data(n: int, nq: int, seed: int) -> Data:
    rng = np.random.default_rng(seed)
    centres = _unit(rng.standard_normal((N_CENTRES, DIM), dtype=np.float32))
    X, assign = _draw(rng, centres, n)
    team = rng.integers(0, 10, n).astype(np.int8)
    tier = rng.integers(1, 5, n).astype(np.int8)
    module = rng.integers(0, 20, n).astype(np.int8)
    ntags = rng.integers(1, 4, n)
    order = np.argsort(rng.random((n, 30)), axis=1)
    tags = np.zeros((n, 30), bool)
    rows = np.arange(n)
    for j in range(3):
        sel = ntags > j
        tags[rows[sel], order[sel, j]] = True
    Q, _ = _draw(np.random.default_rng(seed + 1), centres, nq + WARMUP)
    # text: 60 words, 48 from a Zipf(1.07) vocabulary of 5,000 and 12 from the cluster's
    # 20 topic words (as in the bake-off), so the store's BM25 text index does real work
    zipf = 1.0 / np.arange(1, VOCAB_SIZE + 1) ** 1.07
    topics = rng.integers(500, VOCAB_SIZE, (N_CENTRES, 20))
    words = np.empty((n, WORDS), np.int16)
    words[:, :48] = rng.choice(VOCAB_SIZE, (n, 48), p=zipf / zipf.sum())
    words[:, 48:] = topics[assign[:, None], rng.integers(0, 20, (n, WORDS - 48))]
    return Data(X, Q, team, tier, module, tags, words)


# -- filter shapes -----------------------------------------------------------------
@dataclass
class Shape:
    name: str
    label: str
    make: Callable[
        [Data, int, np.random.Generator], tuple[dict[str, Any] | None, np.ndarray | None]
    ]


def _team(d: Data, i: int, r: np.random.Generator) -> tuple[dict[str, Any], np.ndarray]:
    x = i % 10
    return {"team": TEAMS[x]}, d.team == x


def _team_tier(d: Data, i: int, r: np.random.Generator) -> tuple[dict[str, Any], np.ndarray]:
    x = i % 10
    return ({"$and": [{"team": TEAMS[x]}, {"tier": {"$lte": 2}}]}, (d.team == x) & (d.tier <= 2))


def _module_in(k: int) -> Callable[..., tuple[dict[str, Any], np.ndarray]]:
    def make(d: Data, i: int, r: np.random.Generator) -> tuple[dict[str, Any], np.ndarray]:
        vals = sorted(int(v) for v in r.choice(20, k, replace=False))
        return {"module": {"$in": [MODULES[v] for v in vals]}}, np.isin(d.module, vals)

    return make


def _team_or_module(d: Data, i: int, r: np.random.Generator) -> tuple[dict[str, Any], np.ndarray]:
    x, y = i % 10, (i * 7 + 3) % 20
    return ({"$or": [{"team": TEAMS[x]}, {"module": MODULES[y]}]}, (d.team == x) | (d.module == y))


def _tags(d: Data, i: int, r: np.random.Generator) -> tuple[dict[str, Any], np.ndarray]:
    t = i % 30
    return {"tags": {"$contains": TAGS[t]}}, d.tags[:, t].copy()


def _tier_ne(d: Data, i: int, r: np.random.Generator) -> tuple[dict[str, Any], np.ndarray]:
    return {"tier": {"$ne": 3}}, d.tier != 3


def _none(d: Data, i: int, r: np.random.Generator) -> tuple[None, None]:
    return None, None


SHAPES = [
    Shape("unfiltered", "unfiltered", _none),
    Shape("team", '`{"team": X}`', _team),
    Shape("team_and_tier", '`{"$and":[{"team":X},{"tier":{"$lte":2}}]}`', _team_tier),
    Shape("module_in3", '`{"module":{"$in":[3 of 20]}}`', _module_in(3)),
    Shape("module_in10", '`{"module":{"$in":[10 of 20]}}`', _module_in(10)),
    Shape("team_or_module", '`{"$or":[{"team":X},{"module":Y}]}`', _team_or_module),
    Shape("tags_contains", '`{"tags":{"$contains":T}}`', _tags),
    Shape("tier_ne", '`{"tier":{"$ne":3}}`', _tier_ne),
]


@dataclass
class Plan:
    """Per shape and query: the parsed filter, the matching row ids (shared), the truth."""

    where: list[dict[str, Any] | None]
    nodes: list[Node | None]
    idx: list[np.ndarray | None]
    truth: list[np.ndarray] = field(default_factory=list)
    n: int = 0  # documents in the store

    def matches(self, i: int) -> int:
        idx = self.idx[i]
        return self.n if idx is None else len(idx)


def numpy_top(X: np.ndarray, q: np.ndarray, idx: np.ndarray | None) -> np.ndarray:
    """Exact top-K on the matching subset: the baseline and the ground truth.

    Selective filters gather the matching rows first; broad ones (> 1/3 of the rows)
    score every row and gather the scores, which reads less memory."""
    if idx is None:
        s = X @ q
        top = np.argpartition(-s, K)[:K]
        return top[np.argsort(-s[top])]
    s = (X @ q)[idx] if 3 * len(idx) > len(X) else X[idx] @ q
    top = np.argpartition(-s, K)[:K]
    return idx[top[np.argsort(-s[top])]]


def make_plan(d: Data, shape: Shape, nq: int, seed: int) -> Plan:
    r = np.random.default_rng(seed + 2)
    cache: dict[str, np.ndarray] = {}
    plan = Plan([], [], [], n=len(d.X))
    for i in range(nq + WARMUP):
        where, mask = shape.make(d, i, r)
        plan.where.append(where)
        plan.nodes.append(parse_where(where))
        if mask is None:
            plan.idx.append(None)
        else:
            key = json.dumps(where, sort_keys=True)
            if key not in cache:
                cache[key] = np.flatnonzero(mask).astype(np.int64)
            plan.idx.append(cache[key])
    plan.truth = [numpy_top(d.X, d.Q[i], plan.idx[i]) for i in range(nq)]
    return plan


# -- timing helpers ----------------------------------------------------------------
def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs), p))


def summarise(reps: list[list[float]]) -> dict[str, Any]:
    p50 = [pct(r, 50) for r in reps]
    p95 = [pct(r, 95) for r in reps]
    return {
        "p50_ms": statistics.median(p50),
        "p95_ms": statistics.median(p95),
        "p50_reps": p50,
        "p95_reps": p95,
        "queries": len(reps[0]),
        "reps": len(reps),
    }


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def run_queries(fn: Callable[[int], Any], nq: int) -> tuple[list[float], list[Any]]:
    for w in range(nq, nq + WARMUP):
        fn(w)
    lat, out = [], []
    for i in range(nq):
        t0 = time.perf_counter()
        res = fn(i)
        lat.append((time.perf_counter() - t0) * 1000)
        out.append(res)
    return lat, out


def search_path(store: QdrantEdgeStore, node: Node | None) -> str:
    """Which plan the store's own strategy picks for this filter (``queries.dense_plan``)."""
    p = store.plan(KEY, StoreQuery(TENANT, SearchMode.DENSE, 10, vector=[0.0] * DIM,
                                   where=node))
    return "no shard" if p is None else f"{p.kind} (estimate {p.estimate})"


# -- phases ------------------------------------------------------------------------
def ingest(store: QdrantEdgeStore, key: str, d: Data, n: int) -> dict[str, Any]:
    store.create_shard(key, DIM)
    upsert_s = 0.0
    c0, w0 = cpu_s(), time.perf_counter()
    for s in range(0, n, BATCH):
        recs = d.records(s, min(n, s + BATCH))
        t0 = time.perf_counter()
        store.upsert(key, recs)
        upsert_s += time.perf_counter() - t0
    return {
        "upsert_s": upsert_s,
        "wall_s": time.perf_counter() - w0,
        "cpu_s": cpu_s() - c0,
        "batches": -(-n // BATCH),
    }


def measure_shape(
    store: QdrantEdgeStore, d: Data, shape: Shape, plan: Plan, nq: int, reps: int
) -> dict[str, Any]:
    sr: dict[str, Any] = {"path": search_path(store, plan.nodes[0])}

    def search(i: int) -> Any:
        return store.search(KEY, TENANT, d.Q[i], plan.nodes[i], K)

    def baseline(i: int) -> Any:
        return numpy_top(d.X, d.Q[i], plan.idx[i])

    def page(i: int) -> Any:
        return store.list_page(KEY, TENANT, plan.nodes[i], 100, 0)

    st_reps, np_reps, lp_reps = [], [], []
    hits: list[Any] = []
    for rep in range(reps):  # store and baseline interleaved, so load drift hits both
        lat, out = run_queries(search, nq)
        st_reps.append(lat)
        if rep == 0:
            hits = out
        np_reps.append(run_queries(baseline, nq)[0])
        if shape.name != "unfiltered":
            lat, pages = run_queries(page, nq)
            lp_reps.append(lat)
            if rep == 0:
                bad = [
                    i
                    for i, pg in enumerate(pages)
                    if pg.total != plan.matches(i) or len(pg.records) != min(100, pg.total)
                ]
                sr["count_mismatches"] = len(bad)
                if bad:
                    i = bad[0]
                    print(
                        f"  !! {shape.name}: total {pages[i].total} != "
                        f"{plan.matches(i)} for {plan.where[i]}",
                        flush=True,
                    )
    recalls = [
        len({int(h.id) for h in hits[i]} & set(plan.truth[i].tolist())) / K for i in range(nq)
    ]
    sr["recall_at_10"] = float(np.mean(recalls))
    sr["recall_min"] = float(np.min(recalls))
    sr["queries_below_1"] = int(sum(r < 1 for r in recalls))
    sr["search"] = summarise(st_reps)
    sr["numpy"] = summarise(np_reps)
    sr["ratio_p50"] = sr["search"]["p50_ms"] / sr["numpy"]["p50_ms"]
    sr["ratio_p95"] = sr["search"]["p95_ms"] / sr["numpy"]["p95_ms"]
    if lp_reps:
        sr["list_count"] = summarise(lp_reps)
    matches = [plan.matches(i) for i in range(nq)]
    sr["matches_mean"] = float(np.mean(matches))
    sr["selectivity"] = sr["matches_mean"] / len(d.X)
    lc = sr.get("list_count")
    print(
        f"  {shape.name:15s} {sr['path']:12s} sel={sr['selectivity']:.3f} "
        f"search {sr['search']['p50_ms']:.2f}/{sr['search']['p95_ms']:.2f} ms "
        f"numpy {sr['numpy']['p50_ms']:.2f}/{sr['numpy']['p95_ms']:.2f} "
        f"recall {sr['recall_at_10']:.4f}"
        + (f" list+count {lc['p50_ms']:.2f}/{lc['p95_ms']:.2f}" if lc else ""),
        flush=True,
    )
    return sr


def measure_qps(
    store: QdrantEdgeStore, d: Data, plan: Plan, nq: int, threads: int, reps: int
) -> dict[str, Any]:
    def search(i: int) -> Any:
        return store.search(KEY, TENANT, d.Q[i], plan.nodes[i], K)

    vals = []
    for _ in range(reps):
        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(search, range(nq, nq + WARMUP)))
            t0 = time.perf_counter()
            list(ex.map(search, range(nq)))
            vals.append(nq / (time.perf_counter() - t0))
    return {"qps": statistics.median(vals), "reps": vals}


def measure_state(
    store: QdrantEdgeStore, d: Data, plans: dict[str, Plan], nq: int, reps: int, qps_reps: int
) -> dict[str, Any]:
    res: dict[str, Any] = {"loadavg_start": loadavg(), "shapes": {}, "qps": {}}
    for shape in SHAPES:
        res["shapes"][shape.name] = measure_shape(store, d, shape, plans[shape.name], nq, reps)
    for name in ("unfiltered", "team_and_tier"):
        for threads in (1, 4):
            x = measure_qps(store, d, plans[name], nq, threads, qps_reps)
            res["qps"][f"{name}_{threads}t"] = x
            print(f"  qps {name} {threads} thread(s): {x['qps']:.0f}", flush=True)
    res["loadavg_end"] = loadavg()
    return res


def _probe_shape(sh: Any, d: Data, plan: Plan, nq: int, settings: list[Any]) -> dict[str, Any]:
    import qdrant_edge as q

    flts = [tenant_filter(TENANT, plan.nodes[i]) for i in range(nq + WARMUP)]
    true = [plan.matches(i) for i in range(nq)]
    res: dict[str, Any] = {}
    for exact in (True, False):

        def count(i: int, e: bool = exact) -> int:
            return int(sh.shard.count(q.CountRequest(filter=flts[i], exact=e)))

        lat, got = run_queries(count, nq)
        err = [abs(g - t) / t for g, t in zip(got, true, strict=True)]
        res[f"count_exact={exact}"] = {
            "p50_ms": pct(lat, 50),
            "p95_ms": pct(lat, 95),
            "mean_rel_error": float(np.mean(err)),
        }
    lat, _ = run_queries(lambda i: sh.shard.info(), nq)
    res["info"] = {"p50_ms": pct(lat, 50), "p95_ms": pct(lat, 95)}
    for name, params in settings:

        def query(i: int, p: Any = params) -> Any:
            return sh.shard.query(
                q.QueryRequest(
                    limit=K,
                    query=q.Query.Nearest(d.Q[i].tolist(), using="dense"),
                    filter=flts[i],
                    with_payload=True,
                    with_vector=False,
                    params=p,
                )
            )

        lat, hits = run_queries(query, nq)
        ids = [{int(p.payload["doc_id"]) for p in h} for h in hits]
        rec = float(np.mean([len(ids[i] & set(plan.truth[i].tolist())) / K for i in range(nq)]))
        res[name] = {"p50_ms": pct(lat, 50), "p95_ms": pct(lat, 95), "recall_at_10": rec}
    return res


def probe_params(
    store: QdrantEdgeStore, d: Data, plans: dict[str, Plan], nq: int, efs: list[int]
) -> dict[str, Any]:
    """Raw shard calls per shape, single pass: what each part of the store's plan costs and
    which search setting gives what recall (to tune exact_search_max_matches / hnsw_ef)."""
    import qdrant_edge as q

    sh = edge_here(store, KEY)  # raw Edge calls: on a copy opened here
    settings: list[tuple[str, Any]] = [("exact", q.SearchParams(exact=True))]
    settings += [(f"ef={ef}", q.SearchParams(hnsw_ef=ef)) for ef in efs]
    out: dict[str, Any] = {}
    for shape in SHAPES:
        res = out[shape.name] = _probe_shape(sh, d, plans[shape.name], nq, settings)
        print(
            f"  probe {shape.name:15s} "
            + " ".join(
                f"{k}: {v['p50_ms']:.2f}/{v['p95_ms']:.2f}"
                + (f" r={v['recall_at_10']:.4f}" if "recall_at_10" in v else "")
                for k, v in res.items()
            ),
            flush=True,
        )
    return out


def probe_sweep(
    store: QdrantEdgeStore, d: Data, nq: int, ks: list[int], efs: list[int], seed: int
) -> dict[str, Any]:
    """Recall and latency against selectivity: ``module IN [k of 20]`` for each k, raw
    shard queries with exact search, several hnsw_ef values and ACORN (single pass)."""
    import qdrant_edge as q

    sh = edge_here(store, KEY)  # raw Edge calls: on a copy opened here
    settings: list[tuple[str, Any]] = [("exact", q.SearchParams(exact=True))]
    settings += [(f"ef={ef}", q.SearchParams(hnsw_ef=ef)) for ef in efs]
    settings.append(("acorn", q.SearchParams(acorn=q.AcornSearchParams(enable=True))))
    out: dict[str, Any] = {}
    for k in ks:
        shape = Shape(f"module_in{k}", f"module IN [{k} of 20]", _module_in(k))
        plan = make_plan(d, shape, nq, seed + 100 + k)
        res = _probe_shape(sh, d, plan, nq, settings)
        res["selectivity"] = float(np.mean([plan.matches(i) for i in range(nq)])) / len(d.X)
        out[f"in{k}"] = res
        print(
            f"  sweep k={k:2d} sel={res['selectivity']:.3f} "
            + " ".join(
                f"{n}: {res[n]['p50_ms']:.2f}/{res[n]['p95_ms']:.2f} r={res[n]['recall_at_10']:.4f}"
                for n, _ in settings
            ),
            flush=True,
        )
    return out


def measure_empty(root: Path, d: Data, n_empty: int, dim: int) -> dict[str, Any]:
    store = QdrantEdgeStore(QdrantEdgeConfig(path=root / "shards"))
    catalog = Catalog(root / "catalog.sqlite")
    cs = CollectionService(catalog, store)
    out: dict[str, Any] = {"docs": n_empty, "loadavg_start": loadavg()}
    shards = {}
    for name in ("bench-empty", "bench-delete"):
        info = cs.create(name, dimension=dim)
        build = ingest(store, info.shard, d, n_empty)
        assert store.count(info.shard, TENANT, None) == n_empty
        shards[name] = info.shard
        out[f"build_{name}_s"] = build["upsert_s"]
    # where empty() spends its time: wrap the store calls it makes (instance attributes)
    parts: dict[str, float] = {}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                parts[name] = parts.get(name, 0.0) + time.perf_counter() - t

        return wrapper

    for m in ("count", "create_shard", "drop_shard"):
        setattr(store, m, timed(m, getattr(store, m)))
    t0 = time.perf_counter()
    removed = cs.empty("bench-empty", TENANT)
    out["empty_s"] = time.perf_counter() - t0
    for m in ("count", "create_shard", "drop_shard"):
        delattr(store, m)
    out["empty_parts_s"] = parts
    after = cs.get("bench-empty")
    out["empty_removed"] = removed
    # the old shard is dropped in the background after the atomic swap: wait for it
    old_dir = root / "shards" / shards["bench-empty"]
    t_bg = time.perf_counter()
    while old_dir.exists() and time.perf_counter() - t_bg < 60:
        time.sleep(0.05)
    out["empty_background_drop_s"] = time.perf_counter() - t_bg
    out["empty_ok"] = (
        removed == n_empty
        and store.count(after.shard, TENANT, None) == 0
        and not old_dir.exists()
    )
    t0 = time.perf_counter()
    deleted = store.delete_where(shards["bench-delete"], TENANT, None)
    out["delete_where_s"] = time.perf_counter() - t0
    out["delete_where_ok"] = (
        deleted == n_empty and store.count(shards["bench-delete"], TENANT, None) == 0
    )
    out["ratio_delete_over_empty"] = out["delete_where_s"] / out["empty_s"]
    out["loadavg_end"] = loadavg()
    store.close()
    catalog.close()
    print(
        f"  empty() {out['empty_s']:.3f} s ok={out['empty_ok']}; delete_where(None) "
        f"{out['delete_where_s']:.3f} s ok={out['delete_where_ok']}",
        flush=True,
    )
    return out


# -- report ------------------------------------------------------------------------
def f2(x: float) -> str:
    return f"{x:.2f}"


def markdown(r: dict[str, Any]) -> str:
    L: list[str] = []
    a = r["args"]
    ing, opt = r["ingest"], r.get("optimize")
    L.append(
        f"n = {a['n']:,} docs, {DIM}-d; {a['queries']} timed queries per rep after "
        f"{WARMUP} warm-up, median over {a['reps']} reps of p50 / p95 (ms); "
        f"store config exact_search_max_matches={a['exact_max']:,}, hnsw_ef={a['hnsw_ef']}."
    )
    L.append("")
    L.append("| phase | figure |")
    L.append("|---|---|")
    L.append(
        f"| ingest: upsert {ing['batches']} batches of {BATCH} | {ing['upsert_s']:.1f} s "
        f"(wall {ing['wall_s']:.1f} s incl. building Records, {ing['cpu_s']:.0f} CPU-s) |"
    )
    if opt:
        L.append(
            f"| `optimize()` (once) | {opt['wall_s']:.1f} s ({opt['cpu_s']:.0f} CPU-s of "
            f"this process; segments {opt['segments_before']}→{opt['segments_after']}, "
            f"indexed vectors {opt['indexed_after']:,}) |"
        )
    else:
        L.append("| `optimize()` | not run (`--no-optimize`) |")
    L.append(
        f"| disk after ingest{' + optimize' if opt else ''} | {r['disk_mb']:.0f} MB open, "
        f"{r['disk_mb_closed']:.0f} MB after close |"
    )
    e = r.get("empty")
    if e:
        L.append(
            f"| `empty()` of a {e['docs']:,}-doc collection (shard swap) | "
            f"{e['empty_s'] * 1000:.0f} ms ({'ok' if e['empty_ok'] else 'WRONG'}; "
            f"spec < 30 s, target < 2 s; of which "
            + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in e["empty_parts_s"].items())
            + ") |"
        )
        L.append(
            f"| baseline `delete_where(None)` on an identical shard | "
            f"{e['delete_where_s'] * 1000:.0f} ms ({'ok' if e['delete_where_ok'] else 'WRONG'}; "
            f"{e['ratio_delete_over_empty']:.1f}x the `empty()` time) |"
        )
    for state, title in (
        ("plain", "plain segments (never optimized)"),
        ("optimized", "after optimize"),
    ):
        s = r["states"].get(state)
        if not s:
            continue
        L.append("")
        L.append(f"**{title}** (load avg {s['loadavg_start'][0]} → {s['loadavg_end'][0]})")
        L.append("")
        L.append(
            "| filter | matches | store path | where+count p50 / p95 | search p50 / p95 | "
            "numpy exact p50 / p95 | store/numpy p50 / p95 | recall@10 |"
        )
        L.append("|---|---|---|---|---|---|---|---|")
        for shape in SHAPES:
            x = s["shapes"][shape.name]
            lc = x.get("list_count")
            lcs = f"{f2(lc['p50_ms'])} / {f2(lc['p95_ms'])}" if lc else "-"
            L.append(
                f"| {shape.label} | {x['selectivity'] * 100:.1f} % | {x['path']} | {lcs} | "
                f"{f2(x['search']['p50_ms'])} / {f2(x['search']['p95_ms'])} | "
                f"{f2(x['numpy']['p50_ms'])} / {f2(x['numpy']['p95_ms'])} | "
                f"{x['ratio_p50']:.2f} / {x['ratio_p95']:.2f} | {x['recall_at_10']:.4f} |"
            )
        q = s["qps"]
        L.append("")
        L.append(
            f"QPS ({title}): unfiltered {q['unfiltered_1t']['qps']:.0f} (1 thread) / "
            f"{q['unfiltered_4t']['qps']:.0f} (4 threads); team AND tier "
            f"{q['team_and_tier_1t']['qps']:.0f} / {q['team_and_tier_4t']['qps']:.0f}."
        )
    return "\n".join(L)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--qps-reps", type=int, default=3)
    ap.add_argument(
        "--empty-n",
        type=int,
        default=None,
        help="docs in the empty() benchmark (default min(50000, n); 0 = skip)",
    )
    ap.add_argument("--no-optimize", action="store_true")
    ap.add_argument(
        "--exact-max",
        type=int,
        default=QdrantEdgeConfig.model_fields["exact_search_max_matches"].default,
    )
    ap.add_argument("--hnsw-ef", type=int, default=QdrantEdgeConfig.model_fields["hnsw_ef"].default)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--probe",
        action="store_true",
        help="after the optimized-state figures, time raw count/info/query calls per shape "
        "with exact search and several hnsw_ef values (tuning of the store's search_params)",
    )
    ap.add_argument("--probe-ef", type=int, nargs="+", default=[64, 128, 256, 512])
    ap.add_argument(
        "--sweep-k",
        type=int,
        nargs="*",
        default=[2, 3, 4, 5, 6, 7, 8, 10, 12],
        help="with --probe: selectivity sweep over module IN [k of 20] (k*5 %% of the docs)",
    )
    ap.add_argument("--sweep-ef", type=int, nargs="+", default=[256, 512, 1024])
    ap.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="keep the store here (kept afterwards); default: a temp dir, removed",
    )
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="reuse an already built (and optimized) shard in --workdir: "
        "skips ingest/optimize, measures the 'optimized' state only",
    )
    args = ap.parse_args()
    empty_n = min(50_000, args.n) if args.empty_n is None else args.empty_n

    work = args.workdir or Path(tempfile.mkdtemp(prefix="ragline-bench-store-"))
    work.mkdir(parents=True, exist_ok=True)
    r: dict[str, Any] = {
        "benchmark": "store",
        "engine": "qdrant-edge",
        "args": {
            "n": args.n,
            "queries": args.queries,
            "reps": args.reps,
            "qps_reps": args.qps_reps,
            "empty_n": empty_n,
            "optimize": not args.no_optimize,
            "exact_max": args.exact_max,
            "hnsw_ef": args.hnsw_ef,
            "seed": args.seed,
            "reuse": args.reuse,
        },
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
            "platform": platform.platform(),
            "loadavg_start": loadavg(),
        },
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "states": {},
    }
    try:
        from importlib.metadata import version

        r["machine"]["qdrant_edge"] = version("qdrant-edge-py")
    except Exception:
        pass
    print(f"workdir {work}; load {loadavg()}", flush=True)
    t0 = time.perf_counter()
    d = make_data(args.n, args.queries, args.seed)
    print(f"data: {time.perf_counter() - t0:.1f} s", flush=True)
    t0 = time.perf_counter()
    plans = {s.name: make_plan(d, s, args.queries, args.seed) for s in SHAPES}
    top1 = float(
        np.mean([d.X[plans["unfiltered"].truth[i][0]] @ d.Q[i] for i in range(args.queries)])
    )
    top10 = float(
        np.mean([d.X[plans["unfiltered"].truth[i][-1]] @ d.Q[i] for i in range(args.queries)])
    )
    r["data"] = {"mean_cos_top1": top1, "mean_cos_top10": top10}
    print(
        f"ground truth: {time.perf_counter() - t0:.1f} s; mean cos top1 {top1:.3f} "
        f"top10 {top10:.3f}",
        flush=True,
    )

    store = QdrantEdgeStore(
        QdrantEdgeConfig(
            path=work / "store", hnsw_ef=args.hnsw_ef, exact_search_max_matches=args.exact_max,
        )
    )
    if args.reuse:
        assert store.has_shard(KEY), f"no shard to reuse in {work / 'store'}"
        assert store.count(KEY, TENANT, None) == args.n, "reused shard has another size"
        r["ingest"] = {
            "upsert_s": float("nan"),
            "wall_s": float("nan"),
            "cpu_s": float("nan"),
            "batches": 0,
            "reused": True,
        }
    else:
        if store.has_shard(KEY):
            store.drop_shard(KEY)
        r["ingest"] = ingest(store, KEY, d, args.n)
        print(f"ingest: upsert {r['ingest']['upsert_s']:.1f} s", flush=True)
        assert store.count(KEY, TENANT, None) == args.n
        print("measuring plain segments (never optimized)", flush=True)
        r["states"]["plain"] = measure_state(
            store, d, plans, args.queries, args.reps, args.qps_reps
        )
    sh = edge_here(store, KEY)  # raw Edge calls: on a copy opened here
    if not args.no_optimize and not args.reuse:
        before = sh.shard.info()
        la0, c0, t0 = loadavg(), cpu_s(), time.perf_counter()
        store.optimize(KEY)
        wall, cpu = time.perf_counter() - t0, cpu_s() - c0
        sh.close()
        sh = edge_here(store, KEY)
        after = sh.shard.info()
        r["optimize"] = {
            "wall_s": wall,
            "cpu_s": cpu,
            "loadavg_start": la0,
            "loadavg_end": loadavg(),
            "segments_before": before.segments_count,
            "segments_after": after.segments_count,
            "indexed_before": before.indexed_vectors_count,
            "indexed_after": after.indexed_vectors_count,
        }
        print(
            f"optimize: {wall:.1f} s wall, {cpu:.0f} CPU-s, indexed {after.indexed_vectors_count}",
            flush=True,
        )
    if args.reuse or not args.no_optimize:
        info = sh.shard.info()
        r["optimized_info"] = {
            "segments": info.segments_count,
            "indexed_vectors": info.indexed_vectors_count,
        }
        print("measuring after optimize", flush=True)
        r["states"]["optimized"] = measure_state(
            store, d, plans, args.queries, args.reps, args.qps_reps
        )
        if args.probe:
            print("probing search settings", flush=True)
            r["probe"] = probe_params(store, d, plans, args.queries, args.probe_ef)
            if args.sweep_k:
                r["sweep"] = probe_sweep(
                    store, d, args.queries, args.sweep_k, args.sweep_ef, args.seed
                )
    r["disk_mb"] = store.size_bytes(KEY) / 1e6
    store.close()
    r["disk_mb_closed"] = store.size_bytes(KEY) / 1e6
    if empty_n:
        print(f"empty() benchmark at {empty_n} docs", flush=True)
        r["empty"] = measure_empty(work / "empty", d, empty_n, DIM)
        shutil.rmtree(work / "empty", ignore_errors=True)
    r["machine"]["loadavg_end"] = loadavg()
    r["finished"] = datetime.now(UTC).isoformat(timespec="seconds")

    md = markdown(r)
    r["markdown"] = md
    out_dir = ROOT / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"store_{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    out.write_text(json.dumps(r, indent=2, default=float))
    print()
    print(md)
    print(f"\nJSON: {out}")
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
