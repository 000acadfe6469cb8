"""How long a background index build stalls requests.

Issue 18: "no request may wait more than 50 ms because of indexing". The build
itself runs in a niced host process; what stalled the server was the swap: Edge's
``EdgeShard.load`` of the built generation and ``close`` of the replaced one
(and the flush that starts a build) hold the GIL in the process that makes
them, which is why every generation is served by a host process (issue 34 removed
the in-process mode). This benchmark measures the stall at library level, the way
the server's indexing thread runs a build, round by round on the same data:

1. a built base shard of ``--size`` documents (the data recipe of
   ``bench_scale.py``: 384-d vectors around 1,000 centres, ``cat``/``tier``/a
   number) is made once and cached under ``--work-dir``;
2. per round and mode: the base is copied, opened, probed while idle (the
   search latency without a build: the per-query cost of a shard process shows
   here), ``--new`` documents are added (so the build has work), then
   ``build_index`` runs while a probe thread sends a search (``cat`` = one
   value, limit 3, like ``bench_scale.py``'s probe) every 20 ms and a writer
   thread adds 100 documents every 200 ms (so the journal is replayed);
3. reported per mode: the probe's longest latency during the build (the stall;
   counted from when each search was due, like a client in another process would
   see it), its p50/p99, the idle p50, a 1 ms ticker thread's longest gap (how
   long this process's GIL was held), the build's own timings, and the step of
   the build in which the slowest probes fell.

Run::

    python benchmarks/bench_swap_stall.py --size 50000 --rounds 3
    python benchmarks/bench_swap_stall.py --size 100000 --rounds 3

Results: Markdown on stdout and one JSON line (``--json-out`` to keep it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from bench_scale import Data

from ragline.core.filters import Eq
from ragline.core.types import Record, SearchMode, StoreQuery
from ragline.providers.stores.qdrant_edge.provider import (
    QdrantEdgeConfig,
    QdrantEdgeStore,
)

KEY = "k"
MODES: dict[str, object] = {"host processes": None}  # one execution model since issue 34


def records(data: Data, lo: int, hi: int) -> list[Record]:
    v = data.vectors(lo, hi)
    return [Record(f"d{i}", f"chunk {i}", {"cat": f"c{data.cat[i]}", "tier": int(data.tier[i]),
                                           "score": float(i % 1000) / 10}, v[i - lo])
            for i in range(lo, hi)]


def store_at(path: Path, mode: object = None) -> QdrantEdgeStore:
    return QdrantEdgeStore(QdrantEdgeConfig(path=path))


def prepare(work: Path, size: int, total: int) -> Path:
    """The built base shard of ``size`` documents (cached)."""
    base = work / f"base-{size}"
    if (base / KEY / "ragline_dim").exists():
        return base
    shutil.rmtree(base, ignore_errors=True)
    data = Data(total)
    store = store_at(base)
    store.create_shard(KEY, 384)
    t = time.monotonic()
    for lo in range(0, size, 1000):
        store.upsert(KEY, records(data, lo, min(lo + 1000, size)))
    print(f"base: {size} documents written in {time.monotonic() - t:.0f} s", flush=True)
    t = time.monotonic()
    assert store.build_index(KEY)
    print(f"base: built in {time.monotonic() - t:.0f} s", flush=True)
    store.close()
    return base


class Probe:
    """A search every 20 ms, and a 1 ms ticker measuring this process's GIL gaps."""

    def __init__(self, store: QdrantEdgeStore, qv: np.ndarray) -> None:
        self.store = store
        self.query = StoreQuery("default", SearchMode.DENSE, 3, vector=qv, where=Eq("cat", "c3"))
        self.samples: list[float] = []
        self.at: list[float] = []
        self.gaps: list[float] = []
        self.hits = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._probe, daemon=True),
                         threading.Thread(target=self._tick, daemon=True)]
        for t in self._threads:
            t.start()

    def _probe(self) -> None:
        # open loop, like a client in another process sending every 20 ms: a search's
        # wait counts from when it was due, so time this thread spent waiting for the GIL
        # (where a real client's request would have waited too) is not hidden
        due = time.monotonic()
        while not self._stop.is_set():
            self.hits += len(self.store.query_batch(KEY, [self.query])[0])
            end = time.monotonic()
            self.samples.append((end - due) * 1000)
            self.at.append(due)
            due = due + 0.02 if end < due + 0.02 else end  # (slots missed in a stall: the
            # first one's wait is the longest a client would have seen)
            self._stop.wait(max(0.0, due - time.monotonic()))

    def _tick(self) -> None:
        last = time.perf_counter()
        while not self._stop.is_set():
            time.sleep(0.001)
            now = time.perf_counter()
            self.gaps.append((now - last) * 1000)
            last = now

    def stop(self) -> tuple[list[float], list[float]]:
        self._stop.set()
        for t in self._threads:
            t.join()
        return self.samples, self.gaps


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p / 100 * len(s)))]


