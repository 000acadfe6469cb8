"""Edge writes from one thread, from two, and from two that take turns.

A shard process serves each request in a thread of its own, so two bulk writes
make Edge's points (``Generation.prepare``) and update the shard at the same
time. This measures what that costs against taking turns (the generation's
``_edge_writes`` lock) and against one thread: each mode writes ``--docs``
fresh 384-d points with ragline's payloads (batches of 1,000) into a new shard
in this process, modes interleaved over ``--rounds``; reports wall and CPU ms
per 1,000 points (medians).

Run::

    python benchmarks/bench_edge_write_threads.py --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as q

from ragline.core.ids import point_id
from ragline.providers.stores.qdrant_common.filters import point_payload
from ragline.providers.stores.qdrant_edge.config import QdrantEdgeConfig
from ragline.providers.stores.qdrant_edge.generation import Generation
from ragline.providers.stores.qdrant_edge.host import edge_config, search_config

BATCH = 1000
Batch = tuple[list[Any], np.ndarray, list[dict[str, Any]]]


def batches(n: int, seed: int) -> list[Batch]:
    rng = np.random.default_rng(seed)
    out: list[Batch] = []
    for s in range(0, n, BATCH):
        mat = rng.standard_normal((BATCH, 384), dtype=np.float32)
        norms = np.linalg.norm(mat, axis=1).tolist()
        ids = [point_id("t", f"d{i}") for i in range(s, s + BATCH)]
        pls = [point_payload(f"d{i}", f"chunk {i} of some text", "t",
                             {"cat": f"c{i % 20}", "tier": i % 4, "score": (i % 1000) / 10}, nm)
               for i, nm in zip(range(s, s + BATCH), norms, strict=True)]
        out.append((ids, mat, pls))
    return out


@contextlib.contextmanager
def generation() -> Iterator[Generation]:
    with tempfile.TemporaryDirectory() as d:
        cfg = QdrantEdgeConfig(path=Path(d))
        gen = Generation(q.EdgeShard.create(d + "/s", edge_config(cfg, 384)),
                         search_config(cfg))
        gen.create_base_indexes()
        for f, k in (("metadata.cat", "keyword"), ("metadata.tier", "integer"),
                     ("metadata.score", "float")):
            gen.write([("create_index", f, k)])
        try:
            yield gen
        finally:
            gen.close()


def run(mode: str, work: list[Batch]) -> tuple[float, float]:
    """(wall, CPU) ms per 1,000 points."""
    with generation() as gen:
        turns = threading.Lock()
        if mode == "unserialised":  # what the generation did before _edge_writes
            gen._edge_writes = contextlib.nullcontext()  # type: ignore[assignment]

        def writer(mine: list[Batch]) -> None:
            for ids, mat, pls in mine:
                token = gen.prepare(ids, mat, pls)
                with turns:  # the store's write lock
                    gen.write([("upsert_prepared", token)])

        c0, t0 = time.process_time(), time.perf_counter()
        if mode == "one thread":
            writer(work)
        else:
            threads = [threading.Thread(target=writer, args=(work[i::2],)) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = len(work) * BATCH
    return wall / n * 1e6, cpu / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=30_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    work = batches(args.docs, 0)
    modes = ["one thread", "two threads, taking turns", "unserialised"]
    res: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
    for r in range(args.rounds):
        for m in modes if r % 2 == 0 else list(reversed(modes)):
            res[m].append(run(m, work))
            print(f"round {r + 1}: {m}: wall {res[m][-1][0]:.1f}, CPU {res[m][-1][1]:.1f} "
                  "ms per 1,000", flush=True)
    print("\n| writers | wall ms per 1,000 (median) | CPU ms per 1,000 (median) |")
    print("|---|---:|---:|")
    for m in modes:
        print(f"| {m} | {statistics.median(w for w, _ in res[m]):.1f} | "
              f"{statistics.median(c for _, c in res[m]):.1f} |")


if __name__ == "__main__":
    main()
