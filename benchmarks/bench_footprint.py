#!/usr/bin/env python
"""Where the milliseconds and the bytes of a search go (issue 39).

On a data directory holding the SciFact corpus (``--build`` ingests it first: title +
text of each of the 5,183 documents, ``embed: local``, batches of 128, as ``ragline eval
beir`` does), in one process, with the embedding cache off so every query pays for its
embedding:

* **time**, per stage of one hybrid search, each stage timed on the same query one
  after the other and the queries taken in turn (so load drift hits every stage alike),
  p50 and mean over ``--queries`` SciFact test queries:
  tokeniser; embedding (tokeniser + ONNX model + pooling, one text); the micro-batcher's
  hand-off; the store's dense leg and BM25 leg alone (as deep as hybrid takes them) and
  the hybrid query (both legs fused by Edge) through the shard process; the same hybrid
  query on an in-process copy of the shard (the difference is the round trip: pickling
  and the socket); pickling the hits alone; the whole ``search`` (library path); and the
  HTTP rendering of the response (the route's ``render`` and the JSON bytes);
* **memory**: PSS (proportional set size: shared pages divided among the processes that
  map them) of every process of the tree, split anonymous / file-backed, after each step
  (start, model loaded, shard opened, after the searches); glibc's malloc arenas of the
  server process (count and resident bytes); the embedding cache's bytes;
* **disk**: the data directory's allocated (``du``) and apparent (``du --apparent-size``)
  bytes, per kind of file, and per chunk.

    .venv/bin/python benchmarks/bench_footprint.py --data-dir /tmp/fp --build   # ~3 min
    .venv/bin/python benchmarks/bench_footprint.py --data-dir /tmp/fp --queries 200

Prints the tables (Markdown) and writes JSON to ``--out`` when given. The library path
is what ``ragline eval`` and the peers benchmark (``bench_peers.py``) time; the server
adds HTTP parsing and the rendering measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
SCIFACT = next((p / "shared" / "data" / "beir" / "scifact" for p in (_REPO.parent,
                _REPO.parent.parent) if (p / "shared" / "data" / "beir").is_dir()),
               _REPO.parent / "shared" / "data" / "beir" / "scifact")
HEAP_MAX = 64 * 1024 * 1024  # glibc's non-main arenas are 64 MiB-aligned reservations


def load_corpus(data: Path) -> list[tuple[str, str, int]]:
    docs = []
    with (data / "corpus.jsonl").open(encoding="utf-8") as f:
        for i, line in enumerate(f):
            if not line.strip():
                continue
            d = json.loads(line)
            title = (d.get("title") or "").strip()
            text = f"{title}\n{d.get('text', '')}" if title else d.get("text", "")
            docs.append((str(d["_id"]), text, i % 20))
    return docs


def load_queries(data: Path) -> list[str]:
    allq = {}
    with (data / "queries.jsonl").open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                allq[str(d["_id"])] = d["text"]
    test: list[str] = []
    with (data / "qrels" / "test.tsv").open(encoding="utf-8") as f:
        for line in f:
            parts = line.strip().split("\t")
            if len(parts) >= 3 and parts[0] in allq and allq[parts[0]] not in test:
                test.append(allq[parts[0]])
    return test


# -- memory of the process tree --------------------------------------------------------
def tree(root: int) -> list[int]:
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    todo.extend(int(x) for x in f.read().split())
        except OSError:
            pass
    return out


def rollup(pid: int) -> dict[str, int]:
    """kB fields of /proc/PID/smaps_rollup (Rss, Pss, Pss_Anon, Pss_File, ...)."""
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[2] == "kB":
                    out[parts[0].rstrip(":")] = int(parts[1])
    except OSError:
        pass
    return out


def role(pid: int, me: int) -> str:
    if pid == me:
        return "main"
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return "?"
    if "rebuild" in cmd:
        return "index build"
    if "resource_tracker" in cmd:
        return "multiprocessing resource tracker"
    if "forkserver" in cmd:
        return "fork server" if parent == me else "shard process"
    return cmd[:40]


def tree_memory(me: int) -> list[dict[str, Any]]:
    rows = []
    for pid in tree(me):
        r = rollup(pid)
        rows.append({"pid": pid, "role": role(pid, me), "pss_mb": r.get("Pss", 0) / 1024,
                     "pss_anon_mb": r.get("Pss_Anon", 0) / 1024,
                     "pss_file_mb": r.get("Pss_File", 0) / 1024,
                     "rss_mb": r.get("Rss", 0) / 1024})
    return rows


def arenas(pid: int) -> dict[str, float]:
    """glibc malloc arenas in /proc/PID/smaps: ``[heap]`` (the main arena) and the
    anonymous 64 MiB-aligned reservations of the others (a read-write part followed by
    a ``---p`` guard part, 64 MiB together)."""
    regions: list[tuple[int, int, str, str, int]] = []  # start, end, perms, name, rss kB
    cur: list[Any] | None = None
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                head = line.split()
                if "-" in head[0] and len(head) >= 5 and ":" not in head[0]:
                    if cur is not None:
                        regions.append(tuple(cur))  # type: ignore[arg-type]
                    a, b = head[0].split("-")
                    cur = [int(a, 16), int(b, 16), head[1], head[5] if len(head) > 5 else "", 0]
                elif head[0] == "Rss:" and cur is not None:
                    cur[4] = int(head[1])
        if cur is not None:
            regions.append(tuple(cur))  # type: ignore[arg-type]
    except OSError:
        return {}
    main = sum(r[4] for r in regions if r[3] == "[heap]")
    count, rss = 0, 0
    for i, (start, end, perms, name, kb) in enumerate(regions):
        if name or perms[:2] != "rw" or start % HEAP_MAX:
            continue
        size = end - start
        if i + 1 < len(regions) and regions[i + 1][0] == end and regions[i + 1][2] == "---p":
            size += regions[i + 1][1] - regions[i + 1][0]
        if size == HEAP_MAX:
            count += 1
            rss += kb
    return {"main_arena_mb": main / 1024, "thread_arenas": count,
            "thread_arenas_rss_mb": rss / 1024}


def threads(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


# -- disk --------------------------------------------------------------------------------
def du(path: Path) -> tuple[int, int]:
    """(allocated, apparent) bytes."""
    a = subprocess.run(["du", "-s", "--block-size=1", str(path)], capture_output=True, text=True)
    b = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True)
    return int(a.stdout.split()[0]), int(b.stdout.split()[0])


def disk_by_kind(root: Path) -> dict[str, list[int]]:
    """Allocated and apparent bytes per kind of file (its name without digits)."""
    kinds: dict[str, list[int]] = {}
    for p in root.rglob("*"):
        if not p.is_file() or p.is_symlink():
            continue
        st = p.stat()
        name = "".join("#" if c.isdigit() else c for c in p.name)
        if len(name) > 40 or ("-" in name and len(name) > 30):
            name = "(uuid-named) " + p.suffix
        k = kinds.setdefault(name, [0, 0, 0])
        k[0] += st.st_blocks * 512
        k[1] += st.st_size
        k[2] += 1
    return kinds


# -- timing ------------------------------------------------------------------------------
def summary(xs: list[float]) -> dict[str, float]:
    s = sorted(xs)
    return {"p50_ms": statistics.median(s), "mean_ms": statistics.fmean(s),
            "p95_ms": s[min(len(s) - 1, int(len(s) * 0.95))], "n": len(s)}


def build(data_dir: Path, collection: str) -> dict[str, Any]:
    from ragline.facade import DocumentInput, Ragline
    from ragline.settings import Settings

    docs = load_corpus(SCIFACT)
    rl = Ragline(Settings(data_dir=data_dir)).start()
    try:
        me = rl.owner()
        rl.collections.create(me, collection, {"source": "beir"}, None, None,
                             {"provider": "local", "model": None})
        t = time.perf_counter()
        for s in range(0, len(docs), 128):
            rl.documents.add(me, collection, [DocumentInput(t, {"beir_id": i, "bucket": b},
                                                            None, i)
                                              for i, t, b in docs[s:s + 128]])
        return {"ingest_s": time.perf_counter() - t, "docs": len(docs)}
    finally:
        rl.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--collection", default="scifact")
    ap.add_argument("--build", action="store_true", help="ingest SciFact first if missing")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    res: dict[str, Any] = {"load_start": os.getloadavg(), "t_start": time.time()}
    if a.build and not (a.data_dir / "catalog.sqlite3").exists():
        res["build"] = build(a.data_dir, a.collection)
        print("built", res["build"], flush=True)

    import numpy as np
    from fastapi.encoders import jsonable_encoder

    from ragline.api.json_guard import SafeJSONResponse
    from ragline.api.routes.search import render
    from ragline.core.types import Fusion, SearchMode, StoreQuery
    from ragline.facade import Ragline, SearchRequest
    from ragline.providers.stores.qdrant_edge.provider import QdrantEdgeConfig, QdrantEdgeStore
    from ragline.settings import Settings

    me_pid = os.getpid()
    mem: dict[str, Any] = {}
    mem["imports"] = tree_memory(me_pid)
    settings = Settings(data_dir=a.data_dir, embedding_cache_size=0)
    rl = Ragline(settings).start()
    mem["started"] = tree_memory(me_pid)
    caller = rl.owner()
    svc = rl.services
    info = svc.collections.get(a.collection)
    assert info.embedding_provider is not None
    cached = svc.embedders.get(info.embedding_provider, info.embedding_model)
    inner: Any = cached.inner
    inner.embed(["load the int8 model with a query of more than eight word pieces"], "query")
    mem["model_loaded (int8)"] = tree_memory(me_pid)
    inner.embed(["ok"], "query")  # texts of <= fp32_max_tokens word pieces: the fp32 graph
    mem["first short text (fp32 graph)"] = tree_memory(me_pid)
    queries = load_queries(SCIFACT)[: a.queries]
    rl.search.query_sync(caller, SearchRequest(collection=a.collection, query=queries[0]))
    mem["shard_open"] = tree_memory(me_pid)

    scope = rl.access.read_scope(caller)
    store: Any = svc.retrieval.store
    cand = settings.hybrid_candidates
    batcher = svc.embedders.batcher(info.embedding_provider, info.embedding_model)

    def sq(mode: SearchMode, vec: Any, text: str, limit: int) -> StoreQuery:
        """As retrieval sends it: hybrid top 10 with the hits' vectors (for relevance);
        the legs alone without (Edge's hybrid does not return its candidates')."""
        return StoreQuery(scope, mode, limit, vector=None if mode == SearchMode.SPARSE else vec,
                          text=text, where=None, with_vectors=mode == SearchMode.HYBRID,
                          score_threshold=None, rrf_k=settings.rrf_k, candidates=cand,
                          fusion=Fusion(settings.hybrid_fusion))

    for q in queries[:20]:  # steady state of the library path, before the copy below
        rl.search.query_sync(caller, SearchRequest(collection=a.collection, query=q))
    mem["after_20_searches"] = tree_memory(me_pid)
    res["arenas_main"] = arenas(me_pid)
    res["threads_main"] = threads(me_pid)
    # an in-process copy of the shard: the same query without the shard process
    tmp = Path(tempfile.mkdtemp(prefix="fp-"))
    shutil.copytree(a.data_dir / "collections" / info.shard, tmp / info.shard, symlinks=True)
    local = QdrantEdgeStore(QdrantEdgeConfig(path=tmp, shard_processes=False))

    async def nothing() -> None:
        return None

    async def via_batcher(text: str) -> Any:
        return await batcher.embed_one(text, "query")

    stages: dict[str, Callable[[str, Any], Any]] = {
        "tokeniser": lambda q, v: inner.count_tokens(q),
        "embedding (tokeniser + model + pooling)": lambda q, v: inner.embed([q], "query"),
        "event-loop hop (call_sync)": lambda q, v: rl.call_sync(nothing),
        "embedding through the micro-batcher (+ hop)": lambda q, v: rl.call_sync(via_batcher, q),
        f"store: dense leg alone (top {cand})":
            lambda q, v: store.query_batch(info.shard, [sq(SearchMode.DENSE, v, q, cand)]),
        f"store: BM25 leg alone (top {cand})":
            lambda q, v: store.query_batch(info.shard, [sq(SearchMode.SPARSE, v, q, cand)]),
        "store: hybrid top 10 (shard process)":
            lambda q, v: store.query_batch(info.shard, [sq(SearchMode.HYBRID, v, q, 10)]),
        "store: hybrid top 10 (in-process copy)":
            lambda q, v: local.query_batch(info.shard, [sq(SearchMode.HYBRID, v, q, 10)]),
        "pickle + unpickle the hybrid hits":
            lambda q, v: pickle.loads(pickle.dumps(
                local.query_batch(info.shard, [sq(SearchMode.HYBRID, v, q, 10)]), 5)),
        "search, whole (library path)": lambda q, v: rl.search.query_sync(
            caller, SearchRequest(collection=a.collection, query=q, mode="hybrid", limit=10)),
    }
    times: dict[str, list[float]] = {k: [] for k in stages}
    times["HTTP rendering (render + JSON)"] = []
    for rep in range(2):  # the first pass warms every path
        for q in queries:
            v = np.asarray(inner.embed([q], "query")[0], dtype=np.float32)
            got: dict[str, float] = {}
            for name, fn in stages.items():
                t = time.perf_counter()
                out = fn(q, v)
                got[name] = (time.perf_counter() - t) * 1000
                if name.startswith("search, whole"):
                    t = time.perf_counter()
                    SafeJSONResponse(jsonable_encoder(render(out)))  # as FastAPI does
                    got["HTTP rendering (render + JSON)"] = (time.perf_counter() - t) * 1000
            if rep:
                for k, x in got.items():
                    times[k].append(x)
    # Fusion runs inside Edge's hybrid query: the legs alone return their 100 payloads
    # each, more than the fused top 10, so no subtraction of the two isolates it.
    res["time"] = {k: summary(v) for k, v in times.items()}
    mem["after_all (main maps the in-process copy too)"] = tree_memory(me_pid)
    res["memory"] = mem
    res["arenas_after_all"] = arenas(me_pid)
    res["embedding_cache"] = cached.stats()
    local.close()
    shutil.rmtree(tmp, ignore_errors=True)
    points = store.count(info.shard, scope, None)
    rl.close()
    alloc, apparent = du(a.data_dir)
    res["disk"] = {"allocated": alloc, "apparent": apparent, "chunks": points,
                   "by_kind": disk_by_kind(a.data_dir)}
    res["load_end"] = os.getloadavg()
    res["env"] = {k: os.environ.get(k) for k in ("MALLOC_ARENA_MAX", "OMP_NUM_THREADS")}
    report(res)
    if a.out:
        a.out.write_text(json.dumps(res, indent=1))


def report(res: dict[str, Any]) -> None:
    print(f"\nload {res['load_start']} -> {res['load_end']}; env {res['env']}\n")
    print("| stage of one hybrid search | p50 ms | mean ms | p95 ms |\n|---|---:|---:|---:|")
    for k, s in res["time"].items():
        print(f"| {k} | {s['p50_ms']:.2f} | {s['mean_ms']:.2f} | {s['p95_ms']:.2f} |")
    print("\n| step | process | PSS MB | anon | file | RSS MB |\n|---|---|---:|---:|---:|---:|")
    for step, rows in res["memory"].items():
        for r in rows:
            print(f"| {step} | {r['role']} | {r['pss_mb']:.1f} | {r['pss_anon_mb']:.1f} | "
                  f"{r['pss_file_mb']:.1f} | {r['rss_mb']:.1f} |")
        print(f"| {step} | **tree** | **{sum(r['pss_mb'] for r in rows):.1f}** | | | |")
    print(f"\nmalloc arenas (main process): after 20 searches {res['arenas_main']}, "
          f"at the end {res['arenas_after_all']}; threads {res['threads_main']}; "
          f"embedding cache {res['embedding_cache']}")
    d = res["disk"]
    n = max(d["chunks"], 1)
    print(f"\ndisk: allocated {d['allocated'] / 1e6:.1f} MB, apparent "
          f"{d['apparent'] / 1e6:.1f} MB, {d['chunks']} chunks: {d['allocated'] / n:,.0f} "
          f"/ {d['apparent'] / n:,.0f} bytes a chunk")
    print("\n| file kind | files | allocated MB | apparent MB |\n|---|---:|---:|---:|")
    for k, (al, ap, cnt) in sorted(d["by_kind"].items(), key=lambda kv: -kv[1][1])[:15]:
        print(f"| `{k}` | {cnt} | {al / 1e6:.2f} | {ap / 1e6:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
