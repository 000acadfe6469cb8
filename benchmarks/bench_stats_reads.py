"""Collection views, document pages and ``/health`` on a built collection, two checkouts.

These reads carry a document count: ``GET /collections/{name}`` (and ``/info``, the
console's list) and every ``GET /collections/{name}/documents`` page (its ``total``).
Each round starts a server of each checkout in turn (order alternating by round) on
the same data directory built by ``bench_scale.py`` (``--keep`` its work directory, or
use one left by ``--search-only`` runs), warms each read 20 times, then times 200 of
each over one connection; printed: the median of the rounds' p50s, per checkout, and
their ratio::

    python benchmarks/bench_stats_reads.py /tmp/s100k/w/data --compare-src /tmp/base
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import ROOT, Server

READS = {
    "GET /collections/scale": "/collections/scale",
    "GET /collections/scale/documents?limit=10": "/collections/scale/documents?limit=10",
    "GET /health": "/health",
}


def compare_reads(trees: list[Path], data_dir: Path, reads: dict[str, str], rounds: int,
                  warm: int, n: int, env: dict[str, str]) -> None:
    """Each round, a server of each tree in turn (order alternating) on ``data_dir``; each
    read warmed ``warm`` times, then ``n`` timed over one connection. Prints the median of
    the rounds' p50s per tree and their ratio (the first tree against the second)."""
    p50s: dict[Path, dict[str, list[float]]] = {t: {r: [] for r in reads} for t in trees}
    for r in range(rounds):
        for tree in (trees if r % 2 == 0 else trees[::-1]):
            srv = Server(tree, sys.executable, data_dir, env)
            try:
                conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=600)
                for name, path in reads.items():
                    for _ in range(warm):
                        srv.request("GET", path, None, conn)
                    times = []
                    for _ in range(n):
                        t = time.perf_counter()
                        status, body = srv.request("GET", path, None, conn)
                        times.append((time.perf_counter() - t) * 1000)
                        if status != 200:
                            raise RuntimeError(f"{path}: {status} {body[:200]!r}")
                    p50s[tree][name].append(statistics.median(times))
            finally:
                srv.stop()
    print(f"| read | this tree p50 ms | {trees[1]} p50 ms | ratio |")
    print("|---|---:|---:|---:|")
    for name in reads:
        a, b = (statistics.median(p50s[t][name]) for t in trees)
        print(f"| {name} | {a:.2f} | {b:.2f} | x{a / b:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data_dir", type=Path, help="a bench_scale.py data directory")
    ap.add_argument("--compare-src", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    env = {"RAGLINE_AUTH": "off", "RAGLINE_BACKGROUND_INDEXING": "false"}
    compare_reads([ROOT, args.compare_src], args.data_dir, READS, args.rounds, 20, 200, env)


if __name__ == "__main__":
    main()
