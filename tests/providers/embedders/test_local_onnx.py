"""The default local embedder: shapes, semantics, truncation, resolution, offline-ness."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from ragline.errors import InvalidInput, ModelNotLoaded
from ragline.providers.base import Health
from ragline.providers.embedders.base import Embedder
from ragline.providers.embedders.local_onnx import LocalOnnxEmbedder

DOCS = [
    "Cats are small domesticated carnivores that purr and chase mice.",
    "The central bank raised interest rates to fight inflation.",
    "Photosynthesis converts sunlight, water and carbon dioxide into glucose.",
]
LONG = " ".join(f"word{i} about distributed consensus and replicated logs" for i in range(200))


def test_embeds_normalised_float32_rows_in_input_order(local_embedder: LocalOnnxEmbedder) -> None:
    vecs = local_embedder.embed(DOCS)
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    # Internally sorted by length for batching; the output must follow the input order.
    rev = local_embedder.embed(DOCS[::-1])
    np.testing.assert_allclose(rev[::-1], vecs, atol=1e-6)


def test_similarity_follows_meaning(local_embedder: LocalOnnxEmbedder) -> None:
    docs = local_embedder.embed(DOCS)
    query = local_embedder.embed(["why does my kitten purr?"], "query")[0]
    scores = docs @ query
    assert int(np.argmax(scores)) == 0
    assert scores[0] > scores[1] + 0.2


def test_protocol_surface(local_embedder: LocalOnnxEmbedder) -> None:
    assert isinstance(local_embedder, Embedder)
    assert local_embedder.model == "all-MiniLM-L6-v2"
    assert local_embedder.dimension == 384
    assert local_embedder.max_input_tokens == 256
    assert local_embedder.connection_id.startswith("local:")
    assert local_embedder.embed([]).shape == (0, 384)
    schema = LocalOnnxEmbedder.connection_schema()
    assert schema["properties"]["model"]["default"] == "all-MiniLM-L6-v2"
    assert "embeddings" in local_embedder.capabilities()
    health = local_embedder.health()
    assert isinstance(health, Health) and health.status == "ok"
    assert health.details["dimension"] == 384


def test_count_tokens_ignores_the_baked_in_128_padding(local_embedder: LocalOnnxEmbedder) -> None:
    assert local_embedder.count_tokens("hello world") == 4  # [CLS] hello world [SEP]
    assert local_embedder.count_tokens("") == 2
    assert local_embedder.count_tokens(LONG) > 1000  # not truncated to 128 or 256


def test_long_input_is_truncated_to_256_word_pieces(local_embedder: LocalOnnxEmbedder) -> None:
    tok = local_embedder._count_tok
    enc = tok.encode(LONG, add_special_tokens=False)
    prefix = LONG[: enc.offsets[253][1]]  # 254 pieces + [CLS]/[SEP] = 256
    assert local_embedder.count_tokens(prefix) == 256
    a = local_embedder.embed([LONG])[0]
    b = local_embedder.embed([prefix])[0]
    assert float(a @ b) > 0.99999


def test_concurrent_threads_get_the_same_vectors(local_embedder: LocalOnnxEmbedder) -> None:
    expected = local_embedder.embed(DOCS)
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(3):
                results.append(local_embedder.embed(DOCS))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 12
    for r in results:
        np.testing.assert_allclose(r, expected, atol=1e-6)


def test_rejects_bad_input(local_embedder: LocalOnnxEmbedder) -> None:
    with pytest.raises(InvalidInput):
        local_embedder.embed(["x"], "passage")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        local_embedder.embed("not a list")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        local_embedder.embed(["ok", 3])  # type: ignore[list-item]


def test_model_may_be_a_directory_path(minilm_dir: Path) -> None:
    emb = LocalOnnxEmbedder(model=str(minilm_dir))
    assert emb.dimension == 384
    ref = LocalOnnxEmbedder(model="all-MiniLM-L6-v2")
    np.testing.assert_allclose(emb.embed(DOCS), ref.embed(DOCS), atol=1e-6)


def test_models_dir_override(minilm_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelNotLoaded, match=r"ensure_model\.py"):
        LocalOnnxEmbedder(models_dir=tmp_path)
    (tmp_path / minilm_dir.name).symlink_to(minilm_dir)
    assert LocalOnnxEmbedder(models_dir=tmp_path).path == minilm_dir.resolve()


def test_unknown_model_and_incomplete_dir(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="Unknown local embedding model"):
        LocalOnnxEmbedder(model="no-such-model")
    with pytest.raises(ModelNotLoaded, match=r"model\.onnx"):
        LocalOnnxEmbedder(model=str(tmp_path))
    with pytest.raises(ValueError):  # pydantic: extra="forbid"
        LocalOnnxEmbedder(modle="all-MiniLM-L6-v2")


def test_runtime_never_imports_torch_and_forces_hub_offline() -> None:
    code = (
        "import os, sys\n"
        "from ragline.settings import Settings\n"
        "Settings(_env_file=None).apply_process_environment()\n"
        "from ragline.providers.embedders.local_onnx import LocalOnnxEmbedder\n"
        "v = LocalOnnxEmbedder().embed(['hello'])\n"
        "assert v.shape == (1, 384)\n"
        "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers', "
        "'huggingface_hub') if m in sys.modules), os.environ.get('HF_HUB_OFFLINE'))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_OFFLINE")}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[] 1"


def test_large_calls_are_split_across_workers(minilm_dir: Path) -> None:
    texts = [f"{i}: {LONG[: 600 + 7 * i]}" for i in range(10)]  # > 1024 word pieces in all
    one = LocalOnnxEmbedder(model=str(minilm_dir), threads=1)
    two = LocalOnnxEmbedder(model=str(minilm_dir), threads=2)
    a, b = one.embed(texts), two.embed(texts)
    assert one._executor is None  # one worker: runs inline
    assert two._executor is not None  # two half-batches ran in the pool
    # Dynamic int8 scales depend on the batch, so only near-equality is expected.
    assert float(np.min(np.sum(a * b, axis=1))) > 0.99
    two.close()
    assert two._executor is None
    np.testing.assert_allclose(two.embed(texts), b, atol=1e-6)  # pool comes back on demand


def test_bare_directory_without_manifest_or_fp32_graph(minilm_dir: Path, tmp_path: Path) -> None:
    for name in ("model.onnx", "tokenizer.json"):
        (tmp_path / name).symlink_to(minilm_dir / name)
    emb = LocalOnnxEmbedder(model=str(tmp_path))
    assert emb.model == str(tmp_path) and emb.manifest == {}
    assert emb.dimension == 384  # read from the graph's output shape
    assert emb.max_input_tokens == 256
    vecs = emb.embed(DOCS)
    assert emb._fp32_session is None  # int8 for everything
    ref = LocalOnnxEmbedder(model=str(minilm_dir), fp32_max_tokens=0).embed(DOCS)
    np.testing.assert_allclose(vecs, ref, atol=1e-6)


@pytest.mark.parametrize("size", [1, 4, 32])
def test_length_chunks_bound_padding_and_size(size: int) -> None:
    import random

    from ragline.providers.embedders.local_onnx import MAX_PADDING, length_chunks

    rng = random.Random(size)
    lens = [rng.randint(5, 60) for _ in range(200)] + [256] * 40  # queries, then passages
    order = sorted(range(len(lens)), key=lambda i: lens[i])
    chunks = length_chunks(order, lens, size)
    assert [i for c in chunks for i in c] == order  # every text once, order kept
    for c in chunks:
        assert 1 <= len(c) <= size
        if len(c) > 1:
            padded = max(lens[i] for i in c) * len(c)
            assert padded <= sum(lens[i] for i in c) * (1 + MAX_PADDING)
    # equal lengths still fill whole chunks (passages at max_length)
    assert sum(1 for c in chunks if lens[c[0]] == 256) == -(-40 // size)


def test_the_fp32_graph_is_loaded_by_the_first_short_text_only(minilm_dir: Path) -> None:
    """Passages never load the fp32 graph (~98 MB of weights an ingesting process does not
    need); the first text of at most ``fp32_max_tokens`` word pieces does, and gets the
    same vector as from an embedder that had it loaded already."""
    emb = LocalOnnxEmbedder(model=str(minilm_dir), threads=1)
    passages = emb.embed(DOCS, "document")
    assert emb._fp32_session is None
    short = emb.embed(["ok", "a robot"], "query")
    assert emb._fp32_session is not None
    warm = LocalOnnxEmbedder(model=str(minilm_dir), threads=1)
    warm.embed(["a"], "query")  # fp32 loaded first, then the same texts
    np.testing.assert_allclose(warm.embed(["ok", "a robot"], "query"), short, atol=1e-6)
    np.testing.assert_allclose(warm.embed(DOCS, "document"), passages, atol=1e-6)


def test_batches_are_bounded_by_padded_word_pieces(minilm_dir: Path) -> None:
    """onnxruntime keeps the memory of its largest batch: 8 passages of 256 word pieces
    (2,048) per call by default, while 32 queries still share one."""
    from ragline.providers.embedders.local_onnx import length_chunks

    emb = LocalOnnxEmbedder(model=str(minilm_dir))
    assert (emb.config.batch_size, emb.config.max_batch_tokens) == (32, 2048)
    passages = [256] * 20
    chunks = length_chunks(list(range(20)), passages, 32, 2048)
    assert [len(c) for c in chunks] == [8, 8, 4]
    queries = [22] * 40
    assert [len(c) for c in length_chunks(list(range(40)), queries, 32, 2048)] == [32, 8]
    assert length_chunks([0], [3000], 32, 2048) == [[0]]  # one text alone may exceed it
    same = [LONG[:900]] * 20  # equal lengths fill whole batches
    np.testing.assert_allclose(
        emb.embed(same)[0],
        LocalOnnxEmbedder(model=str(minilm_dir), max_batch_tokens=100_000).embed(same)[0],
        atol=2e-2)
