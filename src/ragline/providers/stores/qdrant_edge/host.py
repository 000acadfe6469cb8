"""A host process: one Edge shard generation, served (or built) outside the server.

Edge's binding holds the GIL in every call, and loading, flushing and closing a
generation take hundreds of ms to seconds of it (measured at 100k points: load
0.24-0.94 s, close 0.05-0.4 s, a flush 6-440 ms), an index build's ``optimize()``
minutes. So no Edge call is made in the server process: every generation lives in a
host, started as ``python -m ragline.providers.stores.qdrant_edge.host PARENT_PID``
(:class:`.hosts.Spawner`), which speaks :mod:`.wire`'s protocol on its stdin and on
the sockets the store hands it. Modes:

* ``open`` / ``create``: open (or create) the generation at a path and serve
  :class:`.generation.Generation`'s methods, one thread per socket, until told to
  close (``q``) or until its stdin ends (the server is gone: exit at once, the shard
  untouched);
* ``build``: a background index build's step on a copy of the shard (niced): apply
  the journal written into the copy, give the payload indexes the links and placement
  configured, optimize, flush, close, answer and exit (:mod:`.builder`).
"""

from __future__ import annotations

import os
import pickle
import socket
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import qdrant_edge as q

from ragline.observability.memory import release_freed_memory
from ragline.providers.stores.qdrant_edge import lifetime, wire
from ragline.providers.stores.qdrant_edge.generation import Generation, SearchConfig
from ragline.providers.stores.qdrant_edge.generations import JOURNAL
from ragline.providers.stores.qdrant_edge.indexes import (
    base_index_params,
    index_memory,
    index_params,
)
from ragline.providers.stores.qdrant_edge.queries import VECTOR
from ragline.providers.stores.qdrant_edge.resident import read_ahead


def edge_config(c: Any, dimension: int) -> Any:
    """The shard config for create and load (load rewrites the runtime settings, so
    changing them in ragline's settings applies to existing shards too)."""
    return q.EdgeConfig(
        vectors={VECTOR: q.EdgeVectorParams(size=dimension, distance=q.Distance.Cosine)},
        hnsw_config=q.HnswIndexConfig(
            m=c.hnsw_m, ef_construct=c.hnsw_ef_construct,
            full_scan_threshold=c.hnsw_full_scan_threshold_kb),
        optimizers=q.EdgeOptimizersConfig(indexing_threshold=c.indexing_threshold_kb),
        max_search_threads=c.search_threads,
        payload_memory=q.Memory.Cached if c.payload_memory == "cached" else q.Memory.Cold,
    )


def search_config(c: Any) -> SearchConfig:
    return SearchConfig(c.exact_search_max_matches, c.hnsw_ef, c.filter_links,
                        c.index_memory, c.hnsw_full_scan_threshold_kb)


def open_generation(mode: str, path: Path, dim: int, cfg: Any) -> Generation:
    """Open (``open``) or create (``create``) the generation at ``path`` in this process
    (a host; tests that put fakes in front of Edge call it too). ``cfg``: the store's
    options (a :class:`.config.QdrantEdgeConfig`, or its fields as attributes)."""
    search = search_config(cfg)
    if mode == "create":
        gen = Generation(q.EdgeShard.create(str(path), edge_config(cfg, dim)), search)
        gen.create_base_indexes()
        gen.flush()
        return gen
    lifetime.wait_until_released(path)  # a killed server's host: the kernel ends it
    if cfg.warm_open:  # off the request path: this process serves nothing yet
        read_ahead(path, cfg.build_nice)
    for attempt in range(40):  # a server killed a moment ago: its host may still exit
        try:
            shard = q.EdgeShard.load(str(path), edge_config(cfg, dim))
            break
        except Exception as exc:
            if "lock" not in str(exc).lower() or attempt == 39:
                raise
            time.sleep(0.25)
    # loading replays the WAL; what that freed stayed in the heap: a restart after large
    # writes held ~900 MB instead of ~540 MB (BENCHMARKS.md)
    release_freed_memory()
    gen = Generation(shard, search)
    if cfg.warm_open:
        gen.keep_resident(str(path))
    return gen


