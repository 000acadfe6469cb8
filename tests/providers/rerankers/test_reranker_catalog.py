"""The curated cross-encoder list behind --cross-encoder help and --list-reranker-models."""

from __future__ import annotations

import re

from ragline.providers.rerankers import catalog


def test_every_use_case_has_a_model_with_all_metadata() -> None:
    for use_case in catalog.USE_CASES:
        models = catalog.models_for(use_case)
        assert models, use_case
        for m in models:
            assert "/" in m.name  # a Hugging Face identifier
            assert re.fullmatch(r"\d+(\.\d+)? (MB|GB)", m.size), m.size
            assert "ms" in m.latency_10_docs
            assert m.accuracy


def test_curated_list_has_the_well_known_models() -> None:
    names = {m.name for m in catalog.MODELS}
    assert {
        "cross-encoder/ms-marco-TinyBERT-L-2-v2",
        "cross-encoder/ms-marco-MiniLM-L-6-v2",
        "BAAI/bge-reranker-base",
        "BAAI/bge-reranker-large",
        "mixedbread-ai/mxbai-rerank-base-v1",
    } <= names
    assert catalog.default_model().name == "cross-encoder/ms-marco-MiniLM-L-6-v2"


def test_help_text_shows_name_size_and_use_case_for_each_tier() -> None:
    text = catalog.help_text()
    for use_case in catalog.USE_CASES:
        first = catalog.models_for(use_case)[0]
        assert f"{first.name} ({first.size}, {use_case})" in text
    assert "--list-reranker-models" in text
    assert "CROSS_ENCODER_MODEL" in text


def test_render_list_groups_by_use_case_and_links_the_hub() -> None:
    text = catalog.render_list()
    fast = text.index("Fast")
    recommended = text.index("Recommended")
    high = text.index("High accuracy")
    assert fast < recommended < high
    # Each model sits under its own group heading, with size, latency and accuracy.
    for m in catalog.MODELS:
        line = next(ln for ln in text.splitlines() if m.name in ln)
        assert m.size in line and m.latency_10_docs in line and m.accuracy in line
        pos = text.index(m.name)
        group_start = {"fast": fast, "recommended": recommended, "high-accuracy": high}
        assert pos > group_start[m.use_case]
        later = [s for s in group_start.values() if s > group_start[m.use_case]]
        assert all(pos < s for s in later)
    assert "Any Hugging Face cross-encoder model works" in text
    assert catalog.HUB_LINK in text
    assert catalog.HUB_LINK == "https://huggingface.co/models?pipeline_tag=text-ranking"


def test_enable_hint_names_an_example_and_the_list_option() -> None:
    hint = catalog.enable_hint()
    assert "--cross-encoder cross-encoder/ms-marco-MiniLM-L-6-v2" in hint
    assert "--list-reranker-models" in hint
