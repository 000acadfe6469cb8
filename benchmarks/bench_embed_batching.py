"""The embedding micro-batcher's policies at every concurrency, in one process.

``MicroBatcher`` over the real local model (all-MiniLM-L6-v2, int8; cache off), driven
by C closed-loop asyncio clients (each embeds a SciFact query, then the next) for a few
seconds per point, for C in ``--clients``. Policies, interleaved per repetition:
``no_wait`` (the default since issue 38: a free worker takes a query at once),
``window_3ms`` (the default before: a lone query waited up to 3 ms for company) and
``busy_window`` (3 ms, but only for queries arriving while a batch runs) and ``off``
(``max_batch=1``: every query its own model call). No HTTP, no store: this isolates the
batching policy from the rest of the request; ``--loop-ms`` spends that much CPU on the
event loop per query (a request's parsing and JSON: ~1.5 ms in the server), which
spreads arrivals out as HTTP does. Reports QPS, p50/p95 and
the process's CPU ms per query (``time.process_time``: every thread), which a loaded
machine distorts less than wall time.

    python benchmarks/bench_embed_batching.py --queries ../shared/data/beir/scifact/queries.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from ragline.providers.embedders.batcher import MicroBatcher
from ragline.providers.embedders.local_onnx import LocalOnnxEmbedder
from ragline.settings import Settings

POLICIES: dict[str, dict[str, Any]] = {
    "no_wait": {"max_wait_ms": 0},
    "busy_window": {"max_wait_ms": 3},  # waits only while a batch runs
    "window_3ms": {"max_wait_ms": 3, "wait_when_idle": True},
    "off": {"max_batch": 1, "max_wait_ms": 0},
}


async def point(batcher: MicroBatcher, queries: list[str], clients: int,
                seconds: float, loop_ms: float = 0) -> dict[str, float]:
    lat: list[float] = []
    stop = time.perf_counter() + seconds
    cpu0 = time.process_time()

    async def client(k: int) -> None:
        i = k * 97
        while time.perf_counter() < stop:
            t = time.perf_counter()
            while time.perf_counter() - t < loop_ms / 1000:  # the request's loop work
                pass
            await asyncio.sleep(0)
            await batcher.embed_one(queries[i % len(queries)], "query")
            lat.append(time.perf_counter() - t)
            i += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(clients)))
    wall = time.perf_counter() - t0
    lat.sort()
    return {"qps": len(lat) / wall, "p50_ms": lat[len(lat) // 2] * 1000,
            "p95_ms": lat[int(len(lat) * 0.95)] * 1000,
            "cpu_ms": (time.process_time() - cpu0) * 1000 / len(lat)}


async def run(args: argparse.Namespace, emb: LocalOnnxEmbedder, queries: list[str]
              ) -> dict[str, dict[str, list[dict[str, float]]]]:
    workers = Settings().embed_workers
    out: dict[str, dict[str, list[dict[str, float]]]] = {p: {} for p in args.policies}
    for r in range(args.reps):
        names = args.policies[r % len(args.policies):] + args.policies[:r % len(args.policies)]
        for c in args.clients:
            for name in names:
                b = MicroBatcher(emb, workers=workers, **POLICIES[name])
                await point(b, queries, c, 0.3)  # threads up, caches warm
                out[name].setdefault(str(c), []).append(
                    await point(b, queries, c, args.seconds, args.loop_ms))
                await b.aclose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", required=True)
    ap.add_argument("--clients", default="1,4,16,64,100")
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--seconds", type=float, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--loop-ms", type=float, default=1.5)
    args = ap.parse_args()
    args.clients = [int(c) for c in args.clients.split(",")]
    args.policies = args.policies.split(",")
    queries = [json.loads(x)["text"] for x in Path(args.queries).read_text().splitlines()
               if x.strip()]
    emb = LocalOnnxEmbedder()
    emb.embed(["load the model"], "query")
    load = [os.getloadavg()[0]]
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    res = asyncio.run(run(args, emb, queries))
    load.append(os.getloadavg()[0])
    print(f"{started} UTC, load average {min(load):.1f}-{max(load):.1f}; "
          f"{Settings().embed_workers} workers, {args.loop_ms} ms loop work a query; "
          f"median of {args.reps} x {args.seconds} s "
          f"(QPS range: min-max over repetitions)")
    print("| clients | policy | QPS | QPS range | p50 ms | p95 ms | CPU ms / query | "
          "QPS / off |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for c in map(str, args.clients):
        med = {p: {k: statistics.median(r[k] for r in res[p][c]) for k in res[p][c][0]}
               for p in args.policies}
        for p in args.policies:
            m, qs = med[p], [r["qps"] for r in res[p][c]]
            ref = med.get("off", med[args.policies[0]])["qps"]
            print(f"| {c} | {p} | {m['qps']:.0f} | {min(qs):.0f}-{max(qs):.0f} | "
                  f"{m['p50_ms']:.1f} | {m['p95_ms']:.1f} | {m['cpu_ms']:.2f} | "
                  f"{m['qps'] / ref:.2f} |")
    Path("benchmarks/results").mkdir(parents=True, exist_ok=True)
    Path(f"benchmarks/results/embed_batching_{int(time.time())}.json").write_text(
        json.dumps({"runs": res, "load": load, "started": started}, indent=1))


if __name__ == "__main__":
    main()
