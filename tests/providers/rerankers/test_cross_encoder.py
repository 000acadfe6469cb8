"""CrossEncoderReranker: model sources, loading, failures and the rerank() contract.

Uses a tiny random-weight BERT cross-encoder built locally (no pretrained
reranker is installable offline); its scores are arbitrary but deterministic,
so tests compare against the model's own ``predict`` rather than fixed values.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragline.errors import InvalidInput, ModelLoadError, RaglineError, RerankError
from ragline.providers.registry import registry
from ragline.providers.rerankers.base import Reranker
from ragline.providers.rerankers.cross_encoder import (
    CrossEncoderConfig,
    CrossEncoderReranker,
    ModelSource,
    load_from_settings,
    resolve_model_source,
)
from ragline.settings import Settings
from ragline.testing.cross_encoder import tiny_cross_encoder_dir

DOCS = [
    {"id": "a", "text": "Retrieval augmented generation combines search with an LLM."},
    {"id": "b", "text": "The Eiffel tower is in Paris."},
    {"id": "c", "text": "Cats sleep most of the day."},
    {"id": "d", "text": "Vector databases store embeddings for similarity search."},
    {"id": "e", "text": "x"},
]


@pytest.fixture(scope="module")
def model_dir() -> Path:
    return tiny_cross_encoder_dir()


@pytest.fixture(scope="module")
def reranker(model_dir: Path) -> CrossEncoderReranker:
    return CrossEncoderReranker.from_source(ModelSource(str(model_dir), "--cross-encoder-path"))


def _settings(tmp_path: Path, **kw: Any) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path, **kw)


class FakeModel:
    """Scores by text length; records what it was asked, to check batching and clipping."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail = fail

    def predict(self, pairs: list[tuple[str, str]], **kw: Any) -> np.ndarray:
        self.calls.append({"pairs": list(pairs), **kw})
        if self.fail:
            raise self.fail
        return np.array([float(len(d)) for _, d in pairs], dtype=np.float32)


def _fake(**config: Any) -> tuple[CrossEncoderReranker, FakeModel]:
    model = FakeModel(config.pop("fail", None))
    return CrossEncoderReranker(CrossEncoderConfig(model="fake", **config), model=model), model


# --- where the model comes from --------------------------------------------------

BOTH_ENV = {"CROSS_ENCODER_MODEL": "e", "CROSS_ENCODER_PATH": "/ep"}


@pytest.mark.parametrize(
    ("path", "name", "env", "expected"),
    [
        ("/p", "n", BOTH_ENV, ("/p", "--cross-encoder-path")),
        (None, "n", BOTH_ENV, ("n", "--cross-encoder")),
        (None, None, BOTH_ENV, ("/ep", "CROSS_ENCODER_PATH")),
        (None, None, {"CROSS_ENCODER_MODEL": "e"}, ("e", "CROSS_ENCODER_MODEL")),
        ("", "  ", {"CROSS_ENCODER_MODEL": ""}, None),
        (None, None, {}, None),
    ],
)  # fmt: skip
def test_priority_is_path_then_name_then_env(
    path: str | None, name: str | None, env: dict[str, str], expected: tuple[str, str] | None
) -> None:
    source = resolve_model_source(path, name, env)
    assert (None if source is None else (source.value, source.origin)) == expected


def test_spec_variables_are_read_by_settings(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    """CROSS_ENCODER_MODEL (spec 000) reaches the reranker through Settings, the only
    reader of the environment; resolve_model_source itself reads nothing."""
    monkeypatch.setenv("CROSS_ENCODER_MODEL", "org/model")
    monkeypatch.delenv("CROSS_ENCODER_PATH", raising=False)
    assert resolve_model_source(None, None) is None
    s = Settings(data_dir=tmp_path, _env_file=None)  # type: ignore[call-arg]
    assert s.cross_encoder_env_model == "org/model"


def test_load_from_path_flag_logs_path(
    tmp_path: Path, model_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "ragline.providers.rerankers.cross_encoder")
    rr = load_from_settings(_settings(tmp_path, cross_encoder_path=model_dir), env={})
    assert rr is not None
    assert rr.health_info() == {"model": str(model_dir), "status": "loaded"}
    assert rr.config.local_files_only is True  # a path never touches the hub
    assert f"cross-encoder loaded: path {model_dir}" in caplog.text


def test_load_name_that_is_a_local_directory(tmp_path: Path, model_dir: Path) -> None:
    rr = load_from_settings(_settings(tmp_path, cross_encoder_model=str(model_dir)), env={})
    assert rr is not None and rr.model == str(model_dir)
    assert rr.rerank("q", DOCS[:2])[0]["id"] in {"a", "b"}


def test_load_from_env_var_behaves_like_the_flag(
    tmp_path: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CROSS_ENCODER_MODEL", str(model_dir))
    rr = load_from_settings(_settings(tmp_path))
    assert rr is not None
    assert rr.health_info() == {"model": str(model_dir), "status": "loaded"}
    flag = load_from_settings(_settings(tmp_path, cross_encoder_model=str(model_dir)), env={})
    assert flag is not None
    assert rr.rerank("query", DOCS) == flag.rerank("query", DOCS)


def test_path_flag_wins_over_a_broken_name_and_env(tmp_path: Path, model_dir: Path) -> None:
    settings = _settings(tmp_path, cross_encoder_path=model_dir, cross_encoder_model="no/such")
    rr = load_from_settings(settings, env={"CROSS_ENCODER_MODEL": "also/missing"})
    assert rr is not None and rr.model == str(model_dir)


def test_nothing_configured_logs_disabled_with_hint(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "ragline.providers.rerankers.cross_encoder")
    assert load_from_settings(_settings(tmp_path), env={}) is None
    assert "cross-encoder disabled" in caplog.text
    assert "--cross-encoder cross-encoder/ms-marco-MiniLM-L-6-v2" in caplog.text
    assert "--list-reranker-models" in caplog.text


def test_missing_path_is_a_load_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ModelLoadError, match="is not a directory") as info:
        load_from_settings(_settings(tmp_path, cross_encoder_path=missing), env={})
    assert isinstance(info.value, RaglineError)
    assert str(missing) in info.value.message


def test_directory_without_a_model_is_a_load_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelLoadError, match=f"Could not load cross-encoder '{empty}'"):
        load_from_settings(_settings(tmp_path, cross_encoder_path=empty), env={})


