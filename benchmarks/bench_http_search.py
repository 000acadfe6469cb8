"""End-to-end HTTP search latency and QPS with 100 concurrent connections.

Starts the real server (``ragline serve``) on a data directory that already holds a
collection (e.g. the SciFact one made by ``ragline eval beir``) and drives it with
``wrk`` (Debian package ``wrk``; a C load generator, so the client is not the
bottleneck — an httpx client with 100 connections topped out near 55 QPS here).
The server runs with the embedding cache off (``RAGLINE_EMBEDDING_CACHE_SIZE=0``)
so every request pays for its query embedding, and the query texts are the real
SciFact queries (1,109, mean 22 word pieces), cycled: an earlier version appended a
request counter to make texts unique, which lengthened every query by ~6 word
pieces. Three server configurations run in the same invocation, interleaved per
repetition (a server per configuration and repetition): everything on (the default),
embedding micro-batching off (``RAGLINE_EMBED_MAX_BATCH=1``, the baseline the issue
asks for), and all coalescing off (also ``RAGLINE_SEARCH_MAX_BATCH=1``).

    python benchmarks/bench_http_search.py --data-dir /tmp/evald --collection scifact \
        --queries ../shared/data/beir/scifact/queries.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.live_server import LiveServer

LUA = r"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local qs = {%s}
local mode = "%s"
local extra = [[%s]]
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
local n = 0
request = function()
  n = n + 1
  -- the two wrk threads walk the queries from different starting points
  local q = qs[((n * 7 + tid * 131) %% #qs) + 1]
  return wrk.format(nil, nil, nil, '{"query": "' .. q .. '", "mode": "' .. mode .. '"' ..
                    extra .. '}')
end
done = function(summary, latency, requests)
  for _, p in pairs({50, 90, 95, 99}) do
    io.write(string.format("P%%d_US %%d\n", p, latency:percentile(p)))
  end
end
"""


def wrk(url: str, script: Path, conns: int, seconds: int) -> dict[str, float]:
    out = subprocess.run(["wrk", "-t2", f"-c{conns}", f"-d{seconds}s", "--latency", "-s",
                          str(script), url], capture_output=True, text=True, check=True).stdout

    def ms(p: int) -> float:
        m = re.search(rf"P{p}_US (\d+)", out)
        assert m, out
        return int(m.group(1)) / 1000

    qps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"p50_ms": ms(50), "p90_ms": ms(90), "p95_ms": ms(95), "p99_ms": ms(99), "qps": qps,
            "non_2xx": float(bad.group(1)) if bad else 0.0}


CONFIGS = {
    "on": {},
    "embed_batching_off": {"RAGLINE_EMBED_MAX_BATCH": "1", "RAGLINE_EMBED_MAX_WAIT_MS": "0"},
    "all_batching_off": {"RAGLINE_EMBED_MAX_BATCH": "1", "RAGLINE_EMBED_MAX_WAIT_MS": "0",
                         "RAGLINE_SEARCH_MAX_BATCH": "1"},
    # Edge in the server process instead of a shard process per open shard
    "shard_processes_off": {"RAGLINE_STORE_OPTIONS": '{"shard_processes": false}'},
}


def run_once(args: argparse.Namespace, config: dict[str, str],
             queries: list[str]) -> dict[str, dict[str, float]]:
    """One server, every mode: warm-up, then one measured wrk run per mode. A config
    with ``BASELINE_SRC`` runs the server from that checkout (its ``src`` first on the
    path, its own ``.venv`` python when it has one)."""
    config = dict(config)
    src = config.pop("BASELINE_SRC", None)
    extra: dict[str, str] = {}
    data_dir = args.data_dir
    if src:
        extra["PYTHONPATH"] = str(Path(src) / "src")
        data_dir = args.baseline_data_dir or data_dir
    srv = LiveServer(Path(data_dir),
                     env={"RAGLINE_EMBEDDING_CACHE_SIZE": "0", "RAGLINE_AUTH": "off", **config,
                          **extra})
    out: dict[str, dict[str, float]] = {}
    try:
        srv.wait_ready(120)
        url = f"{srv.url}/collections/{args.collection}/search"
        quoted = ",".join(f"[[{q}]]" for q in queries)  # Lua long strings
        with tempfile.TemporaryDirectory() as tmp:
            for mode in args.modes.split(","):
                script = Path(tmp) / f"{mode}.lua"
                # "sparse-norel": sparse with "relevance": false (no query embedding)
                base, _, flag = mode.partition("-")
                flags = ', "relevance": false' if flag == "norel" else ""
                script.write_text(LUA % (quoted, base, flags))
                wrk(url, script, 10, 3)  # warm-up
                out[mode] = wrk(url, script, args.connections, args.seconds)
    finally:
        srv.stop()
    return out


