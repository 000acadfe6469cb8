"""The embedded store at scale, through the HTTP API of one running server (issue 18).

Builds a collection of pre-computed 384-d vectors (clustered like real embeddings:
1,000 centres) with metadata ``cat`` (20 values), ``tier`` (4) and a number, in
batches of 1,000 through ``POST /collections/{name}/documents``, then, **without
restarting the server or any offline step**:

* bulk-write rate (documents/s), and the same writes against a baseline server
  (``--baseline-src``: another checkout, e.g. main) in the same run;
* dense search p50/p95 and recall@10 (against exact search computed here with
  numpy) per filter shape, before the background index build and after it;
* the longest request stall while the build runs: a probe thread sends a cheap
  search every 20 ms and records each latency (and the same probe before it);
* peak RSS of the server and of the build process, disk size, build time.

Run::

    python benchmarks/bench_scale.py --size 100000 --baseline-src /work/main
    python benchmarks/bench_scale.py --size 1000000          # long: ~1.5 GB of vectors
    python benchmarks/bench_scale.py --size 1000000 --search-only /tmp/s1m5/w/data \
        --compare-env 'RAGLINE_STORE_OPTIONS={"hnsw_ef": 256}'   # searches only, A/B
    python benchmarks/bench_scale.py --size 1000000 --search-only /tmp/s1m5/w/data \
        --compare-src /tmp/base-main      # the same searches served by another checkout

Results go to stdout as Markdown plus a JSON line (``--json-out`` to keep it).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

try:
    import orjson

    def dumps(obj: Any) -> bytes:
        return orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY)
except ImportError:  # pragma: no cover
    def dumps(obj: Any) -> bytes:
        return json.dumps(obj, default=lambda a: a.tolist()).encode()

DIM = 384
BATCH = 1000
SHAPES: dict[str, dict[str, Any] | None] = {
    "unfiltered": None,
    "cat = one value (5%)": {"cat": "c3"},
    "cat $in 3 values (15%)": {"cat": {"$in": ["c1", "c2", "c7"]}},
    "tier $lte 1 (50%)": {"tier": {"$lte": 1}},
}
ROOT = Path(__file__).resolve().parents[1]


# -- data ----------------------------------------------------------------------------
class Data:
    """Deterministic clustered vectors and metadata, generated batch by batch."""

    def __init__(self, size: int, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.size = size
        self.centres = rng.normal(size=(1000, DIM)).astype(np.float32)
        self.assign = rng.integers(0, 1000, size)
        self.cat = rng.integers(0, 20, size)
        self.tier = rng.integers(0, 4, size)
        self.seed = seed

    def vectors(self, lo: int, hi: int) -> np.ndarray:
        """Rows [lo, hi); the noise is drawn per block of 1,000 so any range agrees."""
        blocks = []
        for b in range(lo // BATCH, (hi - 1) // BATCH + 1):
            rng = np.random.default_rng((self.seed, b))
            noise = rng.normal(size=(BATCH, DIM)).astype(np.float32) * 0.6
            s, e = max(lo, b * BATCH), min(hi, (b + 1) * BATCH)
            blocks.append(noise[s - b * BATCH:e - b * BATCH])
        return self.centres[self.assign[lo:hi]] + np.concatenate(blocks)

    def body(self, lo: int, hi: int) -> bytes:
        v = self.vectors(lo, hi)
        docs = [{"id": f"d{i}", "text": f"chunk {i}",
                 "metadata": {"cat": f"c{self.cat[i]}", "tier": int(self.tier[i]),
                              "score": float(i % 1000) / 10},
                 "embedding": v[i - lo]} for i in range(lo, hi)]
        return dumps({"documents": docs})

    def score(self) -> np.ndarray:
        """The float ``score`` field of every document (``i % 1000 / 10``)."""
        return (np.arange(self.size) % 1000) / 10

    def mask(self, where: dict[str, Any] | None) -> np.ndarray:
        if where is None:
            return np.ones(self.size, bool)
        if "tier" in where:
            return self.tier <= 1
        c = where["cat"]
        vals = [c] if isinstance(c, str) else c["$in"]
        return np.isin(self.cat, [int(x[1:]) for x in vals])


# -- server --------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, src: Path, python: str, data_dir: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.log = data_dir.parent / f"server-{self.port}.log"
        data_dir.mkdir(parents=True, exist_ok=True)
        self._log_f = self.log.open("w")
        self.proc = subprocess.Popen(
            [python, "-m", "ragline.cli.main", "serve", "--port", str(self.port),
             "--data-dir", str(data_dir), "--log-level", "info"],
            stdout=self._log_f, stderr=subprocess.STDOUT, cwd=src,
            env={**os.environ, "PYTHONPATH": str(src / "src"), **env})
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(self.log.read_text()[-2000:])
            try:
                if self.request("GET", "/health")[0] == 200:
                    return
            except OSError:
                time.sleep(0.2)
        raise TimeoutError(self.log.read_text()[-2000:])

    def request(self, method: str, path: str, body: bytes | None = None,
                conn: http.client.HTTPConnection | None = None) -> tuple[int, bytes]:
        c = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        c.request(method, path, body=body, headers={"content-type": "application/json"})
        r = c.getresponse()
        out = r.status, r.read()
        if conn is None:
            c.close()
        return out

    def rss_peak_mb(self) -> float:
        return _vm_hwm(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log_f.close()


def _vm_hwm(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _build_pids() -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if (b"qdrant_edge.host" in (p / "cmdline").read_bytes()
                        and os.getpriority(os.PRIO_PROCESS, int(p.name)) > 0):  # niced: a build
                    out.append(int(p.name))
            except OSError:
                pass
    return out


# -- phases --------------------------------------------------------------------------
def write(srv: Server, data: Data, lo: int, hi: int, conns: int = 2,
          all_ahead: bool = False) -> float:
    """Documents/s for [lo, hi) in batches of 1,000 over ``conns`` connections; bodies
    are serialised ahead (by a producer thread) so the client costs little. With
    ``all_ahead``, every body is serialised before the clock starts (the client then
    only sends: ~16 ms of CPU per 1,000 documents less on the server's two cores; a
    client on another machine costs them nothing at all)."""
    starts = list(range(lo, hi, BATCH))
    bodies: dict[int, bytes] = {}
    ready = threading.Condition()
    if all_ahead:
        bodies.update((s, data.body(s, min(s + BATCH, hi))) for s in starts)

    def produce() -> None:
        for s in starts if not all_ahead else []:
            b = data.body(s, min(s + BATCH, hi))
            with ready:
                while len(bodies) >= 2 * conns:
                    ready.wait()
                bodies[s] = b
                ready.notify_all()

    def take(s: int) -> bytes:
        with ready:
            while s not in bodies:
                ready.wait()
            b = bodies.pop(s)
            ready.notify_all()
            return b

    threading.Thread(target=produce, daemon=True).start()
    local = threading.local()
    posted = [0.0]

    def post(s: int) -> None:
        body = take(s)
        if not hasattr(local, "c"):
            local.c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=600)
        t = time.perf_counter()
        status, resp = srv.request("POST", "/collections/scale/documents", body, local.c)
        posted[0] += time.perf_counter() - t
        if status != 200:
            raise RuntimeError(resp[:500])

    t0 = time.perf_counter()
    with ThreadPoolExecutor(conns) as ex:
        list(ex.map(post, starts))
    return (hi - lo) / (time.perf_counter() - t0)


def search_shapes(srv: Server, data: Data, queries: np.ndarray, exact: dict[str, list[set[str]]],
                  ) -> dict[str, dict[str, float]]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=600)
    out = {}
    for name, where in SHAPES.items():
        lat, rec = [], []
        for qi, qv in enumerate(queries):
            body = dumps({"embedding": qv, "where": where, "limit": 10})
            t = time.perf_counter()
            status, resp = srv.request("POST", "/collections/scale/search", body, conn)
            lat.append((time.perf_counter() - t) * 1000)
            if status != 200:
                raise RuntimeError(resp[:500])
            got = {r["id"] for r in json.loads(resp)["results"]}
            rec.append(len(got & exact[name][qi]) / max(len(exact[name][qi]), 1))
        lat.sort()
        out[name] = {"p50": statistics.median(lat), "p95": lat[int(0.95 * len(lat)) - 1],
                     "recall": float(np.mean(rec))}
    return out


def exact_top(data: Data, queries: np.ndarray) -> dict[str, list[set[str]]]:
    unit_q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    scores = np.zeros((len(queries), data.size), np.float32)
    for lo in range(0, data.size, 100_000):
        hi = min(lo + 100_000, data.size)
        v = data.vectors(lo, hi)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        scores[:, lo:hi] = unit_q @ v.T
    out = {}
    for name, where in SHAPES.items():
        s = np.where(data.mask(where)[None, :], scores, -np.inf)
        top = np.argpartition(-s, 10, axis=1)[:, :10]
        out[name] = [{f"d{i}" for i in row} for row in top]
    return out


class Probe:
    """A cheap filtered search every 20 ms; records (time, latency ms)."""

    def __init__(self, srv: Server, qv: np.ndarray) -> None:
        self.srv = srv
        self.body = dumps({"embedding": qv, "where": {"cat": "c3"}, "limit": 3})
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.srv.port, timeout=600)
        while not self._stop.is_set():
            t = time.perf_counter()
            self.srv.request("POST", "/collections/scale/search", self.body, conn)
            self.samples.append((time.monotonic(), (time.perf_counter() - t) * 1000))
            self._stop.wait(0.02)

    def stop(self) -> list[tuple[float, float]]:
        self._stop.set()
        self._t.join()
        return self.samples


class Pressure:
    """The kernel's stall accounting (``/proc/pressure``, PSI), the CPU time stolen by
    the hypervisor, reclaim and fault counters (``/proc/vmstat``) and TLB-shootdown
    interrupts sampled every 50 ms, so a slow probe can be told apart as waiting for
    CPU, for I/O, for memory or for the host, or as slowed by the kernel's memory work
    (stall fields in ms; the counters as counts, ``nr_free_pages`` as a change)."""

    FILES = ("cpu", "io", "memory")
    VMSTAT = ("pgscan_kswapd", "pgscan_direct", "pgsteal_kswapd", "pgmajfault", "pgfault",
              "compact_stall", "compact_migrate_scanned", "thp_split_pmd",
              "workingset_refault_file", "nr_free_pages")

    def __init__(self) -> None:
        self.samples: list[tuple[float, dict[str, int]]] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        if Path("/proc/pressure/cpu").exists():
            self._t.start()

    @staticmethod
    def read() -> dict[str, int]:
        out = {}
        for f in Pressure.FILES:
            for line in Path(f"/proc/pressure/{f}").read_text().splitlines():
                kind, *fields = line.split()
                out[f"{f}_{kind}"] = int(fields[-1].split("=")[1])  # total, microseconds
        # time the hypervisor ran something else on this VM's CPUs (ticks, all CPUs)
        ticks = os.sysconf("SC_CLK_TCK")
        out["steal"] = int(Path("/proc/stat").read_text().split()[8]) * 1_000_000 // ticks
        # reclaim, compaction and faults (counts, scaled so ``during`` reports them as is)
        with contextlib.suppress(OSError):
            for line in Path("/proc/vmstat").read_text().splitlines():
                name, _, value = line.partition(" ")
                if name in Pressure.VMSTAT:
                    out[name] = int(value) * 1000
        # TLB shootdowns and function-call interrupts received, all CPUs
        with contextlib.suppress(OSError):
            for line in Path("/proc/interrupts").read_text().splitlines():
                fields = line.split()
                if fields and fields[0] in ("TLB:", "CAL:"):
                    count = sum(int(x) for x in fields[1:] if x.isdigit())
                    out[fields[0].rstrip(":").lower()] = count * 1000
        return out

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), self.read()))
            self._stop.wait(0.05)

    def stop(self) -> None:
        self._stop.set()
        if self._t.is_alive():
            self._t.join()

    def during(self, began: float, done: float) -> dict[str, float]:
        """Stall ms of each kind from the last sample before ``began`` to the first after
        ``done`` (so over a window a little wider than the probe)."""
        times = [t for t, _ in self.samples]
        i = max(0, bisect.bisect_right(times, began) - 1)
        j = min(len(times) - 1, bisect.bisect_left(times, done))
        if not self.samples or j <= i:
            return {}
        a, b = self.samples[i][1], self.samples[j][1]
        return {"window_ms": round((times[j] - times[i]) * 1000, 1),
                **{k: round((b[k] - a[k]) / 1000, 1) for k in a}}


class Threads:
    """What every thread of the server and of its descendants is doing (state, syscall,
    top kernel frames, from ``/proc``), sampled every 10 ms while ``active`` is set (the
    copy, load and swap of a build), so a slow probe can be matched with who waited on
    what. ``--trace-threads``."""

    def __init__(self, root_pid: int) -> None:
        self.root = root_pid
        self.active = False
        self.samples: list[tuple[float, list[tuple[int, int, str, str, str, str]]]] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _pids(self) -> list[int]:
        out, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            out.append(pid)
            for task in Path(f"/proc/{pid}/task").glob("*"):
                with contextlib.suppress(OSError):
                    todo.extend(int(c) for c in (task / "children").read_text().split())
        return out

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.active:
                now, rows = time.monotonic(), []
                for pid in self._pids():
                    for task in Path(f"/proc/{pid}/task").glob("*"):
                        with contextlib.suppress(OSError, ValueError, IndexError):
                            stat = (task / "stat").read_text()
                            comm = stat[stat.index("(") + 1:stat.rindex(")")]
                            state = stat.rsplit(")", 1)[1].split()[0]
                            sysc = (task / "syscall").read_text().split()[0]
                            stack = [ln.split("] ", 1)[1].split("+")[0] for ln in
                                     (task / "stack").read_text().splitlines()[:4]]
                            rows.append((pid, int(task.name), comm, state, sysc,
                                         "<".join(stack)))
                self.samples.append((now, rows))
            self._stop.wait(0.01)

    def stop(self) -> None:
        self._stop.set()
        self._t.join()

    def during(self, began: float, done: float) -> list[str]:
        """Per thread, its (state, syscall, stack) runs over the window, compressed."""
        seqs: dict[tuple[int, int, str], list[list[Any]]] = {}
        for t, rows in self.samples:
            if not began - 0.02 <= t <= done + 0.02:
                continue
            for pid, tid, comm, state, sysc, stack in rows:
                seq = seqs.setdefault((pid, tid, comm), [])
                key = f"{state}/{sysc}/{stack}"
                if seq and seq[-1][0] == key:
                    seq[-1][1] += 1
                else:
                    seq.append([key, 1])
        return [f"{pid}/{tid} {comm}: " + " | ".join(f"{k} x{n}" for k, n in seq)
                for (pid, tid, comm), seq in sorted(seqs.items())]


def slow_probes(samples: list[tuple[float, float]], pressure: Pressure,
                steps: list[dict[str, float]], start: float, over_ms: float = 50.0,
                ) -> list[dict[str, Any]]:
    """Every probe over ``over_ms``: when it began (s into the builds), its build step
    (as :func:`by_step` names it) and the PSI stalls around it."""
    marks = sorted((at, name) for st in steps for name, at in st.items())
    times = [t for t, _ in marks]
    out = []
    for done, ms in samples:
        if ms <= over_ms:
            continue
        began = done - ms / 1000
        i = bisect.bisect_right(times, began) - 1
        step = marks[i][1] if i >= 0 and marks[i][1] != "end" else "no build"
        out.append({"s_into_builds": round(began - start, 2), "ms": round(ms, 1),
                    "step": step, **pressure.during(began, done)})
    return out


def generations(data_dir: Path) -> int:
    """Generation directories of the (one) shard: 2 while a build runs."""
    return len([p for p in (data_dir / "collections").glob("*/g*") if p.is_dir()])


def by_phase(samples: list[tuple[float, float]], states: list[tuple[float, str]],
             end: float) -> dict[str, dict[str, float]]:
    """Probe latencies grouped by what the build was doing when each probe began
    (polled every 0.25 s: the state seen last before it): n, p50, p99, max."""
    groups: dict[str, list[float]] = {}
    times = [t for t, _ in states]
    for done, ms in samples:
        began = done - ms / 1000
        if began > end or not states:
            continue
        i = max(0, min(len(states) - 1, bisect.bisect_right(times, began) - 1))
        groups.setdefault(states[i][1], []).append(ms)
    return _summaries(groups)


def by_step(samples: list[tuple[float, float]], steps: list[dict[str, float]],
            start: float, end: float) -> dict[str, dict[str, float]]:
    """Probe latencies grouped by the build step (the server's "index build steps" log
    lines: CLOCK_MONOTONIC, shared by the processes of one machine) running when each
    probe began; outside every build: "no build". Steps: copy, recopy (writers wait),
    build (the build process), open (the new generation's load), replay, new_flush,
    locked (the swap), retire (the old generation's end)."""
    marks = sorted((at, name) for st in steps for name, at in st.items())
    times = [t for t, _ in marks]
    groups: dict[str, list[float]] = {}
    for done, ms in samples:
        began = done - ms / 1000
        if began < start or began > end:
            continue
        i = bisect.bisect_right(times, began) - 1
        name = marks[i][1] if i >= 0 and marks[i][1] != "end" else "no build"
        groups.setdefault(name, []).append(ms)
    return _summaries(groups)


def _summaries(groups: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    out = {}
    for name, lat in groups.items():
        lat.sort()
        out[name] = {"n": len(lat), "p50_ms": statistics.median(lat),
                     "p99_ms": lat[max(0, int(0.99 * len(lat)) - 1)], "max_ms": lat[-1]}
    return out


def search_only(args: argparse.Namespace) -> None:
    """Search shapes through HTTP on an existing built data directory: ``--passes``
    passes per setting (the default server, and one with ``--compare-env`` if given),
    interleaved pass by pass, each a server started afresh on the same files."""
    data = Data(args.size)
    rng = np.random.default_rng(99)
    queries = data.centres[rng.integers(0, 1000, args.queries)] + rng.normal(
        size=(args.queries, DIM)).astype(np.float32) * 0.6
    exact = exact_top(data, queries)
    env = {"RAGLINE_MAX_DOCUMENTS_PER_REQUEST": "1000", "RAGLINE_AUTH": "off",
           "RAGLINE_BACKGROUND_INDEXING": "false", **dict(e.split("=", 1) for e in args.env)}
    settings = {"default": env}
    if args.compare_env or args.compare_src:
        settings["compare"] = {**env, **dict(e.split("=", 1) for e in args.compare_env)}
    src = {"default": ROOT, "compare": args.compare_src or ROOT}
    runs: dict[str, list[dict[str, dict[str, float]]]] = {k: [] for k in settings}
    for i in range(args.passes):
        # alternate which setting goes first, so a drift in the machine's load is shared
        order = list(settings.items()) if i % 2 == 0 else list(settings.items())[::-1]
        for name, senv in order:
            srv = Server(src[name], sys.executable, args.search_only, senv)
            try:
                search_shapes(srv, data, queries[:50], {k: v[:50] for k, v in exact.items()})
                runs[name].append(search_shapes(srv, data, queries, exact))
            finally:
                srv.stop()
    print(f"| setting | filter | p50 ms (median of {args.passes} passes) | p95 ms | recall@10 |")
    print("|---|---|---:|---:|---:|")
    for name, passes in runs.items():
        for shape in SHAPES:
            p50 = statistics.median(r[shape]["p50"] for r in passes)
            p95 = statistics.median(r[shape]["p95"] for r in passes)
            rec = statistics.median(r[shape]["recall"] for r in passes)
            print(f"| {name} | {shape} | {p50:.2f} | {p95:.2f} | {rec:.4f} |")
    print(json.dumps({"size": args.size, "settings": settings, "runs": runs,
                      "src": {k: str(v) for k, v in src.items()}}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--baseline-src", type=Path, help="checkout to compare write rates with")
    ap.add_argument("--baseline-python", default=None)
    ap.add_argument("--baseline-docs", type=int, default=20_000)
    ap.add_argument("--work-dir", type=Path, default=None)
    ap.add_argument("--build-timeout", type=float, default=3600)
    ap.add_argument("--json-out", type=Path)
    ap.add_argument("--env", action="append", default=[],
                    help="KEY=VALUE for the measured server (e.g. RAGLINE_INDEXING_MIN_POINTS)")
    ap.add_argument("--search-only", type=Path, metavar="DATA_DIR",
                    help="only the search shapes, on the built data directory of an earlier "
                    "run (background indexing off); with --compare-env, interleaved passes of "
                    "two server settings")
    ap.add_argument("--compare-env", action="append", default=[],
                    help="KEY=VALUE for the second server of --search-only")
    ap.add_argument("--compare-src", type=Path, default=None,
                    help="checkout for the second server of --search-only (e.g. a worktree "
                    "of main), to compare code instead of settings")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--trace-threads", action="store_true",
                    help="sample the state of every server, shard and build thread during "
                    "each build's copy, load and swap, and print it around probes over 100 ms")
    args = ap.parse_args()
    if args.search_only:
        search_only(args)
        return
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    data = Data(args.size)
    rng = np.random.default_rng(99)
    queries = data.centres[rng.integers(0, 1000, args.queries)] + rng.normal(
        size=(args.queries, DIM)).astype(np.float32) * 0.6
    result: dict[str, Any] = {"size": args.size, "cpus": os.cpu_count(),
                              "load_before": os.getloadavg()[0]}
    env = {"RAGLINE_MAX_DOCUMENTS_PER_REQUEST": "1000", "RAGLINE_AUTH": "off"}

    if args.baseline_src:  # the same writes, the same data, a server from another checkout
        py = args.baseline_python or str(args.baseline_src / ".venv/bin/python")
        srv = Server(args.baseline_src, py, work / "baseline", env)
        try:
            srv.request("POST", "/collections", dumps({"name": "scale"}))
            write(srv, data, 0, 2000)
            result["baseline_docs_per_s"] = write(srv, data, 2000, 2000 + args.baseline_docs)
        finally:
            srv.stop()
            shutil.rmtree(work / "baseline", ignore_errors=True)

    data_dir = work / "data"
    srv = Server(ROOT, sys.executable, data_dir,
                 {**env, "RAGLINE_INDEXING_INTERVAL_S": "1",
                  **dict(e.split("=", 1) for e in args.env)})
    try:
        srv.request("POST", "/collections", dumps({"name": "scale"}))
        t0 = time.perf_counter()
        result["docs_per_s"] = write(srv, data, 0, args.size)
        result["write_s"] = time.perf_counter() - t0
        print(f"wrote {args.size} docs at {result['docs_per_s']:.0f}/s", file=sys.stderr)
        exact = exact_top(data, queries)
        # what a growing collection is served with: right after the writes, while the
        # background builds catch up (no probe yet: it would time these searches too)
        result["before_build"] = search_shapes(
            srv, data, queries[:50], {k: v[:50] for k, v in exact.items()})
        probe = Probe(srv, queries[0])
        pressure = Pressure()
        threads = Threads(srv.proc.pid) if args.trace_threads else None
        build_start = time.monotonic()
        build_rss, settled_since = 0.0, None
        states: list[tuple[float, str]] = []  # (when, what the background build was doing)
        deadline = time.monotonic() + args.build_timeout
        while time.monotonic() < deadline:  # settled: one generation, no build, for 10 s
            pids = _build_pids()
            gens = generations(data_dir)
            states.append((time.monotonic(), "build process" if pids
                           else "copy, load or swap" if gens > 1 else "between builds"))
            if threads is not None:
                threads.active = states[-1][1] == "copy, load or swap"
            for pid in pids:
                build_rss = max(build_rss, _vm_hwm(pid))
            if gens == 1 and not pids:
                settled_since = settled_since or time.monotonic()
                if time.monotonic() - settled_since >= 10:
                    break
            else:
                settled_since = None
            time.sleep(0.25)
        build_end = settled_since or time.monotonic()
        samples = probe.stop()
        pressure.stop()
        if threads is not None:
            threads.stop()
            result["slow_threads"] = [
                {"began": round(done - ms / 1000 - build_start, 3), "ms": round(ms, 1),
                 "threads": threads.during(done - ms / 1000, done)}
                for done, ms in samples if ms > 100 and threads.during(done - ms / 1000, done)]
        during = [ms for t, ms in samples if t <= build_end]
        log_lines = srv.log.read_text().splitlines()
        result["builds"] = [json.loads(x.split("index build of ", 1)[1].split(": ", 1)[1]
                                       .replace("'", '"'))
                            for x in log_lines if "index build of" in x]
        steps = [json.loads(x.split("index build steps of ", 1)[1].split(": ", 1)[1]
                            .replace("'", '"'))
                 for x in log_lines if "index build steps of" in x]
        result["build_s"] = build_end - build_start
        result["probe_during_build"] = {
            "n": len(during), "max_ms": max(during, default=0.0),
            "p50_ms": statistics.median(during) if during else 0.0,
            "p99_ms": sorted(during)[int(0.99 * len(during)) - 1] if during else 0.0,
            "by_phase": by_phase(samples, states, build_end),
            "by_step": by_step(samples, steps, build_start, build_end),
            "slow": slow_probes([x for x in samples if x[0] <= build_end], pressure, steps,
                                build_start)}
        result["build_rss_mb"] = build_rss
        result["after_build"] = search_shapes(srv, data, queries, exact)
        probe = Probe(srv, queries[0])
        time.sleep(5)
        idle = [ms for _, ms in probe.stop()]
        result["probe_idle"] = {"n": len(idle), "max_ms": max(idle), "p50_ms":
                                statistics.median(idle)}
        # a second pass on the same running server: the first starts the moment the
        # builds settle (the build process has just exited, its pages are being freed)
        result["after_build_2"] = search_shapes(srv, data, queries, exact)
        result["server_rss_peak_mb"] = srv.rss_peak_mb()
        result["disk_mb"] = sum(f.stat().st_blocks * 512 for f in data_dir.rglob("*")
                                if f.is_file()) / 2**20
    finally:
        srv.stop()
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    result["load_after"] = os.getloadavg()[0]
    report(result)
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=1))


def report(r: dict[str, Any]) -> None:
    print(f"\n### {r['size']:,} documents ({r['cpus']} CPUs, load {r['load_before']:.1f} → "
          f"{r['load_after']:.1f})\n")
    base = r.get("baseline_docs_per_s")
    rate = f"{r['docs_per_s']:,.0f} docs/s"
    if base:
        rate += f" (baseline {base:,.0f}, x{r['docs_per_s'] / base:.2f})"
    print(f"* bulk writes: {rate}; {r['write_s']:.0f} s")
    for b in r.get("builds", []):
        print(f"  * build: copy {b['copy_s']:.1f} s, subprocess {b['build_s']:.1f} s, load "
              f"{b['load_s'] * 1000:.0f} ms (GIL held), {b['replayed']} journal entries, "
              f"{b['total_s']:.1f} s in all")
    print(f"* background builds settled {r['build_s']:.0f} s after the writes; build "
          "process peak RSS "
          f"{r['build_rss_mb']:.0f} MB; server peak RSS {r['server_rss_peak_mb']:.0f} MB; "
          f"disk {r['disk_mb']:.0f} MB")
    pb, pi = r["probe_during_build"], r["probe_idle"]
    print(f"* probe search every 20 ms: during the build max {pb['max_ms']:.1f} ms, p99 "
          f"{pb['p99_ms']:.1f}, p50 {pb['p50_ms']:.1f} (n={pb['n']}); idle max "
          f"{pi['max_ms']:.1f}, p50 {pi['p50_ms']:.1f}")
    for phase, st in pb.get("by_phase", {}).items():
        print(f"  * while {phase}: n={st['n']}, p50 {st['p50_ms']:.1f}, p99 "
              f"{st['p99_ms']:.1f}, max {st['max_ms']:.1f} ms")
    for step, st in pb.get("by_step", {}).items():
        print(f"  * in build step '{step}': n={st['n']}, p50 {st['p50_ms']:.1f}, p99 "
              f"{st['p99_ms']:.1f}, max {st['max_ms']:.1f} ms")
    for slow in pb.get("slow", []):
        print(f"  * probe over 50 ms: {slow}")
    for slow in r.get("slow_threads", []):
        print(f"  * threads around the probe at {slow['began']} s ({slow['ms']} ms):")
        for line in slow["threads"]:
            print(f"      {line}")
    print("\n| filter | before build p50 / p95 ms | recall@10 | after build p50 / p95 ms "
          "| recall@10 | second pass p50 / p95 ms | recall@10 |\n"
          "|---|---:|---:|---:|---:|---:|---:|")
    for name in SHAPES:
        b, a = r["before_build"][name], r["after_build"][name]
        a2 = r.get("after_build_2", {}).get(name)
        second = f"{a2['p50']:.1f} / {a2['p95']:.1f} | {a2['recall']:.3f}" if a2 else "- | -"
        print(f"| {name} | {b['p50']:.1f} / {b['p95']:.1f} | {b['recall']:.3f} | "
              f"{a['p50']:.1f} / {a['p95']:.1f} | {a['recall']:.3f} | {second} |")
    print("\n" + json.dumps(r))


if __name__ == "__main__":
    main()
