"""End-to-end HTTP search latency and QPS, swept over concurrency.

Starts the real server (``ragline serve``) on a data directory that already holds a
collection (e.g. the SciFact one made by ``ragline eval beir``, or one made here with
``--build-random-from``) and drives it with ``wrk`` (Debian package ``wrk``; a C load
generator, so the client is not the bottleneck — an httpx client with 100 connections
topped out near 55 QPS here). The server runs with the embedding cache off
(``RAGLINE_EMBEDDING_CACHE_SIZE=0``) so every request pays for its query embedding, and
the query texts are the real SciFact queries (1,109, mean 22 word pieces), cycled.

Every point is one mode (``--modes``) at one number of connections (``--connections``,
a comma-separated list: ``1,4,16,64,100`` is the issue-38 sweep) for one server
configuration (``--configs``). Configurations run in the same invocation, interleaved
per repetition (a server per configuration and repetition, every point of the sweep on
it): ``on`` (the defaults), ``old_default`` (the embedding batcher's former 3 ms wait
window), embedding micro-batching off (``RAGLINE_EMBED_MAX_BATCH=1``) and all
coalescing off (also ``RAGLINE_SEARCH_MAX_BATCH=1``). The table gives the median over
repetitions and, as the noise, the spread of QPS between repetitions of the same point.

    python benchmarks/bench_http_search.py --data-dir /tmp/evald --collection scifact \
        --queries ../shared/data/beir/scifact/queries.jsonl --connections 1,4,16,64,100
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


def wrk(url: str, script: Path, conns: int, seconds: int,
        server_pid: int | None = None) -> dict[str, float]:
    """One wrk run; with ``server_pid``, also ``cpu_ms``: CPU time of the server and
    its children (the shard processes) per request, which a loaded machine inflates
    far less than latency (other processes take turns on the cores, not the work)."""
    threads = min(2, conns)  # wrk needs a connection per thread
    cpu0 = tree_cpu_s(server_pid) if server_pid else 0.0
    out = subprocess.run(["wrk", f"-t{threads}", f"-c{conns}", f"-d{seconds}s", "--timeout",
                          "30s", "--latency", "-s", str(script), url],
                         capture_output=True, text=True, check=True).stdout
    cpu = tree_cpu_s(server_pid) - cpu0 if server_pid else 0.0

    def ms(p: int) -> float:
        m = re.search(rf"P{p}_US (\d+)", out)
        assert m, out
        return int(m.group(1)) / 1000

    qps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    done = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    return {"p50_ms": ms(50), "p90_ms": ms(90), "p95_ms": ms(95), "p99_ms": ms(99), "qps": qps,
            "non_2xx": float(bad.group(1)) if bad else 0.0,
            "cpu_ms": cpu * 1000 / done if done else 0.0}


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and every descendant alive now (/proc)."""
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        parent[int(d.name)] = int(fields[1])  # fields after the name: state, ppid, ...
        ticks[int(d.name)] = int(fields[11]) + int(fields[12])  # utime, stime
    tree, todo = {pid}, [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p and c not in tree]
        tree.update(kids)
        todo += kids
    return sum(ticks.get(p, 0) for p in tree) / os.sysconf("SC_CLK_TCK")


CONFIGS = {
    "on": {},
    # the defaults before issue 38: a lone query waited up to 3 ms for company
    "old_default": {"RAGLINE_EMBED_MAX_WAIT_MS": "3", "RAGLINE_EMBED_WAIT_WHEN_IDLE": "true"},
    # issue 38's two policies: never wait / wait 3 ms only while a batch runs
    "no_wait": {"RAGLINE_EMBED_MAX_WAIT_MS": "0"},
    "busy_window": {"RAGLINE_EMBED_MAX_WAIT_MS": "3", "RAGLINE_EMBED_WAIT_WHEN_IDLE": "false"},
    "embed_batching_off": {"RAGLINE_EMBED_MAX_BATCH": "1", "RAGLINE_EMBED_MAX_WAIT_MS": "0"},
    "all_batching_off": {"RAGLINE_EMBED_MAX_BATCH": "1", "RAGLINE_EMBED_MAX_WAIT_MS": "0",
                         "RAGLINE_SEARCH_MAX_BATCH": "1"},
    # model threads: one micro-batch at a time, or more than the default (one per core)
    "embed_workers_1": {"RAGLINE_EMBED_WORKERS": "1"},
    "embed_workers_4": {"RAGLINE_EMBED_WORKERS": "4"},
}


