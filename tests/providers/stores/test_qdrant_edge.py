from pathlib import Path

import pytest

from ragline.providers.stores.qdrant_edge.provider import QdrantEdgeConfig, QdrantEdgeStore
from ragline.testing.store_conformance import StoreConformance, dense


class TestQdrantEdgeStore(StoreConformance):
    @pytest.fixture
    def store(self, tmp_path: Path):  # type: ignore[no-untyped-def]
        s = QdrantEdgeStore(QdrantEdgeConfig(path=tmp_path / "shards"))
        yield s
        s.close()

    @pytest.fixture
    def broken(self, tmp_path: Path):  # type: ignore[no-untyped-def]
        """Its directory replaced by a file: nothing can be written there any more."""
        s = QdrantEdgeStore(QdrantEdgeConfig(path=tmp_path / "gone"))
        (tmp_path / "gone").rmdir()
        (tmp_path / "gone").write_text("not a directory")
        return s


def test_reopen_keeps_data_and_field_indexes(tmp_path: Path) -> None:
    from ragline.testing.store_conformance import rec

    s = QdrantEdgeStore(QdrantEdgeConfig(path=tmp_path))
    s.create_shard("k", 8)
    s.upsert("k", [rec(i, {"g": f"v{i % 4}"}) for i in range(40)])
    s.close()
    s2 = QdrantEdgeStore(QdrantEdgeConfig(path=tmp_path))
    assert s2.count("k", "default", None) == 40
    assert s2.distinct("k", "default", "g") == ["v0", "v1", "v2", "v3"]
    s2.close()


