"""The wire protocol between the store and its host processes.

A *frame* is a 4-byte big-endian length and that many bytes of pickle (protocol 5).
Pickle, because what crosses is plain data both ends share the code of -- numpy
matrices (an upsert's vectors, pickled in one piece), ragline's records, queries,
filter trees and errors -- so nothing needs a second schema or a converter per type
(msgpack or JSON would, and would copy every vector into lists). It is *only* that
data: :func:`loads` refuses every other global (:data:`ALLOWED`), so a frame cannot
name a function to call. Both ends are the same checkout and interpreter; the frames
never leave the machine (a ``socketpair`` per connection).

The conversation (:mod:`.host` is the host's side, :mod:`.hosts` the store's):

* the host's stdin is its *control* socket. The store sends one frame ``(mode,
  path, dim, options)`` (``mode``: ``open``, ``create`` or ``build``); the host
  answers ``("ready", None)`` once it serves (or, for ``build``, once it built) or
  ``("error", text)``;
* then, on the control socket, single bytes only: ``c`` with a file descriptor
  attached (``SCM_RIGHTS``) hands the host one end of a new socketpair to serve;
  ``q`` asks it to close its generation and exit; end of file means the server is
  gone: the host exits without touching the shard;
* on each served socket, one call at a time: ``(method, args)`` -> ``("ok", value)``
  or ``("error", exception or text)``; ``method`` is a public method of
  :class:`.generation.Generation`.
"""

from __future__ import annotations

import io
import pickle
import socket
import struct
from typing import Any

_HEADER = struct.Struct("!I")

WriteOp = tuple[Any, ...]
"""A write operation: plain data, applied in order by a generation and journaled as such
during a background build (:mod:`.generation` lists them)."""

ALLOWED: dict[str, frozenset[str] | None] = {
    # module -> names (None: any class of the module)
    "ragline.core.types": None,
    "ragline.core.filters": None,
    "ragline.errors": None,
    "ragline.providers.stores.qdrant_edge.queries": frozenset({"DensePlan"}),
    "numpy": frozenset({"ndarray", "dtype"}),
    "numpy.core.multiarray": frozenset({"_reconstruct", "scalar"}),
    "numpy._core.multiarray": frozenset({"_reconstruct", "scalar"}),
    "numpy.core.numeric": frozenset({"_frombuffer"}),
    "numpy._core.numeric": frozenset({"_frombuffer"}),
    "builtins": frozenset({"set", "frozenset", "complex", "slice", "range"}),
}
"""The globals a frame may name: ragline's data classes, numpy arrays, a few builtins
and the built-in exception classes."""


class _Loader(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        names = ALLOWED.get(module, frozenset())
        obj = super().find_class(module, name) if names is None or name in names else None
        if obj is None and module == "builtins":
            found = super().find_class(module, name)
            obj = found if isinstance(found, type) and issubclass(found, BaseException) else None
        if obj is None or (names is None and not isinstance(obj, type)):
            raise pickle.UnpicklingError(f"{module}.{name} is not part of the protocol")
        return obj


def dumps(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=5)


def loads(data: bytes | bytearray | memoryview) -> Any:
    return _Loader(io.BytesIO(data)).load()


def send(sock: socket.socket, obj: Any) -> None:
    send_frame(sock, dumps(obj))


def send_frame(sock: socket.socket, data: bytes) -> None:
    header = _HEADER.pack(len(data))
    if len(data) < 65536:
        sock.sendall(header + data)
    else:  # a large frame: no copy of the body
        sock.sendall(header)
        sock.sendall(data)


def recv(sock: socket.socket) -> Any:
    """The next frame's value; ``EOFError`` when the other end closed."""
    return loads(recv_frame(sock))


def recv_frame(sock: socket.socket) -> bytearray:
    (size,) = _HEADER.unpack(_exactly(sock, _HEADER.size))
    return _exactly(sock, size)


def _exactly(sock: socket.socket, size: int) -> bytearray:
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:], size - got)
        if n == 0:
            raise EOFError("the other end closed the connection")
        got += n
    return buf


def portable(exc: BaseException) -> Any:
    """What a host sends for an exception: the exception itself when it crosses
    (ragline's errors, the built-in ones: the caller sees what it would have seen with
    Edge in its own process), else its text (raised there as ``StoreError``)."""
    try:
        back = loads(dumps(exc))
        if type(back) is type(exc):
            return exc
    except Exception:
        pass
    return f"{type(exc).__name__}: {exc}"
