"""Shard processes: each open shard generation served by a process of its own.

Edge's binding holds the GIL in every call, and loading, flushing and closing a
generation are hundreds of ms to seconds of it (measured at 100k points: load
0.24-0.94 s, close 0.05-0.4 s, a flush 6-440 ms of msync/fsync under the GIL).
In the server process that froze every request during the swap of a background
index build. With ``shard_processes`` on (the default), every generation lives
in a shard process and the server only sends it picklable calls
(:class:`.generation.Generation`'s methods) over a Unix socket: the build's
optimize (a niced build process, as before), the load of the new generation
(in its new shard process), the replay into it and the end of the old
generation (its process is killed: its directory is deleted right after) all
happen outside the server's interpreter.

Processes come from a fork server started once per server process with Edge and
this module imported, so a shard process starts in milliseconds. Each one
watches a pipe from the server and exits when the server is gone; and since the
fork server exits with the server and the kernel kills its children with it
(``PR_SET_PDEATHSIG``), a shard process that is busy in a GIL-holding Edge call,
or stopped, dies too: a SIGKILLed server leaves no process working in a shard's
directory when the next one opens it.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import multiprocessing
import multiprocessing.context
import os
import pickle
import threading
import time
from collections.abc import Callable
from multiprocessing import forkserver, popen_forkserver, reduction, spawn, util
from multiprocessing.connection import Client, Connection, Listener
from multiprocessing.context import set_spawning_popen
from pathlib import Path
from typing import Any

from ragline.errors import StoreError
from ragline.providers.stores.qdrant_edge.generation import Generation, SearchConfig
from ragline.providers.stores.qdrant_edge.orphans import (
    die_with_parent,
    hold_shard,
    wait_until_released,
)
from ragline.providers.stores.qdrant_edge.resident import read_ahead

log = logging.getLogger(__name__)

_CTX_LOCK = threading.Lock()
_CTX: Any = None


def _context() -> Any:
    """The fork-server context, its server preloaded with Edge and this module."""
    global _CTX
    with _CTX_LOCK:
        if _CTX is None:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["qdrant_edge", __name__,
                                        "ragline.providers.stores.qdrant_edge.provider"])
            _CTX = ctx
        return _CTX


class _Popen(popen_forkserver.Popen):
    """The fork server's ``Popen`` without re-importing the server's ``__main__`` in the
    child: multiprocessing runs the parent's main module again in every child (for
    ``python -m ragline.cli.main`` that is the whole CLI and web stack: seconds per
    shard opened under load, measured). A shard process needs none of it."""

    def _launch(self, process_obj: Any) -> None:  # popen_forkserver.Popen._launch, 3.11
        prep_data = spawn.get_preparation_data(process_obj._name)
        prep_data.pop("init_main_from_name", None)
        prep_data.pop("init_main_from_path", None)
        buf = io.BytesIO()
        set_spawning_popen(self)
        try:
            reduction.dump(prep_data, buf)
            reduction.dump(process_obj, buf)
        finally:
            set_spawning_popen(None)
        self.sentinel, w = forkserver.connect_to_new_process(self._fds)  # type: ignore[attr-defined]
        _parent_w = os.dup(w)
        self.finalizer = util.Finalize(self, util.close_fds,  # type: ignore[attr-defined]
                                       (_parent_w, self.sentinel))
        with open(w, "wb", closefd=True) as f:
            f.write(buf.getbuffer())
        self.pid = forkserver.read_signed(self.sentinel)


class _Process(multiprocessing.context.ForkServerProcess):
    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        return _Popen(process_obj)


def warm_up() -> None:
    """Start the fork server now, in the background, so that the first shard opened
    (the first request after a start) does not wait for its imports (1-3 s measured
    on the loaded 2-core machine)."""

    def start() -> None:
        try:
            _context()
            forkserver.ensure_running()
        except Exception as exc:  # the first open will try (and report) again
            log.warning("starting the shard fork server failed: %s", exc)

    threading.Thread(target=start, name="ragline-forkserver", daemon=True).start()


class ShardProcess:
    """The server's handle on one shard process: RPC calls over a small pool of
    connections (one per concurrent caller), and its lifetime."""

    def __init__(self, proc: Any, control: Connection, address: str, authkey: bytes) -> None:
        self.proc = proc
        self.control = control
        self.address = address
        self.authkey = authkey
        self._pool: list[Connection] = []
        self._lock = threading.Lock()
        self.dead = False

    @classmethod
    def start(cls, mode: str, path: Path, dim: int, config: dict[str, Any],
              should_stop: Callable[[], bool] | None = None) -> ShardProcess:
        """Start a shard process: ``mode`` ``open`` (load the generation at ``path``) or
        ``create`` (a new shard there); returns once it serves. ``should_stop`` is
        polled while waiting: True kills the process (``StoreError``)."""
        ctx = _context()
        parent, child = ctx.Pipe(duplex=True)
        proc = _Process(target=_main, args=(child, mode, str(path), dim, config),
                           name=f"ragline-shard-{mode}", daemon=True)
        proc.start()
        child.close()
        try:
            while not parent.poll(0.25):
                if should_stop is not None and should_stop():
                    raise StoreError("index build stopped")
                if not proc.is_alive():
                    raise StoreError(f"shard process ({mode}) exited ({proc.exitcode})")
            msg = parent.recv()
        except (EOFError, OSError) as exc:
            _kill(proc)
            raise StoreError(f"shard process ({mode}) failed to start: {exc}") from None
        except BaseException:
            _kill(proc)
            raise
        if msg[0] != "ready":
            _kill(proc)
            raise StoreError(f"shard process ({mode}) failed: {msg[1]}")
        return cls(proc, parent, msg[1], bytes(proc.authkey))

    def call(self, method: str, *args: Any) -> Any:
        return self.begin(method, *args)()

    def begin(self, method: str, *args: Any) -> Callable[[], Any]:
        """Send a call and return what waits for its result (call that exactly once: it
        hands the connection back). The caller goes on meanwhile: a bulk write makes its
        next part while the shard process makes the points of this one."""
        with self._lock:
            conn = self._pool.pop() if self._pool else None
        try:
            if conn is None:
                conn = Client(self.address, family="AF_UNIX", authkey=self.authkey)
            conn.send_bytes(pickle.dumps((method, args), protocol=pickle.HIGHEST_PROTOCOL))
        except (EOFError, OSError) as exc:
            if conn is not None:
                conn.close()
            raise StoreError(f"the shard process is gone ({type(exc).__name__})") from None
        return functools.partial(self._finish, conn)

    def _finish(self, conn: Connection) -> Any:
        try:
            status, value = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError) as exc:
            conn.close()
            raise StoreError(f"the shard process is gone ({type(exc).__name__})") from None
        with self._lock:
            self._pool.append(conn)
        if status == "ok":
            return value
        if isinstance(value, BaseException):
            raise value
        raise StoreError(str(value))

    def pid(self) -> int | None:
        return int(self.proc.pid) if self.proc.pid is not None else None

    def kill(self) -> None:
        """End the process at once, without closing its shard: for a generation that
        is being deleted (a replaced one), where a close would only flush files that go."""
        self.dead = True
        self._drop_pool()
        pid = self.pid()
        if pid is not None:  # its exit (freeing all its memory) at the lowest priority
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, pid, 19)
        _kill(self.proc)
        self.control.close()

    def close(self, timeout: float = 60.0) -> None:
        """Close the shard cleanly (flush, release) in its process, then let it exit."""
        if self.dead:
            return
        self.dead = True
        self._drop_pool()
        try:
            self.control.send(("close",))
            self.proc.join(timeout)
        except (OSError, ValueError):
            pass
        if self.proc.is_alive():
            _kill(self.proc)
        self.control.close()

    def _drop_pool(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, []
        for conn in pool:
            conn.close()


def _kill(proc: Any) -> None:
    try:
        proc.kill()
        proc.join(10)
    except (OSError, ValueError, AssertionError):
        pass


class RemoteGeneration:
    """A :class:`.generation.Generation` in a shard process: the same methods, each
    one round trip (the arguments and results are pickled)."""

    def __init__(self, process: ShardProcess) -> None:
        self.process = process

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)

        def call(*args: Any) -> Any:
            return self.process.call(name, *args)

        return call

    def begin_prepare(self, ids: list[Any], rows: Any,
                      payloads: list[dict[str, Any]]) -> Callable[[], int]:
        """:meth:`.generation.Generation.begin_prepare` without waiting for the shard
        process: it makes the points while the caller goes on."""
        finish: Callable[[], int] = self.process.begin("prepare", ids, rows, payloads)
        return finish

    def close(self) -> None:
        self.process.close()

    def discard(self) -> None:
        self.process.kill()


# -- the shard process ---------------------------------------------------------------
def _main(control: Connection, mode: str, path: str, dim: int, config: dict[str, Any]) -> None:
    """The shard process: open the generation, serve calls, exit when told or when the
    server is gone (its end of ``control`` closes; and at once, whatever it is doing,
    when its parent, the fork server, dies with the server: :func:`.orphans.die_with_parent`)."""
    _leave_fork_server()
    die_with_parent()
    hold_shard(Path(path).parent)  # until this process exits
    if control.poll(0):
        # the server sends nothing before "ready": this is its end closing. The fork
        # server still forks what a server asked for just before it died; started
        # after its death, this process must not touch the shard that the next server
        # may be opening (taken after the lock above, the check leaves no gap: a later
        # opener waits for this process)
        os._exit(0)
    try:
        gen = _open(mode, path, dim, config)
        listener = Listener(family="AF_UNIX",
                            authkey=bytes(multiprocessing.current_process().authkey))
    except BaseException as exc:  # the server raises StoreError with this text
        try:
            control.send(("error", f"{type(exc).__name__}: {exc}"))
        finally:
            os._exit(1)
    threading.Thread(target=_accept, args=(listener, gen), daemon=True).start()
    control.send(("ready", listener.address))
    try:
        msg = control.recv()
    except (EOFError, OSError):  # the server is gone: exit without touching the shard
        os._exit(0)
    if msg and msg[0] == "close":
        try:
            gen.close()
        finally:
            os._exit(0)
    os._exit(0)


def _leave_fork_server() -> None:
    """Close this process's copy of the fork server's "alive" pipe. multiprocessing
    gives one to every process the fork server starts, and the fork server exits only
    when all of them are closed: a shard process that is stopped, or busy in a
    GIL-holding Edge call, when the server is SIGKILLed would keep the fork server
    alive, and the fork server it (nothing would ever exit). Closed, the fork server
    exits with the server, and the kernel then kills the shard processes
    (:func:`.orphans.die_with_parent`)."""
    server: Any = getattr(forkserver, "_forkserver", None)
    fd = getattr(server, "_forkserver_alive_fd", None)
    if isinstance(fd, int):
        with contextlib.suppress(OSError):
            os.close(fd)
        server._forkserver_alive_fd = None


def _open(mode: str, path: str, dim: int, config: dict[str, Any]) -> Generation:
    import qdrant_edge as q

    from ragline.providers.stores.qdrant_edge.provider import (
        QdrantEdgeConfig,
        QdrantEdgeStore,
    )

    cfg = QdrantEdgeConfig(**config)
    edge = QdrantEdgeStore.edge_config(cfg, dim)
    search = search_config(cfg)
    if mode == "create":
        gen = Generation(q.EdgeShard.create(path, edge), search)
        gen.create_base_indexes()
        gen.flush()
        return gen
    wait_until_released(Path(path))  # a killed server's shard process: the kernel ends it
    if cfg.warm_open:  # in the new process: off the request path
        read_ahead(Path(path), cfg.build_nice)
    for attempt in range(40):  # a server killed a moment ago: its process may still exit
        try:
            shard = q.EdgeShard.load(path, edge)
            break
        except Exception as exc:
            if "lock" not in str(exc).lower() or attempt == 39:
                raise
            time.sleep(0.25)
    from ragline.observability.memory import release_freed_memory

    release_freed_memory()
    gen = Generation(shard, search)
    if cfg.warm_open:
        gen.keep_resident(path)
    return gen


def search_config(cfg: Any) -> SearchConfig:
    return SearchConfig(cfg.exact_search_max_matches, cfg.hnsw_ef, cfg.filter_links,
                        cfg.index_memory, cfg.hnsw_full_scan_threshold_kb)


def _accept(listener: Listener, gen: Generation) -> None:
    while True:
        try:
            conn = listener.accept()
        except Exception:  # a client that failed authentication, or shutdown
            continue
        threading.Thread(target=_serve, args=(conn, gen), daemon=True).start()


def _serve(conn: Connection, gen: Generation) -> None:
    while True:
        try:
            method, args = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            conn.close()
            return
        try:
            reply: tuple[str, Any] = ("ok", getattr(gen, method)(*args))
            data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            data = pickle.dumps(("error", _portable(exc)), protocol=pickle.HIGHEST_PROTOCOL)
        conn.send_bytes(data)


def _portable(exc: Exception) -> Any:
    """The exception itself when it survives pickling (ragline's errors, Edge's and the
    built-in ones: the caller sees what it saw with Edge in its own process), else its
    text (raised there as :class:`StoreError`)."""
    try:
        back = pickle.loads(pickle.dumps(exc))
        if type(back) is type(exc):
            return exc
    except Exception:
        pass
    return f"{type(exc).__name__}: {exc}"
