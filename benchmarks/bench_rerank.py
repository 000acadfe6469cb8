#!/usr/bin/env python
"""Cross-encoder reranking latency: torch vs ONNX int8 in process, and ``POST /rerank``.

No pretrained cross-encoder is installable offline, so the model is randomly
initialised with the exact architecture of cross-encoder/ms-marco-MiniLM-L-6-v2
(BERT, 6 layers, hidden 384, 12 heads, intermediate 1536, MiniLM vocab,
num_labels=1): the cost of a forward pass does not depend on the weights.
Documents are SciFact abstracts cut to 100 words; queries are SciFact claims.

All paths are measured in the same run, interleaved per request, because this
box is shared and noisy: the HTTP overhead is the difference, not either
absolute number. The ONNX path is the same model exported by
``ragline models build-reranker`` (int8, the embedder's recipe) and scored by
``OnnxCrossEncoderReranker`` (onnxruntime + tokenizers, no torch); its ranking
agreement with torch (Spearman per request) is reported too. The server is a
separate process (this script with ``--serve``) so client and server do not share a GIL.

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

COMMAND = ".venv/bin/python benchmarks/bench_rerank.py --requests 20 --sizes 10 50 --write"


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

    import numpy as np
    import torch
    from transformers import AutoTokenizer

    from ragline.providers.rerankers.cross_encoder import CrossEncoderReranker, ModelSource
    from ragline.providers.rerankers.onnx_cross_encoder import (
        OnnxCrossEncoderConfig,
        OnnxCrossEncoderReranker,
    )
    from ragline.providers.rerankers.onnx_export import build_reranker
    from ragline.testing.cross_encoder import MINILM_L6, build_random_cross_encoder

    workdir = Path(tempfile.mkdtemp(prefix="ragline-bench-ce-"))
    model_dir = build_random_cross_encoder(workdir / "minilm-l6-ce", shape=MINILM_L6)
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    reranker = CrossEncoderReranker.from_source(ModelSource(str(model_dir), "--cross-encoder-path"))
    built = build_reranker(str(model_dir), workdir / "models")
    onnx = OnnxCrossEncoderReranker(OnnxCrossEncoderConfig(model=str(built.path)))
    onnx_mb = built.size_mb
    torch_mb = sum(f.stat().st_size for f in model_dir.glob("*.safetensors")) / 1e6
    spearman: dict[int, list[float]] = {}
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
            times: dict[str, list[float]] = {"inproc": [], "cpu": [], "http": [], "noop": [],
                                             "onnx": [], "onnx_cpu": []}
            spearman[n] = []
            for k, query in enumerate(queries):
                body = {"query": query, "documents": batch}
                c0, t0 = time.process_time(), time.perf_counter()
                local = reranker.rerank(query, batch)
                t1, c1 = time.perf_counter(), time.process_time()
                torch_ms = (t1 - t0) * 1000
                oc0, ot0 = time.process_time(), time.perf_counter()
                fast = onnx.rerank(query, batch)
                ot1, oc1 = time.perf_counter(), time.process_time()
                ref = {r["id"]: r["score"] for r in local}
                got = {r["id"]: r["score"] for r in fast}
                ids = list(ref)
                ranks = [np.argsort(np.argsort([d[i] for i in ids])) for d in (ref, got)]
                t1 = time.perf_counter()  # HTTP timing starts after the ONNX call
                resp = clients["http"].post("/rerank", json=body)
                t2 = time.perf_counter()
                noop = clients["noop"].post("/rerank", json=body)
                t3 = time.perf_counter()
                resp.raise_for_status()
                noop.raise_for_status()
                assert len(resp.json()["reranked"]) == n == len(local)
                if k >= args.warmup:
                    times["onnx"].append((ot1 - ot0) * 1000)
                    times["onnx_cpu"].append((oc1 - oc0) * 1000)
                    spearman[n].append(float(np.corrcoef(ranks[0], ranks[1])[0, 1]))
                    times["inproc"].append(torch_ms)
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
    onnx_rows = []
    for n, t in results.items():
        torch_med, onnx_med = statistics.median(t["inproc"]), statistics.median(t["onnx"])
        torch_cpu, onnx_cpu = statistics.median(t["cpu"]), statistics.median(t["onnx_cpu"])
        onnx_rows.append(
            f"| {n} | {len(t['onnx'])} | {torch_med:.1f} | {onnx_med:.1f} "
            f"| {pct(t['onnx'], 0.95):.1f} | **{torch_med / onnx_med:.2f}x** "
            f"| {torch_cpu:.0f} | {onnx_cpu:.0f} | {torch_cpu / onnx_cpu:.2f}x "
            f"| {min(spearman[n]):.3f} / {statistics.median(spearman[n]):.3f} |"
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
            "are inflated and noisy; the paths are measured interleaved, request by request.",
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
            "### torch vs ONNX int8 (issue 12)",
            "",
            "The same model exported once by `ragline models build-reranker` (legacy "
            "`torch.onnx.export`, onnxruntime BERT fusions, `quantize_dynamic` int8 per-channel "
            f"with 7-bit weights: {onnx_mb:.1f} MB instead of {torch_mb:.1f} MB of safetensors) "
            "and scored by `OnnxCrossEncoderReranker` (onnxruntime + tokenizers, no torch, "
            "onnxruntime's default threads), called right after the torch call on the same "
            "request. Ratio = torch median / ONNX median (higher: ONNX faster). Spearman = rank "
            "correlation of the two score lists of one request (min / median over requests); "
            "with random weights the scores are close together, so this is a harsher test of "
            "int8 than a trained model's spread-out scores.",
            "",
            "| docs | requests | torch median (ms) | ONNX int8 median (ms) | ONNX p95 (ms) "
            "| speed-up | torch CPU median (ms) | ONNX CPU median (ms) | CPU ratio "
            "| Spearman min / median |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            *onnx_rows,
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
