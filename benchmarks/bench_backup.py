"""Backups as archives: ``POST /admin/backup``'s .tar.gz and its unpacking, two checkouts.

One data directory is built once (``--collections`` small collections of ``--docs``
documents and one of ``--big`` documents, 384-d vectors with metadata). Each round runs,
for every source tree in turn (order alternating by round), a child process on that tree
(``PYTHONPATH`` at its ``src``) that times the facade's ``backup_archive`` (what the
endpoint sends) and ``unpack_backup`` (what ``ragline backup DEST`` does with it) and
reports the archive's size. Medians of the rounds and the ratios against the first
``--compare-src`` tree are printed::

    git worktree add /tmp/base <commit>
    python benchmarks/bench_backup.py --compare-src /tmp/base --rounds 5
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
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, sys, tempfile, time
from pathlib import Path
from ragline.facade import Ragline, unpack_backup
from ragline.settings import Settings

data, scratch = Path(sys.argv[1]), Path(sys.argv[2])
with Ragline(Settings(data_dir=data, _env_file=None)) as rl:
    work = Path(tempfile.mkdtemp(dir=scratch))
    t = time.perf_counter()
    archive = rl.admin.backup_archive(rl.owner(), work)
    archive_s = time.perf_counter() - t
t = time.perf_counter()
with open(archive, "rb") as f:
    unpack_backup(f, Path(tempfile.mkdtemp(dir=scratch)) / "unpacked")
unpack_s = time.perf_counter() - t
print(json.dumps({"archive_s": archive_s, "unpack_s": unpack_s,
                  "archive_mb": archive.stat().st_size / 1e6}))
"""


def build(data: Path, collections: int, docs: int, big: int) -> None:
    """The data directory every tree backs up (built with this tree)."""
    from ragline.facade import DocumentInput, Ragline
    from ragline.settings import Settings

    rng = np.random.default_rng(7)
    with Ragline(Settings(data_dir=data, _env_file=None)) as rl:
        me = rl.owner()
        sizes = {f"small-{i}": docs for i in range(collections)} | {"big": big}
        for name, n in sizes.items():
            rl.collections.create(me, name)
            for lo in range(0, n, 1000):
                vecs = rng.standard_normal((min(1000, n - lo), 384)).astype(np.float32)
                rl.documents.add(me, name, [
                    DocumentInput(id=f"d{lo + i}", text=f"document {lo + i} of {name}",
                                  embedding=v.tolist(), metadata={"cat": (lo + i) % 20})
                    for i, v in enumerate(vecs)])


def run(tree: Path, data: Path, scratch: Path) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(data), str(scratch)],
                         capture_output=True, text=True, check=True, cwd=tree,
                         env={**os.environ, "PYTHONPATH": str(tree / "src")})
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compare-src", type=Path, required=True)
    ap.add_argument("--collections", type=int, default=10)
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--big", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-backup-"))
    try:
        data = scratch / "data"
        build(data, args.collections, args.docs, args.big)
        trees = [ROOT, args.compare_src]
        got: dict[Path, list[dict[str, float]]] = {t: [] for t in trees}
        for r in range(args.rounds):
            for tree in (trees if r % 2 == 0 else trees[::-1]):
                got[tree].append(run(tree, data, scratch))
                for p in scratch.iterdir():  # the round's archives and copies
                    if p != data:
                        shutil.rmtree(p, ignore_errors=True)
        print(f"{args.collections} collections of {args.docs} documents and one of "
              f"{args.big}, {args.rounds} rounds")
        print(f"| step | this tree (median) | {args.compare_src} (median) | ratio |")
        print("|---|---:|---:|---:|")
        for key, unit in (("archive_s", "s"), ("unpack_s", "s"), ("archive_mb", "MB")):
            a, b = (statistics.median(x[key] for x in got[t]) for t in trees)
            print(f"| {key.removesuffix('_s').removesuffix('_mb')} | {a:.3f} {unit} | "
                  f"{b:.3f} {unit} | x{a / b:.2f} |")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
