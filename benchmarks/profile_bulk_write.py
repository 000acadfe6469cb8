"""Where the CPU of one bulk write goes: 1,000 pre-computed 384-d documents.

Two views, both in this process (no sockets, no client competing for the CPU):

``steps``: each step of the write path timed on its own with the thread's CPU clock
(orjson parse, the request model, the checks, building Edge's points, Edge's update,
freeing the request), medians over ``--batches`` batches into one Edge shard.

``asgi``: whole requests ``POST /collections/{name}/documents`` through the ASGI app
(middleware, FastAPI, the route, the facade, the store; the sync route's thread hop
included), with the process's CPU (user + system), minor page faults and garbage
collections per request; ``--gc python`` keeps Python's collector settings instead of
what ``ragline serve`` sets (``gc_gen0_threshold``), ``--trim each`` trims the heap
after every request as before issue 18.

Run::

    python benchmarks/profile_bulk_write.py steps
    python benchmarks/profile_bulk_write.py asgi
    python benchmarks/profile_bulk_write.py asgi --gc python --trim each
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import BATCH, Data

WARM = 3  # batches left out of the medians


def steps(batches: int) -> None:
    import numpy as np
    import orjson
    import qdrant_edge as q

    from ragline.api.fast_json import _wide_float
    from ragline.api.schemas import DocumentsAdd
    from ragline.core.ids import point_id
    from ragline.core.types import Record
    from ragline.facade import DocumentInput
    from ragline.providers.stores.qdrant_common.fields import FieldKinds
    from ragline.providers.stores.qdrant_common.filters import point_payload
    from ragline.providers.stores.qdrant_edge.config import QdrantEdgeConfig
    from ragline.providers.stores.qdrant_edge.host import open_generation
    from ragline.providers.stores.qdrant_edge.queries import VECTOR
    from ragline.services.corpus.validation import InputLimits, check_vectors, metadata_fits

    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 10, 10)  # as ragline serve: no collection inside a batch
    data = Data(batches * BATCH)
    bodies = [data.body(i * BATCH, (i + 1) * BATCH) for i in range(batches)]
    # Edge's steps in this process, as a host makes them
    root = Path(tempfile.mkdtemp())
    gen = open_generation("create", root / "g1", 384, QdrantEdgeConfig(path=root))
    fields = FieldKinds(root / "ragline_fields.json")
    limits = InputLimits()
    times: dict[str, list[float]] = {}

    def t(name: str, f: Callable[[], Any]) -> Any:
        c = time.thread_time()
        r = f()
        times.setdefault(name, []).append((time.thread_time() - c) * 1000)
        return r

    def one(body: bytes) -> list[Any]:
        """One request's steps; returns what it made, so freeing is timed apart."""
        doc = t("HTTP: orjson parse of the body", lambda: orjson.loads(body))
        t("HTTP: wide-integer walk (fast_json)", lambda: _wide_float(doc))
        model = t("HTTP: request model (pydantic)", lambda: DocumentsAdd.model_validate(doc))
        docs = t("HTTP: DocumentInput per document", lambda: [
            DocumentInput(d.text, d.metadata, d.embedding, d.id) for d in model.documents])
        t("checks: text, ids, metadata", lambda: [
            isinstance(d.text, str) and metadata_fits(d.metadata, limits) for d in docs])
        mat = t("checks: vectors (element types, numpy)", lambda: check_vectors(
            [d.embedding for d in docs], 4096))
        recs = t("Record per document", lambda: [
            Record(d.id, d.text, dict(d.metadata), mat[i], "default", d.embedding)
            for i, d in enumerate(docs)])
        norms = t("store: matrix and norms", lambda: np.linalg.norm(np.asarray(
            [r.embedding for r in recs], dtype=np.float32), axis=1).tolist())
        pids = t("store: point ids (UUIDv5)", lambda: [point_id(r.tenant, r.id) for r in recs])
        payloads = t("store: payload dicts", lambda: [
            point_payload(r.id, r.text, r.tenant, r.metadata, n)
            for r, n in zip(recs, norms, strict=True)])
        t("(Edge q.Point with the vector only)", lambda: [
            q.Point(p, {VECTOR: r.values}) for p, r in zip(pids, recs, strict=True)])
        points = t("Edge: q.Point (vector and payload)", lambda: [
            q.Point(p, {VECTOR: r.values}, pl)
            for p, r, pl in zip(pids, recs, payloads, strict=True)])
        t("store: field kinds", lambda: fields.observe([r.metadata for r in recs]))
        op = t("Edge: UpdateOperation", lambda: q.UpdateOperation.upsert_points(points))
        t("Edge: EdgeShard.update", lambda: gen.shard.update(op))
        t("HTTP: response body", lambda: orjson.dumps({"ids": [r.id for r in recs]}))
        return [doc, model, docs, mat, recs, points, op, payloads]

    for body in bodies:
        held = one(body)
        t("freeing the request's objects", held.clear)
    gen.close()
    print("| step | thread CPU ms per 1,000 documents (median) |\n|---|---:|")
    total = 0.0
    for name, v in times.items():
        m = statistics.median(v[WARM:])
        total += 0.0 if name.startswith("(") else m
        print(f"| {name} | {m:.1f} |")
    print(f"| **total** | **{total:.1f}** |")


