"""Start-up time: ``ragline serve`` until ``/health`` answers, and a CLI command.

Each round starts, from every source tree given, a server on a fresh data directory (the
embedded defaults, auth on, as ``make serve`` does) and times it from the process's start to
the first ``200`` from ``GET /health``; then ``ragline --help`` and ``ragline config show``
as whole processes. The trees take turns (their order alternates by round), so a drift in
the machine's speed falls on both; medians and the ratio of medians against the first
``--compare-src`` tree are printed. The same virtualenv runs every tree (``PYTHONPATH``
points at each tree's ``src``)::

    git worktree add /tmp/base <commit>
    python benchmarks/bench_startup.py --compare-src /tmp/base --rounds 10
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import free_port

ROOT = Path(__file__).resolve().parents[1]


def _env(src: Path, data: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(src / "src"), "RAGLINE_DATA_DIR": str(data),
            "RAGLINE_AUTH": "on"}


def serve_to_health(src: Path, scratch: Path) -> float:
    """Seconds from starting ``ragline serve`` on an empty data directory to a 200."""
    data = Path(tempfile.mkdtemp(dir=scratch))
    port = free_port()
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "ragline.cli.main", "serve", "--port",
                             str(port), "--data-dir", str(data), "--log-level", "warning"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=src,
                            env=_env(src, data))
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the server of {src} exited with {proc.returncode}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        return time.perf_counter() - t0
            except OSError:
                time.sleep(0.02)
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(data, ignore_errors=True)


def command(src: Path, scratch: Path, *args: str) -> float:
    """Seconds a whole ``ragline`` command takes."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ragline.cli.main", *args], cwd=src, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=_env(src, scratch / "cli-data"))
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compare-src", type=Path, action="append", default=[],
                    help="another source tree (the first is the baseline of the ratios)")
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    trees = [ROOT, *args.compare_src]
    probes = {"serve to /health": lambda s, d: serve_to_health(s, d),
              "ragline --help": lambda s, d: command(s, d, "--help"),
              "ragline config show": lambda s, d: command(s, d, "config", "show")}
    times: dict[str, dict[Path, list[float]]] = {p: {t: [] for t in trees} for p in probes}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for tree in trees:  # warm the file cache and the model cache once
            serve_to_health(tree, scratch)
        for r in range(args.rounds):
            for tree in (trees if r % 2 == 0 else trees[::-1]):
                for name, probe in probes.items():
                    times[name][tree].append(probe(tree, scratch))
    base = trees[1] if len(trees) > 1 else None
    print(f"| probe | {' | '.join(str(t) for t in trees)} | ratio |")
    print(f"|---|{'---:|' * len(trees)}---:|")
    for name in probes:
        med = {t: statistics.median(v) for t, v in times[name].items()}
        ratio = f"x{med[ROOT] / med[base]:.2f}" if base else ""
        cells = " | ".join(f"{med[t]:.2f} s" for t in trees)
        print(f"| {name} | {cells} | {ratio} |")


if __name__ == "__main__":
    main()
