"""Bulk writes through HTTP: this checkout against a baseline checkout, interleaved.

Two servers run side by side (``--baseline-src``, e.g. /work/main, and this tree),
each with its own data directory and no background index builds. Each round
sends ``--docs`` pre-computed 384-d documents (batches of 1,000, 2 connections,
bodies serialised ahead by the client) to one server and then to the other,
alternating which goes first, so both see the same machine load. Reports the
median documents/s of each and the ratio, and the CPU time per 1,000 documents of
the server and the processes under it (its shard processes; user + system, all
threads, from ``/proc``): on a machine shared with
other work, wall-clock rates follow the load; CPU time much less. Data and client:
``bench_scale``'s.

``--library`` measures the library's ``Library.store_batch`` instead: per round, one
process per checkout (``PYTHONPATH`` = its ``src``) opens a fresh data directory,
writes 2,000 documents to warm up, then times ``store_batch`` over ``--docs``
documents in chunks of 1,000 (the chunk dicts, with their vectors as lists of
floats, are built before the clock starts); process CPU per 1,000 as above.

Run::

    python benchmarks/bench_bulk_write.py --baseline-src /work/main --rounds 5
    python benchmarks/bench_bulk_write.py --baseline-src /work/main --rounds 5 --library
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import ROOT, Data, Server, dumps, write


def cpu_s(pid: int) -> float:
    """User + system CPU seconds so far of a process (all its threads) and of every
    process under it: Edge's work runs in host processes (the server's children), which
    the server's own figure leaves out."""
    stats = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            with contextlib.suppress(OSError):  # a process that ended meanwhile
                stats[int(p.name)] = (p / "stat").read_text().rsplit(")", 1)[1].split()
    tree, todo = set(), [pid]
    while todo:
        cur = todo.pop()
        tree.add(cur)
        todo += [q for q, f in stats.items() if int(f[1]) == cur and q not in tree]
    ticks = sum(int(stats[q][11]) + int(stats[q][12]) for q in tree if q in stats)
    return ticks / os.sysconf("SC_CLK_TCK")


LIBRARY_ROUND = """
import json, os, sys, tempfile, time
sys.path.insert(0, {bench!r})
from bench_scale import BATCH, Data
from bench_bulk_write import cpu_s
from ragline.facade import Ragline
from ragline.library import Library
from ragline.settings import Settings

lo, hi = {lo}, {hi}
data = Data(hi)
def chunks(a, b):
    v = data.vectors(a, b).tolist()
    return [{{"id": f"d{{i}}", "text": f"chunk {{i}}", "embedding": v[i - a],
             "metadata": {{"cat": f"c{{data.cat[i]}}", "tier": int(data.tier[i]),
                          "score": float(i % 1000) / 10}}}} for i in range(a, b)]
warm = [chunks(s, s + BATCH) for s in range(0, 2000, BATCH)]
work = [chunks(s, min(s + BATCH, hi)) for s in range(lo, hi, BATCH)]
with tempfile.TemporaryDirectory() as d:
    rl = Ragline(Settings(data_dir=d, _env_file=None, background_indexing=False,
                          max_documents_per_request=BATCH))
    with rl:
        rl.collections.create(rl.owner(), "scale")
        lib = Library(rl, rl.owner())
        for c in warm:
            lib.store_batch("scale", c)
        c0, t0 = cpu_s(os.getpid()), time.perf_counter()
        for c in work:
            lib.store_batch("scale", c)
        cpu, wall = cpu_s(os.getpid()) - c0, time.perf_counter() - t0
print(json.dumps({{"rate": (hi - lo) / wall, "cpu": cpu * 1e6 / (hi - lo)}}))
"""