def test_drop_while_searching_never_leaks_or_crashes(tmp_path: Path) -> None:
    """Readers racing a drop get results or ShardGone, and the shard stays dropped."""
    import threading

    from ragline.errors import ShardGone
    from ragline.testing.store_conformance import rec, vec

    for trial in range(5):
        s = QdrantEdgeStore(QdrantEdgeConfig(path=tmp_path / f"t{trial}"))
        s.create_shard("k", 8)
        s.upsert("k", [rec(i) for i in range(300)])
        errors: list[BaseException] = []
        stop = threading.Event()

        def reader(store: QdrantEdgeStore = s, stop: threading.Event = stop,
                   errors: list[BaseException] = errors) -> None:
            while not stop.is_set():
                try:
                    dense(store, "k", "default", vec(1), None, 5)
                    store.count("k", "default", None)
                except ShardGone:
                    pass
                except BaseException as exc:
                    errors.append(exc)

        threads = [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        s.drop_shard("k")
        stop.set()
        for t in threads:
            t.join()
        assert errors == []
        assert not s.has_shard("k") and "k" not in s.open_keys()
        assert not (tmp_path / f"t{trial}" / "k").exists()
        s.close()


def test_runtime_settings_apply_to_new_and_existing_shards(tmp_path: Path) -> None:
    import json

    from ragline.testing.store_conformance import rec, vec

    def persisted() -> dict:  # type: ignore[type-arg]
        return json.loads((tmp_path / "k" / "g1" / "edge_config.json").read_text())

    s = QdrantEdgeStore(QdrantEdgeConfig(path=tmp_path))  # defaults: 1 thread, cached
    s.create_shard("k", 8)
    s.upsert("k", [rec(i, {"g": f"v{i % 4}"}) for i in range(20)])
    assert persisted()["max_search_threads"] == 1
    assert persisted()["payload_memory"] == "cached"
    s.close()
    s2 = QdrantEdgeStore(QdrantEdgeConfig(path=tmp_path, search_threads=3, payload_memory="cold"))
    hits = dense(s2, "k", "default", vec(5), None, 3)
    assert hits[0].id == "doc-5" and s2.count("k", "default", None) == 20  # data intact
    assert persisted()["max_search_threads"] == 3
    assert persisted()["payload_memory"] == "cold"
    s2.close()


def test_a_host_process_serves_the_shard_and_its_errors_keep_their_type(
        tmp_path: Path) -> None:
    """Edge runs in a host process; errors raised there reach the caller as the same
    exceptions, and the process ends with the store."""
    import os

    from ragline.core.filters import Eq
    from ragline.errors import FilterError
    from ragline.testing.store_conformance import DIM, rec

    store = QdrantEdgeStore(QdrantEdgeConfig(path=tmp_path))
    store.create_shard("k", DIM)
    store.upsert("k", [rec(1, {"x": 1})])
    pid = store.table.host("k").pid
    assert pid is not None and pid != os.getpid()
    assert store.count("k", "default", Eq("x", 1)) == 1
    with pytest.raises(FilterError):
        store.count("k", "default", Eq('bad"key', 1))
    store.close()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


_SERVER = r"""
import sys
from pathlib import Path
from ragline.providers.stores.qdrant_edge.provider import QdrantEdgeConfig, QdrantEdgeStore
from ragline.testing.store_conformance import DIM, rec
store = QdrantEdgeStore(QdrantEdgeConfig(path=Path(sys.argv[1])))
store.create_shard("k", DIM)
store.upsert("k", [rec(1, {"x": 1})])
print(store.table.host("k").pid, flush=True)
sys.stdin.read()
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return not any(line.startswith("State:") and "Z" in line for line in fh)
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="Linux only")
def test_a_host_process_dies_with_its_server_even_when_it_cannot_run(tmp_path: Path) -> None:
    """A SIGKILLed server's host processes must be gone before the next server opens
    the shard. A stopped one cannot notice its stdin ending (nor can one busy in a
    GIL-holding Edge call); the kernel kills it with its parent anyway."""
    import os
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-c", _SERVER, str(tmp_path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    shard_pid = int(proc.stdout.readline())
    os.kill(shard_pid, signal.SIGSTOP)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 5
    while _alive(shard_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(shard_pid)
    reopened = QdrantEdgeStore(QdrantEdgeConfig(path=tmp_path))
    assert reopened.count("k", "default", None) == 1
    reopened.close()


def test_a_generation_is_loaded_only_once_its_wal_lock_is_free(tmp_path: Path) -> None:
    """Edge takes the WAL lock after opening the segments: a load racing the previous
    owner would touch its files first. The store waits for the lock instead."""
    import fcntl
    import os
    import threading

    from ragline.errors import StoreError
    from ragline.providers.stores.qdrant_edge.lifetime import wait_until_released

    wait_until_released(tmp_path / "new")  # no WAL yet: nothing to wait for
    (tmp_path / "g1" / "wal").mkdir(parents=True)
    fd = os.open(tmp_path / "g1" / "wal", os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # what a live Edge shard holds
    with pytest.raises(StoreError, match="in use by another process"):
        wait_until_released(tmp_path / "g1", timeout=0.2)
    threading.Timer(0.3, os.close, args=(fd,)).start()  # the owner ends
    wait_until_released(tmp_path / "g1", timeout=10)
    with pytest.raises(OSError):
        os.fstat(fd)  # it waited for the owner to let go


def test_a_server_opens_a_shard_only_once_earlier_processes_have_left_it(
        tmp_path: Path) -> None:
    """Shard and build processes hold a shared lock on the shard's ``ragline_busy``
    for their whole life; the next server waits for it before it removes, recreates
    or loads anything there (a dying process of a killed server raced it: a segment
    lost its payload storage under SIGKILL chaos)."""
    import subprocess
    import sys
    import time

    from ragline.errors import StoreError
    from ragline.providers.stores.qdrant_edge.lifetime import wait_for_previous_owners

    wait_for_previous_owners(tmp_path)  # never used: nothing to wait for
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from ragline.providers.stores.qdrant_edge.lifetime import hold_shard; "
         "hold_shard(Path(sys.argv[1])); print('held', flush=True); time.sleep(1.0)",
         str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    held_at = time.monotonic()
    with pytest.raises(StoreError, match="in use by another process"):
        wait_for_previous_owners(tmp_path, timeout=0.2)
    wait_for_previous_owners(tmp_path, timeout=30)
    assert time.monotonic() - held_at >= 0.9  # until the holder (1 s) was gone
    assert holder.wait(timeout=10) == 0


def test_a_host_exits_when_its_stdin_ends_without_the_parent_death_signal(
        tmp_path: Path) -> None:
    """The portable way a host ends with its server: end of file on its stdin (the
    control socket). Here its parent (this process) lives on, so the parent-death
    signal cannot be what ends it."""
    import os
    import socket
    import subprocess
    import sys

    from ragline.providers.stores.qdrant_edge import wire
    from ragline.providers.stores.qdrant_edge.config import QdrantEdgeConfig

    mine, theirs = socket.socketpair()
    with theirs:
        proc = subprocess.Popen([sys.executable, "-m", "ragline.providers.stores.qdrant_edge.host",
                                 str(os.getpid())], stdin=theirs.fileno())
    (tmp_path / "k").mkdir()
    wire.send(mine, ("create", str(tmp_path / "k" / "g1"), 8,
                     QdrantEdgeConfig(path=tmp_path).model_dump(mode="json")))
    assert wire.recv(mine) == ("ready", None)
    assert proc.poll() is None
    mine.close()  # what the server's death does to the socket
    assert proc.wait(timeout=30) == 0


def test_the_wire_refuses_anything_but_the_protocols_data() -> None:
    """Frames carry plain data only: a pickle naming any other global is refused."""
    import os
    import pickle

    import numpy as np

    from ragline.core.filters import Eq
    from ragline.errors import FilterError, StoreError
    from ragline.providers.stores.qdrant_edge import wire

    data = ("upsert", [1], np.ones((1, 4), np.float32), [{"a": {1, 2}}], Eq("x", 1))
    back = wire.loads(wire.dumps(data))
    assert back[4] == Eq("x", 1) and back[2].tolist() == [[1.0] * 4]
    assert isinstance(wire.loads(wire.dumps(FilterError("bad"))), FilterError)
    for evil in (pickle.dumps(os.system), pickle.dumps(eval), pickle.dumps(wire.loads)):
        with pytest.raises(pickle.UnpicklingError, match="not part of the protocol"):
            wire.loads(evil)
    assert wire.portable(StoreError("x")).args == ("x",)
    # an exception that cannot cross goes as its text (raised as StoreError there)
    assert wire.portable(ValueError(lambda: 0)).startswith("ValueError: ")


def test_the_removed_in_process_option_is_refused_clearly(tmp_path: Path) -> None:
    """``shard_processes`` (issue 34): true still accepted (it changes nothing), false
    refused with what to do."""
    from pydantic import ValidationError

    assert QdrantEdgeConfig(path=tmp_path, shard_processes=True).path == tmp_path  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="shard_processes is gone"):
        QdrantEdgeConfig(path=tmp_path, shard_processes=False)  # type: ignore[call-arg]


def _hosts_of_this_process() -> dict[int, int]:
    """pid -> niceness of this process's host processes (spares included)."""
    import os

    out = {}
    for p in Path("/proc").iterdir():
        try:
            if not p.name.isdigit() or int((p / "stat").read_text().rsplit(")", 1)[1].split()[1]) \
                    != os.getpid():
                continue
            if b"qdrant_edge.host" in (p / "cmdline").read_bytes() and _alive(int(p.name)):
                out[int(p.name)] = os.getpriority(os.PRIO_PROCESS, int(p.name))
        except (OSError, ValueError):
            continue  # a process that ended meanwhile
    return out


def _wait_for(cond, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    import time

    deadline = time.monotonic() + timeout
    while not (got := cond()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return got


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="Linux only")
def test_a_build_host_starts_niced_and_a_taken_spare_can_wait_to_be_replaced(
        tmp_path: Path) -> None:
    """Issue 34's swap stall: a spare host starts at normal priority (it may come to
    serve searches), so a background build's own step gets a host of its own started
    niced, and the spare its new generation takes is replaced only after the build."""
    import time

    from ragline.providers.stores.qdrant_edge.config import QdrantEdgeConfig
    from ragline.providers.stores.qdrant_edge.hosts import Spawner

    options = QdrantEdgeConfig(path=tmp_path).model_dump(mode="json")
    before = set(_hosts_of_this_process())  # hosts of stores earlier tests left open
    def mine() -> dict[int, int]:
        return {p: n for p, n in _hosts_of_this_process().items() if p not in before}
    spawner = Spawner()
    started = []
    try:
        (tmp_path / "a").mkdir()
        niced = spawner.start("create", tmp_path / "a" / "g1", 8, options, nice=7)
        started.append(niced)
        assert mine()[niced.pid] == 7
        # the spare the first start asked for, at normal priority
        spare = _wait_for(lambda: [p for p, n in mine().items()
                                   if p != niced.pid and n == 0])
        assert len(spare) == 1
        (tmp_path / "b").mkdir()
        took = spawner.start("create", tmp_path / "b" / "g1", 8, options, refill=False)
        started.append(took)
        assert took.pid == spare[0]  # the spare, at once
        assert took.count("default", None) == 0  # and it serves
        time.sleep(1.0)
        assert set(mine()) == {niced.pid, took.pid}  # not replaced yet
        spawner.refill()
        again = _wait_for(lambda: set(mine()) - {niced.pid, took.pid})
        assert len(again) == 1
    finally:
        for host in started:
            host.close()
        spawner.close()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="Linux only")
def test_a_background_build_leaves_one_spare_host_behind(tmp_path: Path) -> None:
    """The new generation of a build is served by the spare that waited; once the build
    is over, a new spare waits for the next open or build (one, not more)."""
    from ragline.testing.store_conformance import DIM, rec

    before = set(_hosts_of_this_process())  # hosts of stores earlier tests left open
    def mine() -> dict[int, int]:
        return {p: n for p, n in _hosts_of_this_process().items() if p not in before}
    store = QdrantEdgeStore(QdrantEdgeConfig(path=tmp_path / "shards"))
    try:
        store.create_shard("k", DIM)
        store.upsert("k", [rec(i, {"x": i}) for i in range(1, 40)])
        serving = store.table.host("k")
        assert serving is not None
        spare = _wait_for(lambda: set(mine()) - {serving.pid})
        assert store.build_index("k") is True
        new = store.table.host("k")
        assert new is not None and {new.pid} == spare  # the spare serves the new generation
        after = _wait_for(lambda: set(mine()) - {new.pid})
        assert len(after) == 1 and after != spare
        assert set(mine()) == {new.pid, *after}  # the old host is gone
        assert len(dense(store, "k", "default", rec(3, {}).embedding, None, 3)) == 3
    finally:
        store.close()
