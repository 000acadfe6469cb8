"""How much another process's memory churn slows memory-bound work on this machine
(issue 18, item 1: the one slow probe in the `open` step of a background build).

A *victim* process gathers random rows of a large float32 matrix and multiplies them
by a query, over and over (what a vector search does to memory: random reads over GBs,
one TLB miss after another), and records how long each gather takes. Meanwhile a *hog*
process writes ``--hog-gb`` of fresh memory and exits, freeing it. The gathers are
reported per phase, each against the victim's own baseline before the hog started:

* ``touching``: while the hog writes its fresh memory;
* ``freed +0-1.5 s``: right after it exits (the kernel frees its pages);
* ``freed +1.5-4 s``: when a VM with free page reporting (virtio-balloon) hands the
  freed memory back to its host (the guest waits ~2 s before reporting);
* ``later``: after that.

On a machine without a hypervisor's page reporting, or with memory to spare on the
host, the ratios stay near 1. ::

    python benchmarks/bench_vm_churn.py --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

VICTIM = """
import json, signal, sys, time
import numpy as np
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
rows = int(float(sys.argv[1]) * (1 << 30)) // (384 * 4)
m = np.ones((rows, 384), dtype=np.float32)
q = np.ones(384, dtype=np.float32)
rng = np.random.default_rng(0)
print("ready", flush=True)
out = []
while not stop:
    idx = rng.integers(0, rows, 20000)
    a = time.monotonic()
    (m[idx] @ q).sum()
    out.append((a, (time.monotonic() - a) * 1000))
print(json.dumps(out), flush=True)
"""

HOG = """
import sys
import numpy as np
a = np.ones(int(float(sys.argv[1]) * (1 << 30)) // 8)
"""


def one_round(python: str, victim_gb: float, hog_gb: float, settle: float,
              after: float) -> dict[str, dict[str, float]]:
    victim = subprocess.Popen([python, "-c", VICTIM, str(victim_gb)],
                              stdout=subprocess.PIPE, text=True)
    assert victim.stdout is not None
    if victim.stdout.readline().strip() != "ready":
        raise SystemExit("the victim process did not start")
    time.sleep(settle)
    began = time.monotonic()
    hog = subprocess.Popen([python, "-c", HOG, str(hog_gb)])
    hog.wait()
    freed = time.monotonic()
    time.sleep(after)
    victim.terminate()
    out, _ = victim.communicate()
    samples: list[tuple[float, float]] = json.loads(out.splitlines()[-1]) if out else []
    if not samples:
        raise SystemExit("the victim printed nothing")
    phases = {
        "baseline": (began - settle, began),
        "touching": (began, freed),
        "freed +0-1.5 s": (freed, freed + 1.5),
        "freed +1.5-4 s": (freed + 1.5, freed + 4.0),
        "later": (freed + 4.0, freed + after),
    }
    result: dict[str, dict[str, float]] = {}
    for name, (lo, hi) in phases.items():
        ms = sorted(x for t, x in samples if lo <= t < hi)
        if ms:
            result[name] = {"n": len(ms), "p50_ms": statistics.median(ms), "max_ms": ms[-1],
                            "s": round(hi - lo, 2)}
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--victim-gb", type=float, default=1.5,
                    help="the victim's matrix (1.5: a 1M-point generation's vectors)")
    ap.add_argument("--hog-gb", type=float, default=6.0,
                    help="fresh memory the hog writes, then frees by exiting")
    ap.add_argument("--settle", type=float, default=3.0, help="baseline seconds")
    ap.add_argument("--after", type=float, default=8.0, help="seconds watched after the exit")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args()
    rounds = []
    for i in range(args.rounds):
        r = one_round(args.python, args.victim_gb, args.hog_gb, args.settle, args.after)
        rounds.append(r)
        base = r["baseline"]["p50_ms"]
        print(f"round {i + 1}: " + "; ".join(
            f"{k} p50 {v['p50_ms']:.1f} ms (x{v['p50_ms'] / base:.1f}), max {v['max_ms']:.1f}"
            for k, v in r.items()), flush=True)
        time.sleep(args.settle)
    if args.json_out:
        args.json_out.write_text(json.dumps({"args": vars(args) | {"json_out": None},
                                             "rounds": rounds}, indent=1, default=str))


if __name__ == "__main__":
    main()
