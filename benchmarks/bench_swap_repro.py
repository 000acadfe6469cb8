"""The swap of a background build on a large built shard, in seconds (issue 18).

``bench_scale.py --size 1000000`` reaches the swap after ~15 minutes. This starts a
server on a *copy* of a data directory that such a run left (``--from``: a built
collection named ``scale``), writes ``--extra`` more documents with a low
``RAGLINE_INDEXING_GROWTH`` so that a build starts and its build process has little
to do, probes with a cheap filtered search every 20 ms, and prints every probe from
1 s before the build's locked step (``--window-from open``: from the start of the new
generation's load) to 3 s after its end, with the build step each began in, plus the
build's timings. ``--env KEY=VALUE`` sets server settings (e.g.
``RAGLINE_STORE_OPTIONS={"warm_open": false}`` for the behaviour before generations
opened warm). The kernel's stall accounting is printed under each probe over 50 ms,
and with ``--trace-threads`` every thread's state under each one over 100 ms::

    python benchmarks/bench_swap_repro.py --from /tmp/s1m4/w/data --work-dir /tmp/swt/c
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_scale as bs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--from", dest="source", type=Path, required=True,
                    help="data directory of a bench_scale.py run (left untouched)")
    ap.add_argument("--size", type=int, default=1_000_000, help="documents it holds")
    ap.add_argument("--extra", type=int, default=20_000)
    ap.add_argument("--work-dir", type=Path, required=True)
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--trace-threads", action="store_true",
                    help="sample every thread of the server and its processes every 10 ms "
                    "from the writes on, and print them for each probe over 100 ms")
    ap.add_argument("--window-from", default="locked", choices=["open", "replay", "locked"],
                    help="print probes from this build step on (default: 1 s before the "
                    "locked step)")
    args = ap.parse_args()
    shutil.rmtree(args.work_dir, ignore_errors=True)
    args.work_dir.mkdir(parents=True)
    data_dir = args.work_dir / "data"
    subprocess.run(["cp", "-a", "--sparse=always", str(args.source), str(data_dir)],
                   check=True)
    env = {"RAGLINE_MAX_DOCUMENTS_PER_REQUEST": "1000", "RAGLINE_AUTH": "off",
           "RAGLINE_INDEXING_INTERVAL_S": "1", "RAGLINE_INDEXING_GROWTH": "0.01",
           **dict(e.split("=", 1) for e in args.env)}
    data = bs.Data(args.size + args.extra)
    srv = bs.Server(bs.ROOT, sys.executable, data_dir, env)
    try:
        probe = bs.Probe(srv, data.vectors(0, 1)[0])
        pressure = bs.Pressure()
        threads = bs.Threads(srv.proc.pid) if args.trace_threads else None
        time.sleep(3)
        t0 = time.monotonic()
        if threads is not None:
            threads.active = True
        rate = bs.write(srv, data, args.size, args.size + args.extra)
        print(f"wrote {args.extra} documents at {rate:.0f}/s", flush=True)
        steps: dict[str, float] | None = None
        deadline = time.time() + 1800
        while steps is None and time.time() < deadline:
            found = re.findall(r"index build steps of \w+: (\{.*\})", srv.log.read_text())
            steps = ast.literal_eval(found[-1]) if found else None
            time.sleep(1)
        time.sleep(5)
        samples = probe.stop()
        pressure.stop()
        if threads is not None:
            threads.stop()
    finally:
        srv.stop()
    if steps is None:
        raise SystemExit("no background build finished")
    builds = re.findall(r"index build of \w+: (\{.*\})", srv.log.read_text())
    print("build:", builds[-1])
    marks = sorted((at, name) for name, at in steps.items())
    lo = steps[args.window_from] - (1.0 if args.window_from == "locked" else 0.0)
    hi = steps["end"] + 3.0
    print("began (s from the locked step)  ms  step")
    for done, ms in samples:
        began = done - ms / 1000
        if lo <= began <= hi:
            step = [name for at, name in marks if at <= began]
            print(f"{began - steps['locked']:+.3f} {ms:7.1f} {step[-1] if step else '-'}")
            if ms > 50:
                print("    ", pressure.during(began, done))
            if ms > 100 and threads is not None:
                for line in threads.during(began, done):
                    print("    ", line)
    idle = sorted(ms for done, ms in samples if done < t0)
    if idle:
        print(f"idle probe p50 {idle[len(idle) // 2]:.1f} ms")


if __name__ == "__main__":
    main()
