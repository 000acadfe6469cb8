"""Give freed heap back to the operating system after large work (issue 10).

glibc keeps memory that Python, onnxruntime, tokenizers or Qdrant Edge freed in
its arenas (one per thread that allocated), so after a 35 MB JSON body or a
1M-character document the process stayed hundreds of MB above its baseline
although nothing was alive any more. ``malloc_trim(0)`` walks every arena and
returns free pages; it takes a few milliseconds, so it runs after large requests
and background jobs only, off the event loop. No-op where glibc is absent.

What stays afterwards is what is really held: the points a store now keeps and
onnxruntime's arena at the largest batch it ran (BENCHMARKS.md, "Memory after
large requests").
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import threading
from typing import Any

TRIM_AFTER_BYTES = 512 * 1024
"""Requests with a body at least this large are followed by a trim."""

_libc: Any = None
_lock = threading.Lock()


def _trim_function() -> Any:
    global _libc
    if _libc is None:
        name = ctypes.util.find_library("c") or "libc.so.6"
        try:
            _libc = ctypes.CDLL(name)
            _libc.malloc_trim  # noqa: B018 (glibc only: musl and macOS have none)
        except (OSError, AttributeError):
            _libc = False
    return _libc.malloc_trim if _libc else None


def release_freed_memory() -> bool:
    """Return free heap pages to the OS; False where there is no ``malloc_trim``.

    Serialised: concurrent trims would only walk the same arenas twice."""
    trim = _trim_function()
    if trim is None:
        return False
    with _lock, contextlib.suppress(OSError):
        trim(0)
    return True


def tune_gc_for_serving(gen0_threshold: int) -> None:
    """Garbage-collector settings of a server process (``ragline serve``), called once
    the app is built; ``gen0_threshold`` 0 leaves Python's defaults.

    A bulk write parses thousands of containers (a list of 384 floats per document)
    that live for the request, so with Python's threshold of 700 each request set off
    ~13 young collections that walked those lists again and again, and every ~15
    requests a full collection walked the ~270,000 objects of the loaded app (100-200
    ms; measured, BENCHMARKS.md). Freezing moves what start-up made into the permanent
    generation (never walked again; it lives as long as the process anyway), and a
    higher first threshold lets a request's objects die by reference counting before
    any collection sees them. Cyclic garbage is still collected, just later. Not done
    for library use: the host application owns its collector."""
    if gen0_threshold <= 0:
        return
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(gen0_threshold, gen1, gen2)