def asgi(batches: int, gc_mode: str, trim: str) -> None:
    import anyio.to_thread  # noqa: F401 (the app's thread hops)

    from ragline.api.app import create_app
    from ragline.observability.memory import release_freed_memory, tune_gc_for_serving
    from ragline.settings import Settings

    data = Data(batches * BATCH)
    bodies = [data.body(i * BATCH, (i + 1) * BATCH) for i in range(batches)]
    settings = Settings(data_dir=Path(tempfile.mkdtemp()) / "d", _env_file=None,  # type: ignore[call-arg]
                        background_indexing=False, auth="off",
                        max_documents_per_request=BATCH)
    app = create_app(settings)

    async def call(method: str, path: str, body: bytes) -> int:
        status = [0]
        sent = [False]

        async def receive() -> dict[str, Any]:
            if not sent[0]:
                sent[0] = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.sleep(3600)
            raise AssertionError

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": method, "scheme": "http", "path": path,
                 "raw_path": path.encode(), "query_string": b"", "root_path": "",
                 "headers": [(b"host", b"localhost"), (b"content-type", b"application/json"),
                             (b"content-length", str(len(body)).encode())],
                 "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
        await app(scope, receive, send)
        return status[0]

    async def main() -> None:
        async with app.router.lifespan_context(app):
            assert await call("POST", "/collections", b'{"name": "c"}') in (200, 201)
            if gc_mode == "serve":
                tune_gc_for_serving(settings.gc_gen0_threshold)
            gc_ms = [0.0]
            start = [0.0]

            def watch(phase: str, info: dict[str, Any]) -> None:
                if phase == "start":
                    start[0] = time.process_time()
                else:
                    gc_ms[0] += (time.process_time() - start[0]) * 1000

            gc.callbacks.append(watch)
            counts0 = [s["collections"] for s in gc.get_stats()]
            cpu, sys_ms, faults = [], [], []
            for body in bodies:
                r0 = resource.getrusage(resource.RUSAGE_SELF)
                c0 = time.process_time()
                assert await call("POST", "/collections/c/documents", body) == 200
                if trim == "each":  # what the guard did after every large body before
                    release_freed_memory()
                cpu.append((time.process_time() - c0) * 1000)
                r1 = resource.getrusage(resource.RUSAGE_SELF)
                sys_ms.append((r1.ru_stime - r0.ru_stime) * 1000)
                faults.append(r1.ru_minflt - r0.ru_minflt)
            gc.callbacks.remove(watch)
            counts = [s["collections"] - c for s, c in zip(gc.get_stats(), counts0, strict=True)]
        print(f"gc {gc_mode}, trim {trim}: process CPU per request (1,000 documents) median "
              f"{statistics.median(cpu[WARM:]):.1f} ms, mean {statistics.mean(cpu[WARM:]):.1f} "
              f"ms, max {max(cpu[WARM:]):.0f} ms; system (median) "
              f"{statistics.median(sys_ms[WARM:]):.1f} ms; minor page faults "
              f"{statistics.median(faults[WARM:]):,.0f}; collections by generation "
              f"{counts} over {len(bodies)} requests ({gc_ms[0] / len(bodies):.1f} ms each)")

    asyncio.run(main())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("view", choices=["steps", "asgi"])
    ap.add_argument("--batches", type=int, default=25)
    ap.add_argument("--gc", choices=["serve", "python"], default="serve")
    ap.add_argument("--trim", choices=["quiet", "each"], default="quiet")
    args = ap.parse_args()
    if args.view == "steps":
        steps(args.batches)
    else:
        asgi(args.batches, args.gc, args.trim)


if __name__ == "__main__":
    main()
