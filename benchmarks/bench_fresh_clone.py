#!/usr/bin/env python
"""Newcomer timings: clone, `make serve` until /health answers, venv size, warm start.

    python benchmarks/bench_fresh_clone.py [--repo PATH] [--port N] [--keep]

Clones ``--repo`` (default: this checkout) into a temporary directory, runs the
README's ``make serve`` there (a fresh ``.venv``) and reports: seconds until
``/health`` answers on the first run, the runtime virtualenv's size, and seconds
until ``/health`` answers on a second (warm) ``make serve``. The local model
comes from the per-machine cache (``~/.cache/ragline/models``); on a machine
where it is not built yet the first run also builds it (see BENCHMARKS.md).
Stdlib only, so it runs with any Python 3.11.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path


def wait_health(url: str, proc: subprocess.Popen[bytes], limit: float) -> float:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < limit:
        if proc.poll() is not None:
            raise RuntimeError(f"make serve exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                if r.status == 200:
                    return time.perf_counter() - t0
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"/health did not answer within {limit} s")


def serve(clone: Path, port: int, log: Path, limit: float,
          env: dict[str, str] | None = None) -> float:
    with open(log, "ab") as out:
        proc = subprocess.Popen(["make", "serve", f"PORT={port}", "DATA=./data"], cwd=clone,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, **(env or {})})
        try:
            return wait_health(f"http://127.0.0.1:{port}", proc, limit)
        finally:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--port", type=int, default=18431)
    ap.add_argument("--limit", type=float, default=900)
    ap.add_argument("--keep", action="store_true", help="keep the clone")
    ap.add_argument("--cold-model-cache", action="store_true",
                    help="build the model too (RAGLINE_MODELS_DIR set to an empty directory)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ragline-fresh-"))
    clone = tmp / "ragline"
    log = tmp / "serve.log"
    try:
        subprocess.run(["git", "clone", "-q", args.repo, str(clone)], check=True)
        env = {"RAGLINE_MODELS_DIR": str(tmp / "models")} if args.cold_model_cache else {}
        t0 = time.perf_counter()
        first = serve(clone, args.port, log, args.limit, env)
        venv_mb = du(clone / ".venv") / 1e6
        warm = [serve(clone, args.port, log, 60, env) for _ in range(3)]
        text = log.read_text(errors="replace")
        result = {"repo": args.repo, "commit": subprocess.run(
                      ["git", "-C", str(clone), "rev-parse", "--short", "HEAD"],
                      capture_output=True, text=True).stdout.strip(),
                  "cold_model_cache": args.cold_model_cache,
                  "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                  "load_avg_1m": os.getloadavg()[0],
                  "first_serve_s": round(first, 1), "venv_mb": round(venv_mb),
                  "warm_start_s": sorted(round(w, 2) for w in warm),
                  "warm_start_median_s": round(sorted(warm)[1], 2),
                  "torch_in_venv": any((clone / ".venv").glob("lib/python*/site-packages/torch")),
                  "model_built_in_this_run": "model: built in" in text,
                  # install.sh's "==> [ Ns] step" lines and ensure_model.py's build time
                  "steps": [line for line in text.splitlines()
                            if line.startswith("==> [") or "model: built in" in line
                            or line.startswith("built ")]}
        result["total_s"] = round(time.perf_counter() - t0, 1)
        print(json.dumps(result, indent=2))
        if args.keep:
            print(f"clone kept at {clone}", file=sys.stderr)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