def build_random(data_dir: Path, collection: str, corpus: Path,
                 src: str | None = None, src_env: dict[str, str] | None = None) -> None:
    """A collection of the corpus texts with *random* 384-d vectors and server-side
    embedding of queries (``embed: local``): sparse search is the real thing, dense and
    hybrid pay the real query embedding and graph search, without embedding 5,000
    documents first (minutes on 2 cores). Recall is meaningless on it; QPS is not.
    ``src``: built by the server of that checkout (``--baseline-data-dir``); the body
    names the embedder both ways, ``embed`` (today) and ``embedding_provider`` (the
    first round's, where it turned server-side embedding on; metadata only today)."""
    import numpy as np

    env = {"RAGLINE_AUTH": "off", **({"PYTHONPATH": str(Path(src) / "src")} if src else {}),
           **(src_env or {})}
    srv = LiveServer(data_dir, env=env)
    try:
        srv.wait_ready(120)
        r = httpx.post(f"{srv.url}/collections", json={
            "name": collection, "embed": {"provider": "local"},
            "embedding_provider": "local"}, timeout=600)
        assert r.status_code in (200, 201), r.text
        docs = [json.loads(x) for x in corpus.read_text().splitlines() if x.strip()]
        rng = np.random.default_rng(0)
        for lo in range(0, len(docs), 500):
            batch = docs[lo:lo + 500]
            vecs = rng.normal(size=(len(batch), 384)).astype(np.float32).tolist()
            body = {"documents": [{"id": d["_id"], "text": f"{d.get('title', '')} {d['text']}",
                                   "embedding": v} for d, v in zip(batch, vecs, strict=True)]}
            r = httpx.post(f"{srv.url}/collections/{collection}/documents", json=body,
                           timeout=600)
            assert r.status_code == 200, r.text
    finally:
        srv.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--collection", default="scifact")
    ap.add_argument("--queries", required=True)
    ap.add_argument("--modes", default="hybrid,dense,sparse", help="also sparse-norel: sparse "
                    "with \"relevance\": false")
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--configs", default=",".join(CONFIGS),
                    help=f"comma-separated subset of {', '.join(CONFIGS)}")
    ap.add_argument("--build-random-from", type=Path, help="corpus.jsonl: first build the "
                    "collection in --data-dir with random vectors (see build_random)")
    ap.add_argument("--baseline-src", help="also run a server from this checkout (e.g. "
                    "/work/main) with the defaults, as config 'baseline', interleaved")
    ap.add_argument("--baseline-data-dir", help="the baseline server's own data directory "
                    "(a checkout whose data format differs, e.g. the first round's); with "
                    "--build-random-from it is built by the baseline's code when missing")
    ap.add_argument("--baseline-env", action="append", default=[], help="KEY=VALUE for the "
                    "baseline server (e.g. RAGLINE_MODELS_DIR where the first round looked for "
                    "its built embedding model)")
    args = ap.parse_args()
    baseline_env = dict(e.split("=", 1) for e in args.baseline_env)
    if args.baseline_src:
        CONFIGS["baseline"] = {"BASELINE_SRC": args.baseline_src, **baseline_env}
        if "baseline" not in args.configs:
            args.configs += ",baseline"
    if not shutil.which("wrk"):
        sys.exit("wrk is needed: apt-get install wrk")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.build_random_from and not Path(args.data_dir).exists():
        build_random(Path(args.data_dir), args.collection, args.build_random_from)
    if (args.build_random_from and args.baseline_data_dir and args.baseline_src
            and not Path(args.baseline_data_dir).exists()):
        build_random(Path(args.baseline_data_dir), args.collection, args.build_random_from,
                     args.baseline_src, baseline_env)
    # ASCII only, no quotes or brackets: the Lua script splices them into JSON bodies
    queries = [re.sub(r'[^A-Za-z0-9 ,.;:()%+-]', " ", json.loads(x)["text"])
               for x in Path(args.queries).read_text().splitlines() if x.strip()]
    chosen = {c: CONFIGS[c] for c in args.configs.split(",")}
    reps: dict[str, list[dict[str, dict[str, float]]]] = {c: [] for c in chosen}
    for _ in range(args.reps):  # interleaved, so drift in machine load hits all alike
        for name, config in chosen.items():
            reps[name].append(run_once(args, config, queries))
    res = {name: {mode: {k: statistics.median(r[mode][k] for r in runs) for k in runs[0][mode]}
                  for mode in runs[0]} for name, runs in reps.items()}
    print(f"| mode | batching | p50 ms | p90 ms | p95 ms | p99 ms | QPS | QPS / all off | "
          f"non-2xx |  ({args.connections} connections, median of {args.reps} x {args.seconds}s)")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    first = next(iter(res))
    for mode in res[first]:
        for name in chosen:
            m = res[name][mode]
            base = res["all_batching_off"][mode] if "all_batching_off" in res else m
            print(f"| {mode} | {name} | {m['p50_ms']:.0f} | {m['p90_ms']:.0f} | "
                  f"{m['p95_ms']:.0f} | {m['p99_ms']:.0f} | {m['qps']:.0f} | "
                  f"{m['qps'] / base['qps']:.2f} | {m['non_2xx']:.0f} |")
    Path("benchmarks/results").mkdir(parents=True, exist_ok=True)
    Path(f"benchmarks/results/http_search_{int(time.time())}.json").write_text(
        json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
