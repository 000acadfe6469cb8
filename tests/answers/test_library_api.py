"""Spec 003's library API, the adapter over the doors (fake embedder, scripted model)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from ragline.core.principal import Principal
from ragline.errors import InvalidInput, LLMNotConfigured
from ragline.facade import Ragline
from ragline.library import Library
from ragline.providers.registry import registry
from ragline.settings import Settings
from ragline.testing.fake_embedder import FakeEmbedder
from ragline.testing.scripted_llm import ScriptedChatModel


@pytest.fixture
def rl(settings: Settings) -> Iterator[Ragline]:
    registry.register("embedders", "fake", FakeEmbedder)
    r = Ragline(settings, llm=ScriptedChatModel(default="not json")).start()
    r.collections.create(r.owner(), "rb", embed={"provider": "fake"})
    yield r
    r.close()


def test_embed_store_find_similar(rl: Ragline) -> None:
    lib, theirs_lib = Library(rl, rl.owner()), Library(rl, Principal("someone-else"))
    one = lib.embed_text("High memory usage on compute instance", collection="rb")
    many = lib.embed_texts(["text1", "text2", "text3"], collection="rb")
    assert len(many) == 3 and len(one) == len(many[0])
    assert np.allclose(lib.embed_texts(["text2"], collection="rb")[0], many[1])
    ctx_vec = lib.embed_context({"title": "High CPU", "labels": ["cpu"]}, collection="rb")
    assert len(ctx_vec) == len(one)

    first = lib.store_chunk("rb", {"id": "c1", "text": "High memory usage on compute instance",
                                  "metadata": {"tags": ["memory"]}})
    assert first == "c1"
    with pytest.raises(InvalidInput):  # atomic: the bad chunk fails the whole batch
        lib.store_batch("rb", [{"id": "c2", "text": "disk"}, {"id": "c3", "text": "x",
                                                             "metadata": {"bad": {"x": 1}}}])
    assert rl.collections.get(rl.owner(), "rb").count == 1
    lib.store_batch("rb", [{"id": "c2", "text": "disk full"}, {"id": "c3", "text": "cpu hot"}])
    found = lib.find_similar(one, 2, collection="rb")
    assert found[0]["id"] == "c1" and found[0]["score"] > found[1]["score"]
    assert theirs_lib.find_similar(one, 2, collection="rb") == []
    theirs = theirs_lib.store_chunk("rb", {"id": "t1",
                                           "text": "High memory usage on compute instance"})
    assert [h["id"] for h in theirs_lib.find_similar(one, 2, collection="rb")] == [theirs]
    assert "t1" not in [h["id"] for h in lib.find_similar(one, 5, collection="rb")]


def test_format_prompt_generate_and_fallback(rl: Ragline) -> None:
    lib = Library(rl, rl.owner())
    lib.store_batch("rb", [{"id": "r1", "text": "cpu runbook: run top",
                           "metadata": {"tags": ["cpu"], "source_path": "rb/cpu.md"}}])
    alert = {"title": "High CPU", "metrics": {"cpu": 99}, "logs": ["oom"]}
    chunks = lib.retrieve(alert, 1, collection="rb")
    prompt = lib.format_prompt(alert, chunks)
    assert "High CPU" in prompt and "cpu runbook: run top" in prompt and "- cpu: 99" in prompt
    checklist = lib.generate_checklist(alert, chunks)  # the model answers "not json"
    assert checklist.fallback and checklist.source_runbooks == ["rb/cpu.md"]
    assert len(checklist.steps) == 1 and checklist.steps[0].priority == "high"


def test_library_without_model_names_the_settings(settings: Settings) -> None:
    r = Ragline(settings).start()
    try:
        with pytest.raises(LLMNotConfigured, match="RAGLINE_LLM_BASE_URL"):
            Library(r, r.owner()).generate_checklist({"title": "x"}, [])
    finally:
        r.close()
