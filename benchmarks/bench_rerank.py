#!/usr/bin/env python
"""Cross-encoder reranking latency: in-process ``rerank()`` vs ``POST /rerank`` over HTTP.

No pretrained cross-encoder is installable offline, so the model is randomly
initialised with the exact architecture of cross-encoder/ms-marco-MiniLM-L-6-v2
(BERT, 6 layers, hidden 384, 12 heads, intermediate 1536, MiniLM vocab,
num_labels=1): the cost of a forward pass does not depend on the weights.
Documents are SciFact abstracts cut to 100 words; queries are SciFact claims.

Both paths are measured in the same run, interleaved per request, because this
box is shared and noisy: the HTTP overhead is the difference, not either
absolute number. The server is a separate process (this script with
``--serve``) so client and server do not share a GIL.

    .venv/bin/python benchmarks/bench_rerank.py [--requests 40] [--sizes 10 50] [--write]

Prints a markdown section; ``--write`` also replaces ``## Reranking`` in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("RAGLINE_BEIR_DIR", "/work/shared/data/beir")) / "scifact"
sys.path.insert(0, str(ROOT / "src"))

COMMAND = ".venv/bin/python benchmarks/bench_rerank.py --requests 40 --sizes 10 50 --write"


class NoopReranker:
    """Scores nothing (all 0.0): what is left of /rerank is HTTP, JSON and validation."""

    def rerank(self, query: str, documents: list[dict[str, Any]], top_k: Any = None) -> Any:
        return [
            {"id": d["id"], "score": 0.0, "original_rank": i + 1} for i, d in enumerate(documents)
        ]

    def health_info(self) -> dict[str, str]:
        return {"model": "noop", "status": "loaded"}


def serve(port: int, model_dir: str) -> None:
    """Server mode: the /rerank router with the real error handlers and this model ("noop")."""
    from types import SimpleNamespace

    import uvicorn
    from fastapi import FastAPI

    from ragline.api import errors
    from ragline.api.routes import rerank
    from ragline.providers.rerankers.cross_encoder import CrossEncoderReranker, ModelSource

    app = FastAPI()
    errors.install(app)
    app.include_router(rerank.router)
    model: Any = (
        NoopReranker()
        if model_dir == "noop"
        else CrossEncoderReranker.from_source(ModelSource(model_dir, "--cross-encoder-path"))
    )
    app.state.ragline = SimpleNamespace(cross_encoder=model)

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "healthy", "cross_encoder": app.state.ragline.cross_encoder.health_info()}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def load_texts(n_docs: int, n_queries: int, words: int = 100) -> tuple[list[str], list[str]]:
    docs = []
    with (DATA / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            text = json.loads(line)["text"].split()
            if len(text) >= words:
                docs.append(" ".join(text[:words]))
            if len(docs) == n_docs:
                break
    with (DATA / "queries.jsonl").open(encoding="utf-8") as fh:
        queries = [json.loads(line)["text"] for _, line in zip(range(n_queries), fh, strict=False)]
    return docs, queries


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 50])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--serve", nargs=2, metavar=("PORT", "MODEL_DIR"))
    args = ap.parse_args()
    if args.serve:
        serve(int(args.serve[0]), args.serve[1])
        return

    import torch
    from transformers import AutoTokenizer

    from ragline.providers.rerankers.cross_encoder import CrossEncoderReranker, ModelSource
    from ragline.testing.cross_encoder import MINILM_L6, build_random_cross_encoder

    workdir = Path(tempfile.mkdtemp(prefix="ragline-bench-ce-"))
    model_dir = build_random_cross_encoder(workdir / "minilm-l6-ce", shape=MINILM_L6)
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    reranker = CrossEncoderReranker.from_source(ModelSource(str(model_dir), "--cross-encoder-path"))
    docs, queries = load_texts(max(args.sizes), args.requests + args.warmup)
    pair_tokens = statistics.mean(len(tok(queries[0], d)["input_ids"]) for d in docs)

    servers = {
        name: start_server(arg) for name, arg in (("http", str(model_dir)), ("noop", "noop"))
    }
    load_before = os.getloadavg()
    results: dict[int, dict[str, list[float]]] = {}
    try:
        clients = {name: wait_ready(url) for name, (_, url) in servers.items()}
        for n in args.sizes:
            batch = [{"id": f"d{i}", "text": t} for i, t in enumerate(docs[:n])]
            times: dict[str, list[float]] = {"inproc": [], "cpu": [], "http": [], "noop": []}
            for k, query in enumerate(queries):
                body = {"query": query, "documents": batch}
                c0, t0 = time.process_time(), time.perf_counter()
                local = reranker.rerank(query, batch)
                t1, c1 = time.perf_counter(), time.process_time()
                resp = clients["http"].post("/rerank", json=body)
                t2 = time.perf_counter()
                noop = clients["noop"].post("/rerank", json=body)
                t3 = time.perf_counter()
                resp.raise_for_status()
                noop.raise_for_status()
                assert len(resp.json()["reranked"]) == n == len(local)
                if k >= args.warmup:
                    times["inproc"].append((t1 - t0) * 1000)
                    times["cpu"].append((c1 - c0) * 1000)
                    times["http"].append((t2 - t1) * 1000)
                    times["noop"].append((t3 - t2) * 1000)
            results[n] = times
        for c in clients.values():
            c.close()
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(timeout=20)
        shutil.rmtree(workdir, ignore_errors=True)
    load_after = os.getloadavg()

    rows = []
    for n, t in results.items():
        inproc_med, http_med = statistics.median(t["inproc"]), statistics.median(t["http"])
        rows.append(
            f"| {n} | {len(t['http'])} | {inproc_med:.1f} | {pct(t['inproc'], 0.95):.1f} "
            f"| {statistics.median(t['cpu']):.0f} "
            f"| {http_med:.1f} | {pct(t['http'], 0.95):.1f} "
            f"| {statistics.median(t['noop']):.1f} | {pct(t['noop'], 0.95):.1f} |"
        )
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    section = "\n".join(
        [
            "## Reranking",
            "",
            f"Cross-encoder `/rerank` latency, measured {when} on {os.cpu_count()} cores "
            f"({platform.processor() or platform.machine()}), torch {torch.__version__}, "
            f"{torch.get_num_threads()} torch threads. Load average {load_before[0]:.1f} before "
            f"and {load_after[0]:.1f} after the run: the box is shared, so absolute model times "
            "are inflated and noisy; the three paths are measured interleaved, request by request.",
            "",
            "Model: random weights with the architecture of cross-encoder/ms-marco-MiniLM-L-6-v2 "
            "(BERT, 6 layers, hidden 384, 12 heads, intermediate 1536, num_labels=1); no "
            "pretrained reranker is installable offline and the weights do not change the cost. "
            f"Documents: SciFact abstracts cut to 100 words (≈{pair_tokens:.0f} word pieces per "
            "query/document pair); queries: SciFact claims, a different one per request. "
            "In-process is `CrossEncoderReranker.rerank()`; HTTP is `POST /rerank` to uvicorn in a "
            "separate process, sequential requests, after "
            f"{args.warmup} warm-up requests. The no-op column is the same request to a second "
            "server whose reranker returns zeros without a model: the cost of HTTP, JSON and "
            "validation alone, which is the overhead `/rerank` adds to `rerank()` and, unlike the "
            "difference of the first two columns, is not swamped by the noise of model time. "
            "The CPU column is the process CPU time of one in-process call (all torch threads): "
            "less distorted by other jobs than wall time, and roughly the wall time to expect on "
            "one idle core.",
            "",
            "| docs | requests | in-process median (ms) | in-process p95 (ms) "
            "| in-process CPU median (ms) "
            "| HTTP median (ms) | HTTP p95 (ms) | HTTP, no-op scorer median (ms) "
            "| HTTP, no-op scorer p95 (ms) |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
            "Command:",
            "",
            "```bash",
            COMMAND,
            "```",
            "",
        ]
    )
    print(section)
    if args.write:
        write_section(ROOT / "BENCHMARKS.md", section)


def start_server(model: str) -> tuple[subprocess.Popen[bytes], str]:
    from ragline.testing.server import free_port

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), model], stdout=subprocess.DEVNULL
    )
    return proc, f"http://127.0.0.1:{port}"


def wait_ready(url: str) -> Any:
    import httpx

    client = httpx.Client(base_url=url, timeout=120)
    for _ in range(1200):
        try:
            if client.get("/health").status_code == 200:
                return client
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError(f"server at {url} did not start")


def write_section(path: Path, section: str) -> None:
    """Replace only the ``## Reranking`` section; other sections belong to other benchmarks."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n\n"
    lines = text.splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if ln.strip() == "## Reranking"), None)
    if start is None:
        new = text.rstrip("\n") + "\n\n" + section
    else:
        end = next(
            (i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines)
        )
        new = (
            "".join(lines[:start])
            + section
            + ("\n" + "".join(lines[end:]) if end < len(lines) else "")
        )
    path.write_text(new, encoding="utf-8")


if __name__ == "__main__":
    main()
