"""benchmarks/bench_scifact_ideas.py: the harness behind BENCHMARKS.md's "SciFact: fusion,
feedback, title, sentences" ranks as it claims, on a tiny BEIR-shaped fixture (no
shared data): Edge's analyser in its BM25, DBSF fusion over the union of two candidate
lists, RM3 feedback reaching a document without the query's words, trec_eval scores."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_scifact_ideas.py"

CORPUS = [  # id, title, text
    ("d1", "Lidar", "lasers measure the distance to walls with lidar"),
    ("d2", "Scanners", "a lidar scanner sweeps the room"),
    ("d3", "Bread", "bake bread with flour and yeast"),
    ("d4", "Yeast", "yeast makes bread rise; bread bread bread"),
    ("d5", "Topics", "ros topics carry messages"),
]
QUERIES = [("q1", "laser distance"), ("q2", "bread with yeast")]
QRELS = {"train": [("q1", "d2", 1)], "test": [("q1", "d1", 1), ("q2", "d4", 1)]}
# 2-d vectors: q1 points at d1/d2, q2 at d3/d4
DOCS = [[1.0, 0.1], [0.9, 0.3], [0.1, 1.0], [0.3, 0.9], [0.7, 0.7]]
QVECS = [[1.0, 0.2], [0.2, 1.0]]


@pytest.fixture(scope="module")
def bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_scifact_ideas", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def lab(bench: Any, tmp_path: Path) -> Any:
    data, cache = tmp_path / "tiny", tmp_path / "cache"
    (data / "qrels").mkdir(parents=True)
    cache.mkdir()
    (data / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in CORPUS))
    (data / "queries.jsonl").write_text("".join(
        json.dumps({"_id": i, "text": t}) + "\n" for i, t in QUERIES))
    for split, rows in QRELS.items():
        lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in rows]
        (data / "qrels" / f"{split}.tsv").write_text("\r\n".join(lines) + "\r\n")
    np.save(cache / "doc_vecs.npy", np.asarray(DOCS, np.float32))
    (cache / "doc_ids.json").write_text(json.dumps([c[0] for c in CORPUS]))
    np.save(cache / "q_vecs.npy", np.asarray(QVECS, np.float32))
    (cache / "q_ids.json").write_text(json.dumps([q[0] for q in QUERIES]))
    return bench.Lab(data, cache)


def order(lab: Any, row: Any) -> list[str]:
    """Retrieved ids, best first (not retrieved: -inf or a BM25 of 0 left out)."""
    return [lab.doc_ids[j] for j in np.argsort(-row, kind="stable")
            if np.isfinite(row[j]) and row[j] > 0]


def test_bm25_uses_edges_analyser(lab: Any) -> None:
    """'laser' finds 'lasers' (stemming); term frequency ranks d4 ('bread' x4) over d3."""
    s = lab.bm25(["q1", "q2"])
    assert order(lab, s[0]) == ["d1"]
    assert order(lab, s[1])[:2] == ["d4", "d3"]


def test_dbsf_fusion_over_the_union_of_candidates(bench: Any, lab: Any) -> None:
    """Each leg keeps its top 2; a document either leg found is ranked (one leg missing
    counts 0), the rest is not retrieved; weight 1 on a leg gives that leg's order."""
    qids = ["q1"]
    dense, sparse = lab.dense(qids), lab.bm25(qids)
    fused = bench.hybrid(dense, sparse, k=2)[0]
    # dense top 2: d1, d2; BM25 matches d1 only (a BM25 leg returns matches only)
    assert {lab.doc_ids[j] for j in np.where(np.isfinite(fused))[0]} == {"d1", "d2"}
    assert order(lab, fused)[0] == "d1"  # top of both legs
    dense_only = bench.hybrid(dense, sparse, k=2, w=1.0)[0]
    assert order(lab, dense_only)[:2] == ["d1", "d2"]


def test_rm3_reaches_a_document_without_the_query_words(lab: Any) -> None:
    """Fed by d1 (the top hit), RM3 adds 'lidar': d2, which has neither 'laser' nor
    'distance', gets a BM25 score; with every term at weight 1 too."""
    qids = ["q1"]
    plain = lab.bm25(qids)
    assert plain[0][1] == 0
    for same in (False, True):
        weights = lab.rm3(qids, plain, docs=1, terms=3, orig=0.7, same_weight=same)
        expanded = lab.bm25(qids, weights=weights)
        assert expanded[0][1] > 0
        assert order(lab, expanded[0])[0] == "d1"
        if same:
            assert set(weights["q1"].values()) == {1.0}
        else:  # query terms keep 0.7 of the weight, the expansion shares 0.3
            assert sum(weights["q1"].values()) == pytest.approx(1.0)


def test_evaluate_is_trec_eval_ndcg(lab: Any) -> None:
    perfect = np.full((1, 5), -np.inf)
    perfect[0, 1] = 1.0  # d2, the one relevant document of q1 in train
    assert lab.evaluate("train", perfect, ["q1"]) == (pytest.approx(1.0), pytest.approx(1.0))
    worse = perfect.copy()
    worse[0, 0] = 2.0  # d1 above it
    ndcg, recall = lab.evaluate("train", worse, ["q1"])
    assert ndcg == pytest.approx(1 / np.log2(3)) and recall == pytest.approx(1.0)
