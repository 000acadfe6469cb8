"""Host processes from the store's side: starting, calling and ending them.

A host (:mod:`.host`) is started with plain ``subprocess`` and spoken to with
:mod:`.wire`'s protocol. Starting one costs an interpreter and Edge's import
(~0.3-1 s on a loaded machine), so the :class:`Spawner` keeps one started and
waiting: opening a shard, creating one and a build's new generation take it at once
and another is started behind them (after the build, for a build); a build's own
step gets a niced host of its own.
"""

from __future__ import annotations

import contextlib
import functools
import os
import queue
import select
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragline.errors import StoreError
from ragline.providers.stores.qdrant_edge import wire

HOST_MODULE = "ragline.providers.stores.qdrant_edge.host"

_Started = tuple["subprocess.Popen[bytes]", socket.socket]


class Host:
    """One host process: calls to its generation's methods (``host.count(...)``, or
    :meth:`begin` to go on while it works), each over a socket of a small pool (one
    per concurrent caller), and its end."""

    def __init__(self, proc: subprocess.Popen[bytes], control: socket.socket) -> None:
        self.proc = proc
        self.control = control
        self._pool: list[socket.socket] = []
        self._lock = threading.Lock()
        self.dead = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def sockets(self) -> int:
        """Sockets open to the host and not in use (one per concurrent caller so far)."""
        return len(self._pool)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        return functools.partial(self.call, name)

    def call(self, method: str, *args: Any) -> Any:
        return self.begin(method, *args)()

    def begin(self, method: str, *args: Any) -> Callable[[], Any]:
        """Send a call; returns what waits for its result (call it exactly once: it
        hands the socket back). A bulk write makes its next part meanwhile."""
        with self._lock:
            sock = self._pool.pop() if self._pool else None
        try:
            if sock is None:
                sock = self._connect()
            wire.send(sock, (method, args))
        except OSError as exc:
            if sock is not None:
                sock.close()
            raise StoreError(f"the host process is gone ({type(exc).__name__})") from None
        return functools.partial(self._finish, sock)

    def _connect(self) -> socket.socket:
        mine, theirs = socket.socketpair()
        with theirs, self._lock:
            if self.dead:
                mine.close()
                raise OSError("the host was ended")
            socket.send_fds(self.control, [b"c"], [theirs.fileno()])
        return mine

    def _finish(self, sock: socket.socket) -> Any:
        try:
            status, value = wire.recv(sock)
        except (EOFError, OSError) as exc:
            sock.close()
            raise StoreError(f"the host process is gone ({type(exc).__name__})") from None
        with self._lock:
            if self.dead:
                sock.close()
            else:
                self._pool.append(sock)
        if status == "ok":
            return value
        if isinstance(value, BaseException):
            raise value
        raise StoreError(str(value))

    def kill(self) -> None:
        """End the process at once, without closing its shard: for a generation that
        is being deleted (a replaced one), where a close would only flush files that go."""
        self._end()
        with contextlib.suppress(OSError):  # its exit (freeing its memory) at low priority
            os.setpriority(os.PRIO_PROCESS, self.proc.pid, 19)
        _kill(self.proc)

    def close(self, timeout: float = 60.0) -> None:
        """Close the shard cleanly (flush, release) in its process, then let it exit."""
        if self.dead:
            return
        with contextlib.suppress(OSError):
            self.control.sendall(b"q")
        self._end()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _kill(self.proc)

    def _end(self) -> None:
        with self._lock:
            self.dead = True
            pool, self._pool = self._pool, []
        for sock in pool:
            sock.close()
        self.control.close()


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


