"""Filtered search p50/p95 and recall@10 per shape through the store's API (the host
round trip included), and the PSS of the processes serving the shard and of the other
helper processes, on a copy of ``bench_swap_stall.py``'s built 100k base shard (run that
first with ``--size 100000 --work-dir /tmp/h34/swapwork``). Any checkout's store can be
measured (issue 34 compared main's and its own, interleaved)::

    PYTHONPATH=TREE/src python benchmarks/bench_edge_filters.py TREE OUT.json [QUERIES]
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

tree = sys.argv[1]
sys.path.insert(0, tree + "/benchmarks")
sys.path.insert(0, tree + "/src")
import numpy as np  # noqa: E402
from bench_scale import DIM, SHAPES, Data  # noqa: E402

from ragline.core.filters import Limits, parse_where  # noqa: E402
from ragline.core.types import SearchMode, StoreQuery  # noqa: E402
from ragline.providers.stores.qdrant_edge.provider import (  # noqa: E402
    QdrantEdgeConfig,
    QdrantEdgeStore,
)

SIZE = 100_000
nq = int(sys.argv[3]) if len(sys.argv) > 3 else 200
base = Path("/tmp/h34/swapwork/100000/base-100000")
run = Path("/tmp/h34/filtrun")
shutil.rmtree(run, ignore_errors=True)
subprocess.run(["cp", "-a", "--sparse=always", str(base), str(run)], check=True)
data = Data(SIZE + 3_000 + 20_000)
cat, tier = data.cat[:SIZE], data.tier[:SIZE]
store = QdrantEdgeStore(QdrantEdgeConfig(path=run))
t0 = time.perf_counter()
assert store.count("k", "default", None) == SIZE
open_s = time.perf_counter() - t0
rng = np.random.default_rng(99)
queries = (data.centres[rng.integers(0, 1000, nq)]
           + rng.normal(size=(nq, DIM)).astype(np.float32) * 0.6)
unit_q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
scores = np.zeros((nq, SIZE), np.float32)
for lo in range(0, SIZE, 20_000):
    v = data.vectors(lo, lo + 20_000)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    scores[:, lo:lo + 20_000] = unit_q @ v.T

def mask(where):
    if where is None:
        return np.ones(SIZE, bool)
    if "tier" in where:
        return tier <= 1
    c = where["cat"]
    vals = [c] if isinstance(c, str) else c["$in"]
    return np.isin(cat, [int(x[1:]) for x in vals])

shapes = {}
for name, where in SHAPES.items():
    s = np.where(mask(where)[None, :], scores, -np.inf)
    truth = [{f"d{i}" for i in row} for row in np.argpartition(-s, 10, axis=1)[:, :10]]
    shapes[name] = (parse_where(where, Limits()) if where else None, truth)
names = list(shapes)
for qi in range(20):  # warm-up
    store.query_batch("k", [StoreQuery("default", SearchMode.DENSE, 10, vector=queries[qi])])
lat = {n: [] for n in names}
rec = {n: [] for n in names}
for qi in range(nq):
    turn = qi % len(names)
    for n in names[turn:] + names[:turn]:
        node, truth = shapes[n]
        t = time.perf_counter()
        hits = store.query_batch("k", [StoreQuery("default", SearchMode.DENSE, 10,
                                                  vector=queries[qi], where=node)])[0]
        lat[n].append((time.perf_counter() - t) * 1000)
        rec[n].append(len({h.id for h in hits} & truth[qi]) / 10)

def pss(pid):
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return 0.0
    return 0.0

def children(pid):
    out = []
    for t in os.listdir(f"/proc/{pid}/task"):
        out += [int(x) for x in Path(f"/proc/{pid}/task/{t}/children").read_text().split()]
    return out

kids = children(os.getpid())
procs = {}
for k in kids:
    cmd = Path(f"/proc/{k}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:80]
    maps = Path(f"/proc/{k}/maps").read_text()
    procs[k] = {"cmd": cmd, "pss_mb": pss(k), "serves_shard": str(run) in maps,
                "children": [(c, pss(c), str(run) in Path(f"/proc/{c}/maps").read_text())
                             for c in children(k)]}
serving = [p["pss_mb"] for p in procs.values() if p["serves_shard"]]
serving += [c[1] for p in procs.values() for c in p["children"] if c[2]]
helpers = [p["pss_mb"] for p in procs.values() if not p["serves_shard"]]
helpers += [c[1] for p in procs.values() for c in p["children"] if not c[2]]
out = {"tree": tree, "load": os.getloadavg(), "open_s": open_s, "nq": nq,
       "shapes": {n: {"p50_ms": statistics.median(lat[n]),
                      "p95_ms": sorted(lat[n])[int(0.95 * nq) - 1],
                      "recall_at_10": float(np.mean(rec[n]))} for n in names},
       "pss_serving_mb": serving, "pss_other_helpers_mb": helpers,
       "server_pss_mb": pss(os.getpid())}
store.close()
shutil.rmtree(run, ignore_errors=True)
Path(sys.argv[2]).write_text(json.dumps(out, indent=1))
print(json.dumps(out))
