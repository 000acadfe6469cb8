"""``GET /health`` and ``GET /info`` on a data directory of many collections, two checkouts.

Both report ``storage_bytes``, the bytes allocated under the data directory, which is a
walk of every file (Qdrant Edge keeps ~70 in a shard). The data directory is built once
(``--collections`` collections of 10 small documents each); each round starts a server of
each checkout in turn (order alternating by round) on it, warms each read 5 times, then
times ``--n`` of each over one connection, one after another as a load balancer's probes
come. Printed: the median of the rounds' p50s per checkout and their ratio::

    git worktree add /tmp/base <commit>
    python benchmarks/bench_health.py --compare-src /tmp/base --collections 300
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import ROOT
from bench_stats_reads import compare_reads

READS = {"GET /health": "/health", "GET /info": "/info"}


def build(data: Path, collections: int) -> None:
    from ragline.facade import DocumentInput, Ragline
    from ragline.settings import Settings

    with Ragline(Settings(data_dir=data, _env_file=None)) as rl:
        me = rl.owner()
        for c in range(collections):
            rl.collections.create(me, f"c{c}")
            rl.documents.add(me, f"c{c}", [
                DocumentInput(id=f"d{i}", text=f"document {i}", metadata={"i": i},
                              embedding=[1.0, float(i), float(c % 7), 0.5])
                for i in range(10)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compare-src", type=Path, required=True)
    ap.add_argument("--collections", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--n", type=int, default=50)
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-health-"))
    try:
        data = scratch / "data"
        t = time.perf_counter()
        build(data, args.collections)
        files = sum(1 for p in data.rglob("*") if p.is_file())
        print(f"{args.collections} collections, {files} files, built in "
              f"{time.perf_counter() - t:.0f} s")
        env = {"RAGLINE_AUTH": "off", "RAGLINE_BACKGROUND_INDEXING": "false"}
        compare_reads([ROOT, args.compare_src], data, READS, args.rounds, 5, args.n, env)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
