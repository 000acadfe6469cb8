"""Export a cross-encoder to a fused int8 ONNX graph, once, at build time.

``ragline models build-reranker NAME_OR_PATH`` runs this in an environment
that has torch and transformers (the install's build tools); the server then
scores with :mod:`ragline.providers.rerankers.onnx_cross_encoder`, which needs
only onnxruntime and tokenizers. The recipe is the embedder's
(``scripts/build_onnx_model.py``, measured in shared/research/offline-models.md
§1.4): legacy ``torch.onnx.export`` of the model loaded with *eager* attention,
onnxruntime's BERT fusions, then ``quantize_dynamic`` int8 per-channel with
7-bit weights. The build checks itself: the int8 graph must rank a set of
probe pairs like the torch model, else it keeps the fused fp32 graph.

Nothing here is imported at run time; torch is imported inside functions only.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragline.errors import ModelExportError as ExportError

log = logging.getLogger(__name__)

RECIPE = 1
"""Bump when the output changes: an older build is then redone."""
MANIFEST = "ragline_reranker.json"
SUFFIX = "-onnx-int8"

PROBE_QUERY = "how do robots measure distance to obstacles"
PROBE_DOCS = [
    "Lidar sends laser pulses and times their return to measure distance.",
    "A stereo camera estimates depth by comparing two images.",
    "Bread rises because yeast produces carbon dioxide.",
    "The capital of France is Paris.",
    "Ultrasonic sensors measure distance with sound echoes, like bats.",
    "Robots use wheel encoders to estimate how far they have driven.",
    "An IMU reports acceleration and angular velocity.",
    "Tomatoes grow best in warm, sunny weather.",
]


@dataclass(frozen=True, slots=True)
class BuildResult:
    path: Path
    quantized: bool
    size_mb: float
    seconds: float
    agreement: dict[str, float]
    skipped: bool = False


def slug(name_or_path: str) -> str:
    """Directory name for a model: ``cross-encoder/ms-marco-MiniLM-L-6-v2`` →
    ``ms-marco-MiniLM-L-6-v2``; a local path gives its last component."""
    last = Path(name_or_path.rstrip("/")).name or "reranker"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", last).strip("-") or "reranker"


def built_dir(models_root: Path, name_or_path: str) -> Path:
    return models_root / f"{slug(name_or_path)}{SUFFIX}"


def built_recipe(out: Path) -> int | None:
    try:
        return int(json.loads((out / MANIFEST).read_text()).get("recipe", 0))
    except (OSError, ValueError, AttributeError):
        return None


def _load_torch_model(source: str) -> tuple[Any, Any]:
    from ragline.settings import hub_offline

    hub_offline()
    try:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(source)
        model = AutoModelForSequenceClassification.from_pretrained(
            source, attn_implementation="eager").eval()
        import onnx  # noqa: F401  (torch.onnx.export fails late, mid-build, without it)
    except ImportError as exc:
        raise ExportError("building a reranker needs torch, transformers and onnx "
                          "(pip install 'ragline[rerank]', part of `make install-dev`)") from exc
    except Exception as exc:
        raise ExportError(f"cannot load cross-encoder '{source}': "
                          f"{type(exc).__name__}: {exc}") from exc
    return tok, model


def _export(tok: Any, model: Any, dst: Path, input_names: list[str]) -> None:
    import torch

    class Wrapper(torch.nn.Module):
        """transformers 5 rejects positional inputs; name them and return logits."""

        def __init__(self, m: torch.nn.Module) -> None:
            super().__init__()
            self.m = m

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            logits: torch.Tensor = self.m(**dict(zip(input_names, inputs, strict=True))).logits
            return logits

    enc = tok([PROBE_QUERY, "short"], [PROBE_DOCS[0], "a longer second document text"],
              padding=True, return_tensors="pt")
    with torch.no_grad():
        torch.onnx.export(
            Wrapper(model).eval(), tuple(enc[n] for n in input_names), str(dst),
            dynamo=False, opset_version=17, input_names=input_names, output_names=["logits"],
            dynamic_axes={**{n: {0: "batch", 1: "seq"} for n in input_names},
                          "logits": {0: "batch"}},
        )


def _fuse_and_quantize(fp32: Path, fused: Path, int8: Path, config: Any) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer

    try:
        m = optimizer.optimize_model(
            str(fp32), model_type="bert", num_heads=int(config.num_attention_heads),
            hidden_size=int(config.hidden_size), opt_level=1)
        m.save_model_to_file(str(fused))
    except Exception as exc:  # an architecture the BERT fusions do not know: unfused
        log.warning("BERT fusions failed (%s); quantizing the plain graph", exc)
        shutil.copy2(fp32, fused)
    quantize_dynamic(str(fused), str(int8), weight_type=QuantType.QInt8, per_channel=True,
                     reduce_range=True, extra_options={"DefaultTensorType": 1})


def _torch_scores(tok: Any, model: Any, pairs: list[tuple[str, str]], max_length: int) -> Any:
    import torch

    enc = tok([q for q, _ in pairs], [d for _, d in pairs], padding=True, truncation=True,
              max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        return model(**enc).logits.numpy()


def _agreement(torch_logits: Any, onnx_logits: Any) -> dict[str, float]:
    """Spearman correlation, top-1 match and max |difference| of the last logit column."""
    import numpy as np

    a = np.asarray(torch_logits, dtype=np.float64)[:, -1]
    b = np.asarray(onnx_logits, dtype=np.float64)[:, -1]
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    spearman = float(np.corrcoef(ra, rb)[0, 1]) if len(a) > 1 else 1.0
    return {"spearman": round(spearman, 4), "top1": float(np.argmax(a) == np.argmax(b)),
            "max_abs_diff": round(float(np.max(np.abs(a - b))), 5)}


def build_reranker(name_or_path: str, models_root: Path, *, out: Path | None = None,
                   force: bool = False, quantize: bool = True,
                   min_spearman: float = 0.9) -> BuildResult:
    """Export ``name_or_path`` (a local directory or a cached hub name) into ``models_root``.

    Writes ``model.onnx`` (int8, or fused fp32 when the int8 graph's ranking of
    the probe pairs correlates below ``min_spearman`` with torch's), the
    tokenizer files and a manifest. Re-running is a no-op unless ``force``.
    """
    import numpy as np
    import onnxruntime as ort

    target = out or built_dir(models_root, name_or_path)
    if not force and built_recipe(target) == RECIPE:
        return BuildResult(target, True, (target / "model.onnx").stat().st_size / 1e6, 0.0,
                           {}, skipped=True)
    t0 = time.perf_counter()
    tok, model = _load_torch_model(name_or_path)
    if not getattr(tok, "is_fast", False):
        raise ExportError(f"'{name_or_path}' has no fast tokenizer (tokenizer.json); the "
                          "runtime tokenizes with the tokenizers library")
    input_names = [n for n in ("input_ids", "attention_mask", "token_type_ids")
                   if n in tok.model_input_names]
    max_length = int(min(getattr(tok, "model_max_length", 512) or 512,
                         getattr(model.config, "max_position_embeddings", 512) or 512, 512))
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ragline-rerank-", dir=target.parent) as tmp_s:
        tmp = Path(tmp_s)
        stage = tmp / "stage"
        stage.mkdir()
        _export(tok, model, tmp / "fp32.onnx", input_names)
        _fuse_and_quantize(tmp / "fp32.onnx", tmp / "fused.onnx", tmp / "int8.onnx",
                           model.config)
        pairs = [(PROBE_QUERY, d) for d in PROBE_DOCS]
        reference = _torch_scores(tok, model, pairs, max_length)
        enc = tok([q for q, _ in pairs], [d for _, d in pairs], padding=True,
                  truncation=True, max_length=max_length, return_tensors="np")
        feeds = {n: np.asarray(enc[n], dtype=np.int64) for n in input_names}

        def run(path: Path) -> Any:
            session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            return session.run(None, feeds)[0]

        agreement = _agreement(reference, run(tmp / "int8.onnx"))
        use_int8 = quantize and agreement["spearman"] >= min_spearman
        if quantize and not use_int8:
            log.warning("int8 graph ranks the probe pairs differently from torch (spearman "
                        "%.3f); keeping fp32", agreement["spearman"])
        chosen = tmp / ("int8.onnx" if use_int8 else "fused.onnx")
        if not use_int8:
            agreement = _agreement(reference, run(chosen))
        shutil.copy2(chosen, stage / "model.onnx")
        tok.save_pretrained(str(stage))
        model.config.to_json_file(str(stage / "config.json"))
        num_labels = int(getattr(model.config, "num_labels", 1))
        manifest = {
            "name": slug(name_or_path),
            "source": name_or_path,
            "recipe": RECIPE,
            "kind": "cross-encoder",
            "quantization": "int8 dynamic per-channel, reduce_range" if use_int8 else "fp32",
            "inputs": input_names,
            "num_labels": num_labels,
            # sentence-transformers' CrossEncoder default: sigmoid for one label, identity else
            "activation": "sigmoid" if num_labels == 1 else "identity",
            "max_length": max_length,
            "agreement_vs_torch": agreement,
        }
        (stage / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        if target.exists():
            shutil.rmtree(target)
        stage.rename(target)  # atomic publish: never a half-built "built" directory
    return BuildResult(target, use_int8, (target / "model.onnx").stat().st_size / 1e6,
                       time.perf_counter() - t0, agreement)
