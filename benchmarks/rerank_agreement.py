#!/usr/bin/env python
"""Where the ONNX reranker's ranking differs from torch: export or int8?

Builds a random cross-encoder with the shape of ms-marco-MiniLM-L-6-v2, exports it
twice (int8, and fused fp32 with ``--fp32``), and scores 50 SciFact abstracts (cut to
100 words) for 10 SciFact claims with torch, ONNX fp32 and ONNX int8. Prints, per
query, the spread of torch's scores (max - min), each ONNX graph's Spearman rank
correlation with torch and its largest absolute score difference (min / median / max
over queries).

    .venv/bin/python benchmarks/rerank_agreement.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
DATA = Path(os.environ.get("RAGLINE_BEIR_DIR", "/work/shared/data/beir")) / "scifact"


def spearman(a: list[float], b: list[float]) -> float:
    import numpy as np

    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def main() -> None:
    from ragline.providers.rerankers.cross_encoder import CrossEncoderReranker, ModelSource
    from ragline.providers.rerankers.onnx_cross_encoder import (
        OnnxCrossEncoderConfig,
        OnnxCrossEncoderReranker,
    )
    from ragline.providers.rerankers.onnx_export import build_reranker
    from ragline.testing.cross_encoder import MINILM_L6, build_random_cross_encoder

    work = Path(tempfile.mkdtemp(prefix="ragline-agree-"))
    src = build_random_cross_encoder(work / "ce", shape=MINILM_L6)
    torch_rr = CrossEncoderReranker.from_source(ModelSource(str(src), "--cross-encoder-path"))
    graphs = {
        "int8": build_reranker(str(src), work / "m").path,
        "fp32": build_reranker(str(src), work / "m", out=work / "fp32", quantize=False).path,
    }
    onnx = {k: OnnxCrossEncoderReranker(OnnxCrossEncoderConfig(model=str(p)))
            for k, p in graphs.items()}
    docs: list[dict[str, object]] = []
    with (DATA / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            words = json.loads(line)["text"].split()
            if len(words) >= 100:
                docs.append({"id": len(docs), "text": " ".join(words[:100])})
            if len(docs) == 50:
                break
    with (DATA / "queries.jsonl").open(encoding="utf-8") as fh:
        queries = [json.loads(line)["text"] for _, line in zip(range(10), fh, strict=False)]
    stats: dict[str, list[float]] = {"torch score spread": []}
    for query in queries:
        ref = {r["id"]: r["score"] for r in torch_rr.rerank(query, docs)}
        ids = list(ref)
        stats["torch score spread"].append(max(ref.values()) - min(ref.values()))
        for name, rr in onnx.items():
            got = {r["id"]: r["score"] for r in rr.rerank(query, docs)}
            stats.setdefault(f"{name} Spearman", []).append(
                spearman([ref[i] for i in ids], [got[i] for i in ids]))
            stats.setdefault(f"{name} max |diff|", []).append(
                max(abs(ref[i] - got[i]) for i in ids))
    print("| measure | min | median | max |\n|---|---:|---:|---:|")
    for name, values in stats.items():
        print(f"| {name} | {min(values):.5f} | {statistics.median(values):.5f} "
              f"| {max(values):.5f} |")


if __name__ == "__main__":
    main()