class Spawner:
    """Starts host processes, all from one thread that lives as long as this process (the
    parent-death signal follows the thread that started a process: :mod:`.lifetime`),
    made at the first start, and keeps one *spare* started and waiting from then on
    (``prestart``: at once, for a store with shards to open).

    A spare is started at normal priority, since it may come to serve searches; while
    a background build runs, that start would compete with them for the CPU. So a
    build's own step is a host of its own, started niced (``nice``), and the spare the
    build's new generation takes is replaced only when the build is over
    (``refill=False``, then :meth:`refill`)."""

    def __init__(self, prestart: bool = False) -> None:
        self._wanted: queue.Queue[tuple[int, queue.Queue[_Started | BaseException]]] = \
            queue.Queue()
        self._spares: queue.Queue[_Started | BaseException] = queue.Queue()
        self._lock = threading.Lock()
        self._primed = False
        self._coming = 0  # spares started or being started, not taken yet
        self._thread: threading.Thread | None = None
        if prestart:
            self._prime()

    def _prime(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ragline-hosts",
                                                daemon=True)
                self._thread.start()
            if not self._primed:
                self._primed = True
                if self._coming == 0:
                    self._want_spare()

    def _want_spare(self) -> None:
        """One more spare (the caller holds ``_lock``)."""
        self._coming += 1
        self._wanted.put((0, self._spares))

    def _run(self) -> None:
        while True:
            nice, answer = self._wanted.get()
            try:
                mine, theirs = socket.socketpair()
                with theirs:
                    niced = ["nice", "-n", str(nice)] if nice else []
                    proc = subprocess.Popen([*niced, sys.executable, "-m", HOST_MODULE,
                                             str(os.getpid())], stdin=theirs.fileno())
                answer.put((proc, mine))
            except Exception as exc:  # reported to the caller that waits for it
                answer.put(exc)

    def refill(self) -> None:
        """Start a spare if none is waiting or coming (after a ``refill=False`` start)."""
        with self._lock:
            if self._primed and self._coming == 0:
                self._want_spare()

    def start(self, mode: str, path: Path, dim: int, options: dict[str, Any],
              should_stop: Callable[[], bool] | None = None, *, nice: int = 0,
              refill: bool = True) -> Host:
        """A host that has opened (``open``), created (``create``) the generation at
        ``path``, or built it (``build``: the process has exited). ``should_stop`` is
        polled while waiting: True kills the process (``StoreError``). ``nice``: a host
        of its own started at that niceness, the spare left waiting; ``refill``: False
        leaves the spare taken unreplaced until :meth:`refill`."""
        self._prime()
        if nice:
            answer: queue.Queue[_Started | BaseException] = queue.Queue()
            self._wanted.put((nice, answer))
            got = answer.get()
        else:
            with self._lock:
                if self._coming == 0:  # taken unreplaced by another start meanwhile
                    self._want_spare()
                self._coming -= 1
                if refill:  # the one taken now is replaced behind us
                    self._want_spare()
            got = self._spares.get()
        if isinstance(got, BaseException):
            raise StoreError(f"cannot start a host process: {got}")
        host = Host(*got)
        try:
            wire.send(host.control, (mode, str(path), dim, options))
            while not select.select([host.control], [], [], 0.25)[0]:
                if should_stop is not None and should_stop():
                    raise StoreError("index build stopped")
                if host.proc.poll() is not None:
                    raise StoreError(f"host process ({mode}) exited ({host.proc.returncode})")
            status, text = wire.recv(host.control)
        except (EOFError, OSError) as exc:
            host.kill()
            raise StoreError(f"host process ({mode}) failed to start: {exc}") from None
        except BaseException:
            host.kill()
            raise
        if status != "ready":
            host.kill()
            raise StoreError(f"host process ({mode}) failed: {text}")
        return host

    def close(self) -> None:
        """End the waiting hosts (a later :meth:`start` starts them again)."""
        with self._lock:
            self._primed = False
        while True:
            try:
                got = self._spares.get_nowait()
            except queue.Empty:
                return
            with self._lock:
                self._coming -= 1
            if not isinstance(got, BaseException):
                Host(*got).kill()
