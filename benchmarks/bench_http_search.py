"""End-to-end HTTP search latency and QPS with 100 concurrent clients.

Starts the real server (``ragline serve``) on a data directory that already
holds a collection (e.g. the SciFact one made by ``ragline eval beir``), fires
text queries from many concurrent clients, and reports p50/p95 latency and QPS
per mode, with micro-batching on and off in the same run (batching off =
``RAGLINE_EMBED_MAX_BATCH=1``, the baseline).

    python benchmarks/bench_http_search.py --data-dir /tmp/evald --collection scifact \
        --queries ../shared/data/beir/scifact/queries.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.live_server import LiveServer


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


async def load(url: str, collection: str, queries: list[str], mode: str, clients: int,
               total: int) -> dict[str, float]:
    lat: list[float] = []
    errors = 0
    it = iter(range(total))

    async def worker(c: httpx.AsyncClient) -> None:
        nonlocal errors
        for i in it:
            q = queries[i % len(queries)]
            t = time.perf_counter()
            r = await c.post(f"/collections/{collection}/search",
                             json={"query": q, "mode": mode, "limit": 10})
            lat.append((time.perf_counter() - t) * 1000)
            if r.status_code != 200:
                errors += 1

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as c:
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(c) for _ in range(clients)))
        wall = time.perf_counter() - t0
    return {"p50_ms": round(pct(lat, 50), 1), "p95_ms": round(pct(lat, 95), 1),
            "qps": round(total / wall, 1), "errors": errors, "requests": total}


def run(args: argparse.Namespace, batching: bool) -> dict[str, dict[str, float]]:
    env = {"RAGLINE_EMBED_MAX_BATCH": "64" if batching else "1",
           "RAGLINE_EMBED_MAX_WAIT_MS": "3" if batching else "0"}
    srv = LiveServer(Path(args.data_dir), env=env)
    out: dict[str, dict[str, float]] = {}
    try:
        srv.wait_ready(120)
        qs = [json.loads(x)["text"] for x in Path(args.queries).read_text().splitlines() if x]
        for mode in args.modes.split(","):
            # warm-up, then reps; each rep uses fresh query texts so the cache does not help
            asyncio.run(load(srv.url, args.collection, qs[:50], mode, 10, 50))
            reps = []
            for rep in range(args.reps):
                offset = 50 + rep * args.requests
                sub = (qs[offset:] + qs[:offset])[: args.requests]
                reps.append(asyncio.run(load(srv.url, args.collection, sub, mode,
                                             args.clients, args.requests)))
            out[mode] = {k: statistics.median(r[k] for r in reps) for k in reps[0]}
    finally:
        srv.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--collection", default="scifact")
    ap.add_argument("--queries", required=True)
    ap.add_argument("--modes", default="hybrid,dense,sparse")
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    res = {"batching_on": run(args, True), "batching_off": run(args, False)}
    print("| mode | micro-batching | p50 ms | p95 ms | QPS | errors |")
    print("|---|---|---|---|---|---|")
    for label, r in res.items():
        for mode, m in r.items():
            print(f"| {mode} | {label.split('_')[1]} | {m['p50_ms']} | {m['p95_ms']} | "
                  f"{m['qps']} | {int(m['errors'])} |")
    for mode in res["batching_on"]:
        on, off = res["batching_on"][mode], res["batching_off"][mode]
        print(f"{mode}: QPS ratio on/off = {on['qps'] / off['qps']:.2f}, "
              f"p95 ratio on/off = {on['p95_ms'] / off['p95_ms']:.2f}")
    Path("benchmarks/results").mkdir(parents=True, exist_ok=True)
    Path(f"benchmarks/results/http_search_{int(time.time())}.json").write_text(
        json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
