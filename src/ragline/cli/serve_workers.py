"""``ragline serve --workers N``: N API processes answering on one port.

The parent binds the listening socket once and starts N processes (``spawn``:
no threads or connections inherited); each opens its own ``Ragline`` on the
shared catalog and store and accepts on the inherited socket, so the kernel
spreads connections over them. The parent only supervises: a process that dies
is started again (after a pause, so a crash loop cannot spin), and SIGTERM or
Ctrl-C stops them all gracefully (uvicorn finishes the requests in flight).

Why our own supervisor rather than uvicorn's ``--workers``: uvicorn's re-imports
the app from a string in every process and would lose the settings given as
flags; here each process gets the parent's validated ``Settings`` object.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from multiprocessing.process import BaseProcess
from types import FrameType

from ragline.settings import Settings

log = logging.getLogger("ragline")

RESTART_PAUSE_S = 2.0
STOP_GRACE_S = 15.0


def _bind(settings: Settings) -> socket.socket:
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((settings.host.strip("[]"), settings.port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _exit_with_parent(parent: int) -> None:
    """SIGTERM this process once its supervisor is gone (killed with SIGKILL, say), so no
    API process is left serving the port on its own."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _api_process(settings: Settings, sock: socket.socket, index: int, parent: int) -> None:
    """One API process: its own Ragline on the shared catalog, serving ``sock``."""
    import uvicorn

    from ragline.api.app import create_app
    from ragline.cli.main import uvicorn_config
    from ragline.facade import Ragline
    from ragline.observability.logs import configure_logging
    from ragline.observability.memory import tune_gc_for_serving

    configure_logging(settings.log_level, settings.log_format)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent turns Ctrl-C into SIGTERM
    _exit_with_parent(parent)
    rl = Ragline(settings)
    rl.address = f"http://{settings.host}:{settings.port}"
    rl.start()
    try:
        server = uvicorn.Server(uvicorn_config(create_app(ragline=rl), settings))
        tune_gc_for_serving(settings.gc_gen0_threshold)
        log.info("API process %d ready", index)
        server.run(sockets=[sock])
    finally:
        rl.close()


def serve_processes(settings: Settings, workers: int) -> int:
    """Run ``workers`` API processes until a signal; returns the exit status."""
    ctx = multiprocessing.get_context("spawn")
    sock = _bind(settings)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def start(index: int) -> BaseProcess:
        proc = ctx.Process(target=_api_process, args=(settings, sock, index, os.getpid()),
                           name=f"ragline-api-{index}", daemon=False)
        proc.start()
        return proc

    procs = {i: start(i) for i in range(workers)}
    log.info("serving http://%s:%d with %d API processes (pids %s)", settings.host,
             settings.port, workers, ", ".join(str(p.pid) for p in procs.values()))
    try:
        while not stop.wait(0.5):
            for i, proc in list(procs.items()):
                if not proc.is_alive():
                    log.error("API process %d (pid %s) exited with %s; starting it again", i,
                              proc.pid, proc.exitcode)
                    if stop.wait(RESTART_PAUSE_S):
                        break
                    procs[i] = start(i)
    finally:
        log.info("stopping %d API processes", len(procs))
        for proc in procs.values():
            if proc.is_alive():
                proc.terminate()  # SIGTERM: uvicorn's graceful shutdown
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in procs.values():
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join()
        sock.close()
    return 0