def run_once(args: argparse.Namespace, config: dict[str, str],
             queries: list[str]) -> dict[str, dict[str, float]]:
    """One server, every point (``mode@connections``): a warm-up per mode, then one
    measured wrk run per number of connections. A config with ``BASELINE_SRC`` runs the
    server from that checkout (its ``src`` first on the path, its own ``.venv`` python
    when it has one)."""
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
                # the first search loads the model: wait for it, outside any measurement
                r = httpx.post(url, json={"query": "warm up", "mode": base}, timeout=300)
                assert r.status_code == 200, r.text
                wrk(url, script, 10, args.warmup)
                for conns in args.conns:
                    out[f"{mode}@{conns}"] = wrk(url, script, conns, args.seconds,
                                                 srv.proc.pid)
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
    ap.add_argument("--data-dir")
    ap.add_argument("--merge", nargs="+", type=Path, help="print the table of these result "
                    "files (runs of the same points) together, as repetitions, and stop")
    ap.add_argument("--collection", default="scifact")
    ap.add_argument("--queries")
    ap.add_argument("--modes", default="hybrid,dense,sparse", help="also sparse-norel: sparse "
                    "with \"relevance\": false")
    ap.add_argument("--connections", default="100", help="comma-separated: the sweep "
                    "(1,4,16,64,100 for issue 38)")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3, help="seconds of warm-up per mode")
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
    args.conns = [int(c) for c in args.connections.split(",")]
    if args.merge:
        merge(args)
        return
    if not (args.data_dir and args.queries):
        sys.exit("--data-dir and --queries are needed")
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
    load = [os.getloadavg()[0]]
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    names = list(chosen)
    for r in range(args.reps):  # interleaved, so drift in machine load hits all alike
        for name in names[r % len(names):] + names[:r % len(names)]:  # each starts a rep
            reps[name].append(run_once(args, chosen[name], queries))
            load.append(os.getloadavg()[0])
    res = medians(reps)
    print_table(res, list(chosen), args, started, load)
    Path("benchmarks/results").mkdir(parents=True, exist_ok=True)
    Path(f"benchmarks/results/http_search_{int(time.time())}.json").write_text(
        json.dumps({"median": res, "runs": reps, "load": load, "started": started,
                    "connections": args.conns, "seconds": args.seconds}, indent=1))


def medians(reps: dict[str, list[dict[str, dict[str, float]]]]
            ) -> dict[str, dict[str, dict[str, float]]]:
    """Per config and point: the median of each figure and the QPS range over runs."""
    return {name: {pt: {k: statistics.median(r[pt][k] for r in runs) for k in runs[0][pt]}
                   | {"qps_min": min(r[pt]["qps"] for r in runs),
                      "qps_max": max(r[pt]["qps"] for r in runs)}
                   for pt in runs[0]} for name, runs in reps.items()}


def merge(args: argparse.Namespace) -> None:
    """``--merge``: several invocations' runs as the repetitions of one table."""
    reps: dict[str, list[dict[str, dict[str, float]]]] = {}
    load: list[float] = []
    started = []
    for f in args.merge:
        saved = json.loads(f.read_text())
        for name, runs in saved["runs"].items():
            reps.setdefault(name, []).extend(runs)
        load += saved["load"]
        started.append(saved["started"])
        args.seconds = saved["seconds"]
    args.reps = min(len(r) for r in reps.values())
    print_table(medians(reps), list(reps), args, f"{min(started)} to {max(started)}", load)


def print_table(res: dict[str, dict[str, dict[str, float]]], names: list[str],
                args: argparse.Namespace, started: str, load: list[float]) -> None:
    """A Markdown row per point and configuration; ``QPS / x`` against the first of
    ``all_batching_off``, ``embed_batching_off`` that ran (else the first config)."""
    ref = next((n for n in ("embed_batching_off", "all_batching_off") if n in res), names[0])
    print(f"{started} UTC, load average {min(load):.1f}-{max(load):.1f}; median of "
          f"{args.reps} x {args.seconds} s; QPS range = min-max over the repetitions")
    print(f"| mode | conns | config | QPS | QPS range | p50 ms | p95 ms | p99 ms | "
          f"QPS / {ref} | server CPU ms / request | non-2xx |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for pt in res[names[0]]:
        mode, _, conns = pt.partition("@")
        for name in names:
            m = res[name][pt]
            print(f"| {mode} | {conns} | {name} | {m['qps']:.0f} | {m['qps_min']:.0f}-"
                  f"{m['qps_max']:.0f} | {m['p50_ms']:.1f} | {m['p95_ms']:.1f} | "
                  f"{m['p99_ms']:.1f} | {m['qps'] / res[ref][pt]['qps']:.2f} | "
                  f"{m.get('cpu_ms', 0):.2f} | {m['non_2xx']:.0f} |")


if __name__ == "__main__":
    main()