def library_round(src: Path, python: str, lo: int, hi: int) -> tuple[float, float]:
    """(documents/s, process CPU ms per 1,000) of ``store_batch`` in a fresh process."""
    code = LIBRARY_ROUND.format(bench=str(Path(__file__).resolve().parent), lo=lo, hi=hi)
    env = {**os.environ, "PYTHONPATH": str(src / "src")}
    out = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True,
                         check=True, timeout=600).stdout
    res = json.loads(out.strip().splitlines()[-1])
    return float(res["rate"]), float(res["cpu"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline-src", type=Path, required=True)
    ap.add_argument("--baseline-python", default=None)
    ap.add_argument("--docs", type=int, default=10_000, help="documents per round per server")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--conns", type=int, default=2)
    ap.add_argument("--json-out", type=Path)
    ap.add_argument("--library", action="store_true", help="time Library.store_batch")
    ap.add_argument("--all-ahead", action="store_true",
                    help="serialise every body of a round before its clock starts (the "
                         "client then only sends, as one on another machine would)")
    args = ap.parse_args()
    if args.library:
        run_library(args)
        return
    work = Path(tempfile.mkdtemp(prefix="bench-bulk-"))
    env = {"RAGLINE_MAX_DOCUMENTS_PER_REQUEST": "1000", "RAGLINE_AUTH": "off",
           "RAGLINE_BACKGROUND_INDEXING": "false"}
    data = Data(args.docs * args.rounds + 2000)
    py = args.baseline_python or str(args.baseline_src / ".venv/bin/python")
    servers = {"baseline": Server(args.baseline_src, py, work / "baseline", env),
               "this": Server(ROOT, sys.executable, work / "this", env)}
    rates: dict[str, list[float]] = {k: [] for k in servers}
    cpu: dict[str, list[float]] = {k: [] for k in servers}  # ms per 1,000 documents
    load = [os.getloadavg()[0]]
    try:
        for srv in servers.values():
            srv.request("POST", "/collections", dumps({"name": "scale"}))
            write(srv, data, 0, 2000, args.conns)  # warm-up (shard creation, imports)
        for r in range(args.rounds):
            lo = 2000 + r * args.docs
            order = list(servers) if r % 2 == 0 else list(reversed(servers))
            for name in order:
                c0 = cpu_s(servers[name].proc.pid)
                rates[name].append(write(servers[name], data, lo, lo + args.docs, args.conns,
                                         args.all_ahead))
                cpu[name].append((cpu_s(servers[name].proc.pid) - c0) * 1e6 / args.docs)
            print(f"round {r + 1}: " + ", ".join(
                f"{k} {v[-1]:,.0f} docs/s, {cpu[k][-1]:.0f} CPU ms/1000" for k, v in rates.items()),
                  file=sys.stderr)
    finally:
        for srv in servers.values():
            srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    load.append(os.getloadavg()[0])
    report(args, rates, cpu, load)


def run_library(args: argparse.Namespace) -> None:
    py = args.baseline_python or str(args.baseline_src / ".venv/bin/python")
    srcs = {"baseline": (args.baseline_src, py), "this": (ROOT, sys.executable)}
    rates: dict[str, list[float]] = {k: [] for k in srcs}
    cpu: dict[str, list[float]] = {k: [] for k in srcs}
    load = [os.getloadavg()[0]]
    for r in range(args.rounds):
        order = list(srcs) if r % 2 == 0 else list(reversed(srcs))
        for name in order:
            rate, ms = library_round(*srcs[name], 2000, 2000 + args.docs)
            rates[name].append(rate)
            cpu[name].append(ms)
        print(f"round {r + 1}: " + ", ".join(
            f"{k} {v[-1]:,.0f} docs/s, {cpu[k][-1]:.0f} CPU ms/1000" for k, v in rates.items()),
              file=sys.stderr)
    load.append(os.getloadavg()[0])
    report(args, rates, cpu, load)


def report(args: argparse.Namespace, rates: dict[str, list[float]],
           cpu: dict[str, list[float]], load: list[float]) -> None:
    med = {k: statistics.median(v) for k, v in rates.items()}
    cmed = {k: statistics.median(v) for k, v in cpu.items()}
    how = ("store_batch, chunks of 1,000" if args.library
           else f"batches of 1,000, {args.conns} connections")
    print(f"\n{args.rounds} rounds of {args.docs:,} documents ({how}), "
          f"load {load[0]:.1f} -> {load[1]:.1f}\n")
    who = "process" if args.library else "server"
    print(f"| {who} | docs/s per round | median docs/s | CPU ms per 1,000 docs, {who} "
          "and its shard processes "
          "(median) |\n|---|---|---:|---:|")
    for k, v in rates.items():
        print(f"| {k} | {', '.join(f'{x:,.0f}' for x in v)} | {med[k]:,.0f} | {cmed[k]:.0f} |")
    print(f"\nratio this / baseline (medians): docs/s x{med['this'] / med['baseline']:.2f}, "
          f"CPU per document x{cmed['this'] / cmed['baseline']:.2f}")
    result = {"rates": rates, "medians": med, "cpu_ms_per_1000": cpu, "cpu_medians": cmed,
              "load": load, "docs": args.docs, "rounds": args.rounds}
    print(json.dumps(result))
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
