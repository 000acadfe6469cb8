"""The one relevance scale (issue 35 item 5): one function, ``ragline.core.relevance``,
gives search's ``relevance``, search's ``relevance_threshold`` and the chat's
``rag_relevance_threshold`` their number, with the same edge cases everywhere."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragline.core.relevance import passes, relevance_of, relevance_to
from ragline.facade import DocumentInput, Ragline, SearchRequest
from ragline.providers.registry import registry
from ragline.services.search.rag_context import Hit, RagContext, passes_threshold
from ragline.testing.fake_embedder import FakeEmbedder
from ragline.testing.scripted_llm import ScriptedChatModel
from tests.ingestion_support import fake_settings

# -- the function ---------------------------------------------------------------------------


def test_the_scale_is_half_plus_half_the_cosine_clamped() -> None:
    q = np.array([1.0, 0.0], dtype=np.float32)
    assert relevance_of(q, [1.0, 0.0]) == 1.0  # the same direction
    assert relevance_of(q, [3.0, 0.0]) == 1.0  # length does not count
    assert relevance_of(q, [0.0, 1.0]) == 0.5  # orthogonal: the middle
    assert relevance_of(q, [-1.0, 0.0]) == 0.0  # opposite: a negative cosine, clamped at 0
    assert relevance_of(q, [1.0, 1.0]) == pytest.approx(0.5 + math.sqrt(0.5) / 2)
    assert relevance_of(q, [-1.0, 1.0]) == pytest.approx(0.5 - math.sqrt(0.5) / 2)


def test_without_vectors_there_is_no_relevance_and_no_threshold_passes() -> None:
    assert relevance_of(None, [1.0, 0.0]) is None
    assert relevance_of([1.0, 0.0], None) is None
    assert relevance_to(None)([1.0, 0.0]) is None
    assert not passes(None, 0.0)  # not even the lowest threshold


def test_vectors_without_a_comparable_direction_sit_in_the_middle() -> None:
    q = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    assert relevance_of(q, np.zeros(3, dtype=np.float32)) == 0.5
    assert relevance_of(np.zeros(3, dtype=np.float32), [1.0, 2.0, 3.0]) == 0.5
    assert relevance_of(q, [1.0, 2.0]) == 0.5  # another dimension


def test_ties_get_the_same_number_and_the_threshold_is_inclusive() -> None:
    rel = relevance_to(np.array([0.6, 0.8], dtype=np.float32))
    a, b = rel([0.6, 0.8]), rel([1.2, 1.6])
    assert a == b
    assert a is not None and passes(a, a) and not passes(a, math.nextafter(a, 2.0))
    assert passes(0.0, 0.0) and passes(1.0, 1.0) and not passes(0.5, 0.75)


def test_the_chat_rule_on_an_empty_and_a_single_result() -> None:
    assert not passes_threshold(RagContext(None, []), 0.0)  # nothing found: general path
    one = RagContext("x", [Hit("a", "x", {}, score=-0.2, relevance=0.75)])
    assert passes_threshold(one, 0.75) and not passes_threshold(one, 0.7500001)
    none = RagContext("x", [Hit("a", "x", {}, score=0.9, relevance=None)])
    assert not passes_threshold(none, 0.0)  # a high score is not a relevance


# -- search and chat through the door -------------------------------------------------------

VECTORS = {"same": [1.0, 0.0], "diagonal": [1.0, 1.0], "across": [0.0, 1.0],
           "across-too": [0.0, 2.0], "opposite": [-1.0, 0.0]}


@pytest.fixture
def vectors(tmp_path: Path) -> Iterator[Ragline]:
    """A collection of pre-computed 2-d embeddings around the query [1, 0]."""
    with Ragline(fake_settings(tmp_path)) as rl:
        me = rl.owner()
        rl.collections.create(me, "vec")
        rl.documents.add(me, "vec", [DocumentInput(k, {}, v, k) for k, v in VECTORS.items()])
        yield rl


def _search(rl: Ragline, **kw: Any) -> dict[str, tuple[float, float | None]]:
    res = rl.search.query_sync(rl.owner(), SearchRequest(collection="vec", embedding=[1.0, 0.0],
                                                   mode="dense", **kw))
    return {h.id: (h.score, h.relevance) for h in res.hits}


def test_search_relevance_and_its_threshold_at_the_boundaries(vectors: Ragline) -> None:
    every = _search(vectors)
    assert {k: r for k, (_, r) in every.items()} == pytest.approx(
        {"same": 1.0, "diagonal": 0.5 + math.sqrt(0.5) / 2, "across": 0.5, "across-too": 0.5,
         "opposite": 0.0})
    assert every["opposite"][0] < 0  # a negative score, relevance 0 (the scale's floor)
    assert set(_search(vectors, relevance_threshold=0.0)) == set(VECTORS)
    # 0.5 exactly: both orthogonal hits (a tie) stay, at equality
    assert set(_search(vectors, relevance_threshold=0.5)) == {
        "same", "diagonal", "across", "across-too"}
    assert set(_search(vectors, relevance_threshold=math.nextafter(0.5, 1.0))) == {
        "same", "diagonal"}
    assert set(_search(vectors, relevance_threshold=1.0)) == {"same"}
    single = _search(vectors, limit=1)
    assert single == {"same": every["same"]}  # a single result: the same number


def test_a_search_that_finds_nothing_gives_no_relevance(vectors: Ragline) -> None:
    registry.register("embedders", "fake", FakeEmbedder)
    me = vectors.owner()
    vectors.collections.create(me, "empty", embed={"provider": "fake"})
    res = vectors.search.query_sync(me, SearchRequest(collection="empty", query="anything"))
    assert res.hits == []


BOOK = [("paris", "Paris is the capital of France"),
        ("bread", "Sourdough bread needs a starter"),
        ("lyon", "Lyon is a city in France on the Rhone")]
QUESTION = "capital of France"


def _chat(tmp_path: Path, threshold: float) -> dict[str, Any]:
    llm = ScriptedChatModel(default="An answer.")
    llm.replies.append('{"tool_name": "none"}')
    with Ragline(fake_settings(tmp_path, rag_relevance_threshold=threshold), llm=llm) as rl:
        async def turn() -> dict[str, Any]:
            return await rl.answers.chat(rl.owner(), QUESTION, collection="kb")

        return rl.call_sync(turn)


def test_chat_and_search_give_the_same_relevance_for_the_same_hit(tmp_path: Path) -> None:
    registry.register("embedders", "fake", FakeEmbedder)
    with Ragline(fake_settings(tmp_path)) as rl:
        me = rl.owner()
        rl.collections.create(me, "kb", embed={"provider": "fake"})
        rl.documents.add(me, "kb", [DocumentInput(t, {"title": i}, None, i) for i, t in BOOK])
        searched = {h.id: h.relevance for h in rl.search.query_sync(
            me, SearchRequest(collection="kb", query=QUESTION)).hits}
    top = max(r for r in searched.values() if r is not None)
    # the chat's threshold at exactly the top hit's search relevance: the RAG path
    body = _chat(tmp_path, top)
    assert body["path"] == "rag" and body["sources"]
    for source in body["sources"]:
        assert source["relevance"] == searched[source["id"]]  # the same number, bit for bit
    # just above it: no document is relevant enough
    assert _chat(tmp_path, math.nextafter(top, 2.0))["path"] != "rag"