def one_round(work: Path, base: Path, data: Data, size: int, new: int, mode: str,
              qv: np.ndarray) -> dict[str, Any]:
    run = work / "run"
    shutil.rmtree(run, ignore_errors=True)
    subprocess.run(["cp", "-a", "--sparse=always", str(base), str(run)], check=True)
    store = store_at(run, MODES[mode])
    t = time.perf_counter()
    store.count(KEY, "default", None)
    open_ms = (time.perf_counter() - t) * 1000
    probe = Probe(store, qv)
    time.sleep(3.0)  # idle: the per-query cost without a build
    idle, idle_gaps = probe.stop()
    store.upsert(KEY, records(data, size, size + new))  # the build's work
    written = [size + new]
    stop = threading.Event()

    def writer() -> None:
        while not stop.wait(0.2) and written[0] + 100 <= len(data.cat):
            lo = written[0]
            store.upsert(KEY, records(data, lo, lo + 100))
            written[0] = lo + 100

    wt = threading.Thread(target=writer, daemon=True)
    wt.start()
    probe = Probe(store, qv)
    t = time.monotonic()
    assert store.build_index(KEY)
    build_s = time.monotonic() - t
    time.sleep(1.0)
    during, gaps = probe.stop()
    stop.set()
    wt.join()
    n = written[0]
    assert store.count(KEY, "default", None) == n, "a write went missing"
    worst = probe.at[during.index(max(during))]
    phases = sorted(store.last_phases.items(), key=lambda kv: kv[1])
    in_phase = "before the build"
    for name, start in phases:
        if worst >= start:
            in_phase = name
    top = sorted(zip(during, probe.at, strict=True), reverse=True)[:5]
    slow = [(round(ms), next((nm for nm, st in reversed(phases) if at >= st), "before"))
            for ms, at in top]
    store.close()
    shutil.rmtree(run, ignore_errors=True)
    return {"mode": mode, "open_ms": open_ms, "idle_p50_ms": statistics.median(idle),
            "idle_max_ms": max(idle), "idle_gil_gap_max_ms": max(idle_gaps),
            "build_s": build_s, "probe_n": len(during), "probe_hits": probe.hits,
            "stall_max_ms": max(during), "probe_p50_ms": statistics.median(during),
            "probe_p99_ms": pct(during, 99), "gil_gap_max_ms": max(gaps),
            "timings": {k: round(float(v), 3) for k, v in store.last_build.items()},
            "stall_phase": in_phase, "slowest_probes": slow,
            "documents": n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=50_000)
    ap.add_argument("--new", type=int, default=3_000, help="documents added before a build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work-dir", type=Path, default=Path("/tmp/bench_swap_stall"))
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args()
    work = args.work_dir / str(args.size)
    work.mkdir(parents=True, exist_ok=True)
    total = args.size + args.new + 20_000  # room for the writer thread
    data = Data(total)
    base = prepare(work, args.size, total)
    qv = data.vectors(0, 1)[0] + 0.1
    load0 = os.getloadavg()
    results: list[dict[str, Any]] = []
    for r in range(args.rounds):
        order = list(MODES) if r % 2 == 0 else list(reversed(MODES))
        for mode in order:
            res = one_round(work, base, data, args.size, args.new, mode, qv)
            res["round"] = r
            res["load"] = os.getloadavg()[0]
            results.append(res)
            print(json.dumps(res), flush=True)
    report(args.size, results, load0, os.getloadavg())
    line = json.dumps({"size": args.size, "load_start": load0, "results": results})
    print(line)
    if args.json_out:
        args.json_out.write_text(line + "\n")


def report(size: int, results: list[dict[str, Any]], load0: Any, load1: Any) -> None:
    print(f"\n{size:,} documents; load average {load0[0]:.1f} at the start, "
          f"{load1[0]:.1f} at the end\n")
    print("| mode | longest probe wait during the build ms (per round) | median | "
          "probe p50 / p99 during ms | idle probe p50 ms | longest GIL gap ms | "
          "load / new flush / re-copy / locked / close s (median) |")
    print("|---|---|---:|---|---:|---:|---|")
    for mode in MODES:
        rs = [r for r in results if r["mode"] == mode]
        if not rs:
            continue

        def med(k: str, rs: list[dict[str, Any]] = rs) -> float:
            return statistics.median(float(r[k]) for r in rs)

        def tmed(k: str, rs: list[dict[str, Any]] = rs) -> float:
            return statistics.median(float(r["timings"].get(k, 0.0)) for r in rs)

        stalls = ", ".join(f"{r['stall_max_ms']:.0f}" for r in rs)
        print(f"| {mode} | {stalls} | {med('stall_max_ms'):.0f} | "
              f"{med('probe_p50_ms'):.1f} / {med('probe_p99_ms'):.1f} | "
              f"{med('idle_p50_ms'):.2f} | {med('gil_gap_max_ms'):.0f} | "
              f"{tmed('load_s'):.2f} / {tmed('flush_s'):.2f} / {tmed('recopy_s'):.2f} / "
              f"{tmed('locked_s'):.2f} / "
              f"{tmed('close_s'):.2f} |")


if __name__ == "__main__":
    main()
