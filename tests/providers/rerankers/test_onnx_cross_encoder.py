"""OnnxCrossEncoderReranker: the build, the rerank() contract, agreement with torch, no torch.

The cross-encoder is the tiny random-weight BERT of ``ragline.testing.cross_encoder``
(no pretrained reranker is installable offline), exported once per module with the
real build (int8, the embedder's recipe).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ragline.errors import InvalidInput, ModelLoadError
from ragline.providers.registry import registry
from ragline.providers.rerankers.base import Reranker
from ragline.providers.rerankers.cross_encoder import (
    CrossEncoderReranker,
    ModelSource,
    load_from_settings,
)
from ragline.providers.rerankers.onnx_cross_encoder import (
    OnnxCrossEncoderConfig,
    OnnxCrossEncoderReranker,
    find_built_model,
)
from ragline.providers.rerankers.onnx_export import MANIFEST, build_reranker
from ragline.settings import Settings
from ragline.testing.cross_encoder import tiny_cross_encoder_dir

QUERIES = [
    "how do robots measure distance",
    "what is a ROS 2 topic",
    "bake bread at home",
]
DOCS = [
    {"id": "lidar", "text": "Lidar times laser pulses to measure the distance to obstacles."},
    {"id": "topic", "text": "A ROS 2 topic carries messages from publishers to subscribers."},
    {"id": "bread", "text": "Knead the dough, let the yeast work, then bake the bread."},
    {"id": "imu", "text": "An inertial measurement unit reports acceleration."},
    {"id": "urdf", "text": "URDF describes links and joints of a robot in XML."},
    {"id": "paris", "text": "Paris is the capital of France."},
    {"id": "long", "text": "sensor fusion " * 300},
    {"id": "empty", "text": ""},
]


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("models")
    build_reranker(str(tiny_cross_encoder_dir()), root)
    return root


@pytest.fixture(scope="module")
def onnx(models_dir: Path) -> OnnxCrossEncoderReranker:
    return OnnxCrossEncoderReranker(OnnxCrossEncoderConfig(
        model=str(tiny_cross_encoder_dir()), models_dir=models_dir))


@pytest.fixture(scope="module")
def torch_reranker() -> CrossEncoderReranker:
    return CrossEncoderReranker.from_source(
        ModelSource(str(tiny_cross_encoder_dir()), "--cross-encoder-path"))


def test_build_writes_an_int8_model_and_a_manifest(models_dir: Path) -> None:
    built = find_built_model(str(tiny_cross_encoder_dir()), models_dir)
    assert built is not None and built.name == "tiny-ce-onnx-int8"
    manifest = (built / MANIFEST).read_text()
    assert '"quantization": "int8 dynamic per-channel, reduce_range"' in manifest
    assert {p.name for p in built.iterdir()} >= {"model.onnx", "tokenizer.json", MANIFEST}
    again = build_reranker(str(tiny_cross_encoder_dir()), models_dir)
    assert again.skipped and again.path == built  # built once


def test_rerank_contract(onnx: OnnxCrossEncoderReranker) -> None:
    assert isinstance(onnx, Reranker)
    full = onnx.rerank(QUERIES[0], DOCS)
    assert sorted(r["original_rank"] for r in full) == list(range(1, len(DOCS) + 1))
    assert [r["score"] for r in full] == sorted((r["score"] for r in full), reverse=True)
    assert all(0.0 < r["score"] < 1.0 for r in full)  # sigmoid, like CrossEncoder
    assert onnx.rerank(QUERIES[0], DOCS, top_k=3) == full[:3]  # all scored, then cut
    assert onnx.rerank("q", []) == []
    twins = onnx.rerank("q", [{"id": "x", "text": "same"}, {"id": "y", "text": "same"}])
    assert [r["id"] for r in twins] == ["x", "y"]  # ties keep input order
    with pytest.raises(InvalidInput, match="top_k"):
        onnx.rerank("q", DOCS, top_k=0)
    small = OnnxCrossEncoderReranker(OnnxCrossEncoderConfig(
        model=str(onnx.path), max_documents=2))
    with pytest.raises(InvalidInput, match="Too many documents"):
        small.rerank("q", DOCS)
    assert onnx.health_info() == {"model": str(tiny_cross_encoder_dir()), "status": "loaded"}


def test_batching_barely_changes_scores(onnx: OnnxCrossEncoderReranker) -> None:
    one_by_one = OnnxCrossEncoderReranker(OnnxCrossEncoderConfig(
        model=str(onnx.path), batch_size=1))
    a = {r["id"]: r["score"] for r in onnx.rerank(QUERIES[1], DOCS)}
    b = {r["id"]: r["score"] for r in one_by_one.rerank(QUERIES[1], DOCS)}
    assert a.keys() == b.keys()
    # padding is masked out; what remains is int8 *dynamic* quantisation, whose
    # activation scale is computed over the whole batch
    assert max(abs(a[k] - b[k]) for k in a) < 0.01


def _ranks(values: list[float]) -> np.ndarray:
    return np.argsort(np.argsort(values))


def test_ranking_agrees_with_the_torch_model(
    onnx: OnnxCrossEncoderReranker, torch_reranker: CrossEncoderReranker
) -> None:
    for query in QUERIES:
        got = {r["id"]: r["score"] for r in onnx.rerank(query, DOCS)}
        ref = {r["id"]: r["score"] for r in torch_reranker.rerank(query, DOCS)}
        ids = list(ref)
        spearman = np.corrcoef(_ranks([got[i] for i in ids]), _ranks([ref[i] for i in ids]))
        assert spearman[0, 1] >= 0.95, (query, got, ref)
        assert max(got, key=got.__getitem__) == max(ref, key=ref.__getitem__)
        assert max(abs(got[i] - ref[i]) for i in ids) < 0.02  # same (sigmoid) scale


def test_server_start_up_picks_the_onnx_model(tmp_path: Path, models_dir: Path) -> None:
    by_name = load_from_settings(Settings(
        _env_file=None, data_dir=tmp_path, models_dir=models_dir,
        cross_encoder_model=str(tiny_cross_encoder_dir())), env={})
    assert isinstance(by_name, OnnxCrossEncoderReranker)
    built = models_dir / "tiny-ce-onnx-int8"
    by_path = load_from_settings(Settings(
        _env_file=None, data_dir=tmp_path, cross_encoder_path=built), env={})
    assert isinstance(by_path, OnnxCrossEncoderReranker)
    # a cross-encoder that was never built still goes to sentence-transformers
    plain = load_from_settings(Settings(
        _env_file=None, data_dir=tmp_path, models_dir=tmp_path / "none",
        cross_encoder_path=tiny_cross_encoder_dir()), env={})
    assert isinstance(plain, CrossEncoderReranker)
    # a different model whose directory has the same name is not mistaken for the built one
    other = tmp_path / "elsewhere" / "tiny-ce"
    other.mkdir(parents=True)
    assert find_built_model(str(other), models_dir) is None
    assert registry.get("rerankers", "onnx-cross-encoder") is OnnxCrossEncoderReranker
    with pytest.raises(ModelLoadError, match="not built"):
        OnnxCrossEncoderReranker(OnnxCrossEncoderConfig(model="nope", models_dir=tmp_path))


def test_runtime_needs_no_torch(models_dir: Path) -> None:
    code = (
        "import sys\n"
        "for m in ('torch', 'transformers', 'sentence_transformers'):\n"
        "    sys.modules[m] = None  # any import of them now fails\n"
        "from ragline.providers.rerankers.onnx_cross_encoder import *\n"
        f"path = {str(models_dir / 'tiny-ce-onnx-int8')!r}\n"
        "r = OnnxCrossEncoderReranker(OnnxCrossEncoderConfig(model=path))\n"
        "out = r.rerank('q', [{'id': 1, 'text': 'a'}, {'id': 2, 'text': 'b'}])\n"
        "assert len(out) == 2\n"
        "print('ok', 'torch' in sys.modules and sys.modules['torch'] is not None)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok False"


def test_cli_build_reranker(tmp_path: Path) -> None:
    from ragline.cli.main import app

    out = tmp_path / "ce-onnx"
    args = ["models", "build-reranker", str(tiny_cross_encoder_dir()), "--out", str(out),
            "--fp32"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert first.stdout.strip().splitlines()[-1] == str(out)
    assert '"quantization": "fp32"' in (out / MANIFEST).read_text()
    second = CliRunner().invoke(app, args)
    assert second.exit_code == 0 and "already built" in second.stderr
    missing = CliRunner().invoke(app, ["models", "build-reranker", str(tmp_path / "nope"),
                                       "--models-dir", str(tmp_path)])
    assert missing.exit_code == 1 and "cannot load cross-encoder" in missing.stderr