def build(path: Path, dim: int, cfg: Any) -> None:
    """The build step on the copy at ``path`` (see the module's docstring)."""
    if os.getpriority(os.PRIO_PROCESS, 0) < cfg.build_nice:  # started niced, or now
        os.setpriority(os.PRIO_PROCESS, 0, cfg.build_nice)
    shard = q.EdgeShard.load(str(path), edge_config(cfg, dim))
    journal = path / JOURNAL
    if journal.exists():
        gen = Generation(shard, search_config(cfg))
        with open(journal, "rb") as fh:
            while fh.peek(1):
                gen.write([pickle.load(fh)])
        journal.unlink()
    for field, info in shard.info().payload_schema.items():
        params = reindex_params(field, info, cfg.filter_links, cfg.index_memory)
        if params is not None:  # links or placement as configured, for older shards too
            shard.update(q.UpdateOperation.delete_field_index(field))
            shard.update(q.UpdateOperation.create_field_index(field, params))
    shard.optimize()
    shard.flush()
    shard.close()


def reindex_params(field: str, info: Any, links: bool, memory_name: str) -> Any | None:
    """New index parameters for ``field`` when its index lacks the per-value links or the
    memory placement the config asks for; None when it is as configured."""
    memory = index_memory(memory_name)
    base = base_index_params(field, memory)
    if base is not None:
        placed = getattr(info.params, "memory", None) == getattr(base, "memory", None)
        return None if placed else base
    placed = getattr(info.params, "memory", None) == memory
    kind = {q.PayloadSchemaType.Keyword: "keyword", q.PayloadSchemaType.Integer: "integer",
            q.PayloadSchemaType.Float: "float"}.get(info.data_type)
    if kind is None:
        return None
    want_links = links and kind != "float" and field.startswith("metadata.")
    linked = bool(getattr(info.params, "enable_hnsw", False))
    if placed and linked == want_links:
        return None
    return index_params(kind, want_links, memory)


def serve(sock: socket.socket, gen: Generation) -> None:
    """Answer calls on one socket until it closes."""
    with sock:
        while True:
            try:
                frame = wire.recv_frame(sock)
            except (EOFError, OSError):
                return
            try:
                method, args = wire.loads(frame)
                if method.startswith("_"):
                    raise AttributeError(method)
                data = wire.dumps(("ok", getattr(gen, method)(*args)))
            except Exception as exc:
                data = wire.dumps(("error", wire.portable(exc)))
            try:
                wire.send_frame(sock, data)
            except OSError:
                return


def main(argv: list[str]) -> int:
    parent = int(argv[0])
    lifetime.die_with_parent(parent)
    control = socket.socket(fileno=sys.stdin.fileno())
    try:  # a spare host waits here until the store gives it a generation
        mode, path_name, dim, options = wire.recv(control)
    except (EOFError, OSError):
        return 0
    path = Path(path_name)
    lifetime.hold_shard(path.parent)  # until this process exits
    if os.getppid() != parent:
        # the server died before the lock was taken: the next one may be opening the
        # shard (taken before this check, the lock leaves no gap: it waits for us)
        return 0
    try:
        cfg = SimpleNamespace(**options)  # validated by the server
        if mode == "build":
            build(path, dim, cfg)
            wire.send(control, ("ready", None))
            return 0
        gen = open_generation(mode, path, dim, cfg)
    except BaseException as exc:  # the store raises StoreError with this text
        wire.send(control, ("error", f"{type(exc).__name__}: {exc}"))
        return 1
    wire.send(control, ("ready", None))
    while True:
        msg, fds, _, _ = socket.recv_fds(control, 1, 1)
        if msg == b"c" and fds:
            conn = socket.socket(fileno=fds[0])
            threading.Thread(target=serve, args=(conn, gen), daemon=True).start()
        elif msg == b"q":
            gen.close()
            return 0
        else:  # end of file: the server is gone; exit without touching the shard
            os._exit(0)


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(code)  # no interpreter shutdown: daemon threads may be inside Edge calls
