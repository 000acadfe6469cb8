"""`ragline eval beir`: loads BEIR files (CRLF qrels), ingests once, scores with trec_eval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragline.cli.main import app
from ragline.evaluation.beir import load
from ragline.providers.registry import registry
from ragline.testing.fake_embedder import FakeEmbedder

CORPUS = [
    ("d1", "Lidar", "lidar sensors measure distance with laser light"),
    ("d2", "Cameras", "stereo cameras estimate depth from two images"),
    ("d3", "Topics", "ros topics publish messages to subscribers"),
    ("d4", "Services", "ros services answer requests with responses"),
    ("d5", "Cooking", "bake bread with flour water and yeast"),
]
QUERIES = [("q1", "laser distance sensor"), ("q2", "publish messages"),
           ("q3", "bread yeast"), ("q9", "not judged")]
QRELS = [("q1", "d1", 1), ("q2", "d3", 1), ("q3", "d5", 1), ("q3", "d4", 0)]


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "tiny"
    (root / "qrels").mkdir(parents=True)
    with (root / "corpus.jsonl").open("w") as f:
        for i, t, x in CORPUS:
            f.write(json.dumps({"_id": i, "title": t, "text": x}) + "\n")
    with (root / "queries.jsonl").open("w") as f:
        for i, t in QUERIES:
            f.write(json.dumps({"_id": i, "text": t}) + "\n")
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in QRELS]
    (root / "qrels" / "test.tsv").write_bytes(("\r\n".join(lines) + "\r\n").encode())
    return root


def test_load_handles_crlf_and_drops_unjudged_queries(dataset: Path) -> None:
    data = load(dataset)
    assert data.qrels == {"q1": {"d1": 1}, "q2": {"d3": 1}, "q3": {"d5": 1, "d4": 0}}
    assert set(data.queries) == {"q1", "q2", "q3"}
    assert data.corpus["d1"]["title"] == "Lidar"


def test_eval_command_reports_metrics_and_skips_second_ingest(dataset: Path,
                                                              tmp_path: Path) -> None:
    registry.register("embedders", "fake", FakeEmbedder)
    runner = CliRunner()
    args = ["eval", "beir", str(dataset), "--collection", "tiny", "--mode", "sparse",
            "--provider", "fake", "--data-dir", str(tmp_path / "data"), "--json"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    metrics = json.loads(first.stdout.strip().splitlines()[-1])
    # every query's relevant document contains its words, so BM25 ranks it first
    assert metrics == {"ndcg@10": 1.0, "recall@100": 1.0, "mrr@10": 1.0, "queries": 3}
    assert "ingested 5 documents" in first.output
    second = runner.invoke(app, args)
    assert second.exit_code == 0
    assert "already holds the corpus; not re-ingested" in second.output
    dense = runner.invoke(app, [*args[:6], "dense", *args[7:]])
    assert dense.exit_code == 0, dense.output
    scores = json.loads(dense.stdout.strip().splitlines()[-1])
    assert 0 < scores["ndcg@10"] <= 1 and scores["queries"] == 3


def test_not_a_dataset_is_a_clear_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["eval", "beir", str(tmp_path), "--collection", "x",
                                   "--data-dir", str(tmp_path / "d")])
    assert res.exit_code != 0
    assert "Not a BEIR dataset" in str(res.exception) or "Not a BEIR dataset" in res.output
