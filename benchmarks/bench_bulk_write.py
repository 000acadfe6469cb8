"""Bulk writes through HTTP: this checkout against a baseline checkout, interleaved.

Two servers run side by side (``--baseline-src``, e.g. /work/main, and this tree),
each with its own data directory and no background index builds. Each round
sends ``--docs`` pre-computed 384-d documents (batches of 1,000, 2 connections,
bodies serialised ahead by the client) to one server and then to the other,
alternating which goes first, so both see the same machine load. Reports the
median documents/s of each and the ratio, and the server's CPU time per 1,000
documents (user + system, all threads, from ``/proc``): on a machine shared with
other work, wall-clock rates follow the load; CPU time much less. Data and client:
``bench_scale``'s.

Run::

    python benchmarks/bench_bulk_write.py --baseline-src /work/main --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import ROOT, Data, Server, dumps, write


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline-src", type=Path, required=True)
    ap.add_argument("--baseline-python", default=None)
    ap.add_argument("--docs", type=int, default=10_000, help="documents per round per server")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--conns", type=int, default=2)
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args()
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
                rates[name].append(write(servers[name], data, lo, lo + args.docs, args.conns))
                cpu[name].append((cpu_s(servers[name].proc.pid) - c0) * 1e6 / args.docs)
            print(f"round {r + 1}: " + ", ".join(
                f"{k} {v[-1]:,.0f} docs/s, {cpu[k][-1]:.0f} CPU ms/1000" for k, v in rates.items()),
                  file=sys.stderr)
    finally:
        for srv in servers.values():
            srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    load.append(os.getloadavg()[0])
    med = {k: statistics.median(v) for k, v in rates.items()}
    cmed = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"\n{args.rounds} rounds of {args.docs:,} documents (batches of 1,000, "
          f"{args.conns} connections), load {load[0]:.1f} -> {load[1]:.1f}\n")
    print("| server | docs/s per round | median docs/s | server CPU ms per 1,000 docs "
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