def test_unloadable_name_is_a_load_error_with_details(tmp_path: Path) -> None:
    settings = _settings(tmp_path, cross_encoder_model="not a//valid repo id")
    with pytest.raises(ModelLoadError) as info:
        load_from_settings(settings, env={})
    assert "not a//valid repo id" in info.value.message
    assert info.value.__cause__ is not None
    assert type(info.value.__cause__).__name__ in info.value.message


# --- rerank() ----------------------------------------------------------------------


def test_scores_match_the_model_and_are_sorted_descending(
    reranker: CrossEncoderReranker,
) -> None:
    out = reranker.rerank("what is rag", DOCS)
    expected = reranker._model.predict([("what is rag", d["text"]) for d in DOCS])
    assert [r["original_rank"] for r in out] == sorted(
        range(1, 6), key=lambda r: -float(expected[r - 1])
    )
    assert [r["score"] for r in out] == sorted((float(s) for s in expected), reverse=True)
    assert len({r["score"] for r in out}) == len(DOCS)  # no ties decided the order
    for r in out:
        assert DOCS[r["original_rank"] - 1]["id"] == r["id"]
        assert isinstance(r["score"], float)


def test_top_k_cuts_after_scoring_everything() -> None:
    rr, model = _fake()
    docs = [{"id": i, "text": "w" * n} for i, n in enumerate([3, 9, 1, 7, 5, 2, 8, 4, 6, 10])]
    out = rr.rerank("q", docs, top_k=3)
    assert len(model.calls[0]["pairs"]) == 10
    assert out == [
        {"id": 9, "score": 10.0, "original_rank": 10},
        {"id": 1, "score": 9.0, "original_rank": 2},
        {"id": 6, "score": 8.0, "original_rank": 7},
    ]


def test_ties_keep_input_order_and_missing_text_scores_as_empty() -> None:
    rr, _ = _fake()
    out = rr.rerank("q", [{"id": "x", "text": "ab"}, {"id": "y"}, {"id": "z", "text": "cd"}])
    assert [r["id"] for r in out] == ["x", "z", "y"]


def test_texts_are_clipped_and_batched() -> None:
    rr, model = _fake(max_chars=5, batch_size=7)
    out = rr.rerank("a long query", [{"id": 1, "text": "0123456789"}])
    call = model.calls[0]
    assert call["pairs"] == [("a lon", "01234")]
    assert call["batch_size"] == 7 and call["show_progress_bar"] is False
    assert out[0]["score"] == 5.0


def test_too_many_documents_is_invalid_input() -> None:
    rr, model = _fake(max_documents=2)
    with pytest.raises(InvalidInput, match=r"Too many documents to rerank: 3 \(maximum 2\)"):
        rr.rerank("q", [{"id": i, "text": "t"} for i in range(3)])
    assert model.calls == []


def test_bad_top_k_and_empty_documents() -> None:
    rr, model = _fake()
    with pytest.raises(InvalidInput, match="top_k must be at least 1"):
        rr.rerank("q", [{"id": 1, "text": "t"}], top_k=0)
    assert rr.rerank("q", []) == []
    assert model.calls == []


def test_model_failure_becomes_rerank_error_with_details(caplog: pytest.LogCaptureFixture) -> None:
    rr, _ = _fake(fail=RuntimeError("CUDA out of cheese"))
    with pytest.raises(RerankError) as info:
        rr.rerank("q", [{"id": 1, "text": "t"}])
    assert info.value.status == 500
    assert info.value.message == "Reranking failed: RuntimeError: CUDA out of cheese"
    assert "failed while scoring" in caplog.text


def test_provider_surface(reranker: CrossEncoderReranker) -> None:
    assert isinstance(reranker, Reranker)
    assert reranker.capabilities() == ["rerank"]
    health = reranker.health()
    assert health.status == "ok" and health.details["status"] == "loaded"
    schema = CrossEncoderReranker.connection_schema()
    assert schema["required"] == ["model"]
    assert registry.get("rerankers", "cross-encoder") is CrossEncoderReranker
