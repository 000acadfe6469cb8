"""Result shaping as pure functions: the overview prior, group_by, MMR (issue 12)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ragline.core.types import ScoredRecord
from ragline.services.search.diversify import (
    Diversity,
    group,
    group_key,
    mmr,
    overview_folder,
    overviews_yield,
)


def hit(i: str, score: float, path: str | None = None, **meta: Any) -> ScoredRecord:
    md: dict[str, Any] = dict(meta)
    if path is not None:
        md.update(source_path=path, parent_doc_id=path.rsplit(".", 1)[0])
    return ScoredRecord(i, f"text {i}", md, score)


def ids(hits: list[ScoredRecord]) -> list[str]:
    return [h.id for h in hits]


def test_overview_folder_from_the_name_or_the_metadata_flag() -> None:
    assert overview_folder({"source_path": "m1/c1/README.md"}) == "m1/c1"
    assert overview_folder({"source_path": "README.md"}) == ""
    assert overview_folder({"source_path": "m1/index.mdx"}) == "m1"
    assert overview_folder({"source_path": "m1/01-lesson.md"}) is None
    assert overview_folder({"source_path": "m1/01-lesson.md", "overview": True}) == "m1"
    assert overview_folder({"source_path": "m1/README.md", "overview": False}) is None
    assert overview_folder({"source_path": "https://x.org/README.md"}) is None
    assert overview_folder({}) is None


def test_an_overview_yields_to_the_best_page_it_summarises() -> None:
    hits = [hit("ov", 0.9, "m1/c1/README.md"), hit("other", 0.8, "m2/01-x.md"),
            hit("lesson", 0.7, "m1/c1/01-a.md"), hit("lesson2", 0.6, "m1/c1/02-b.md")]
    out = overviews_yield(hits, window=10)
    assert ids(out) == ["other", "lesson", "ov", "lesson2"]
    assert [h.score for h in out] == [0.8, 0.7, 0.9, 0.6]  # a reorder: scores untouched


def test_an_overview_keeps_its_rank_without_a_summarised_page_in_the_window() -> None:
    hits = [hit("ov", 0.9, "m1/README.md"), hit("a", 0.8, "m2/01.md"),
            hit("b", 0.7, "m2/02.md"), hit("lesson", 0.6, "m1/c1/01.md")]
    assert ids(overviews_yield(hits, window=3)) == ["ov", "a", "b", "lesson"]
    assert ids(overviews_yield(hits, window=4)) == ["a", "b", "lesson", "ov"]
    # a sibling folder whose name starts alike is not summarised by it
    sib = [hit("ov", 0.9, "m1/README.md"), hit("x", 0.8, "m10/01.md")]
    assert ids(overviews_yield(sib, window=10)) == ["ov", "x"]


def test_nested_and_root_overviews_all_yield_to_the_page() -> None:
    hits = [hit("root", 0.95, "README.md"), hit("mod", 0.9, "m1/README.md"),
            hit("chap", 0.85, "m1/c1/README.md"), hit("lesson", 0.5, "m1/c1/01.md")]
    assert ids(overviews_yield(hits, window=10)) == ["lesson", "root", "mod", "chap"]
    # an overview below its page stays where it is
    below = [hit("lesson", 0.9, "m1/01.md"), hit("ov", 0.8, "m1/README.md")]
    assert ids(overviews_yield(below, window=10)) == ["lesson", "ov"]


def test_group_by_source_keeps_the_best_hit_per_document_and_its_companions() -> None:
    hits = [hit("a1", 0.9, "a.md"), hit("a2", 0.8, "a.md"), hit("b1", 0.7, "b.md"),
            hit("a3", 0.6, "a.md"), hit("c1", 0.5, "c.md"), hit("b2", 0.4, "b.md")]
    groups = group(hits, "source", size=2, limit=2)
    assert [(g.key, ids(g.hits)) for g in groups] == [("a", ["a1", "a2"]), ("b", ["b1", "b2"])]
    assert [g.hits[0].id for g in group(hits, "source", size=1, limit=10)] == ["a1", "b1", "c1"]


def test_group_by_a_metadata_field_and_hits_without_it() -> None:
    hits = [hit("x", 0.9, module="m1"), hit("y", 0.8, module="m1"), hit("z", 0.7),
            hit("w", 0.6), hit("v", 0.5, module="m2")]
    assert [ids(g.hits) for g in group(hits, "module", size=3, limit=10)] == [
        ["x", "y"], ["z"], ["w"], ["v"]]
    assert group_key(hit("n", 1.0), "source") == "n"  # no source metadata: the chunk itself


def test_mmr_prefers_novelty_over_a_near_duplicate() -> None:
    hits = [hit("a", 0.90), hit("a_copy", 0.89), hit("b", 0.70), hit("c", 0.10)]
    vecs = np.array([[1, 0, 0], [0.999, 0.01, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float32)
    assert ids(mmr(hits, vecs, 1.0, 4)) == ["a", "a_copy", "b", "c"]  # λ=1: the ranking
    # 0.5·0.99 - 0.5·1.0 < 0.5·0 - 0.5·0: even an orthogonal weak hit beats the copy
    assert ids(mmr(hits, vecs, 0.5, 3)) == ["a", "b", "c"]
    assert ids(mmr(hits, vecs, 0.9, 3)) == ["a", "a_copy", "b"]
    assert ids(mmr(hits, vecs, 0.0, 2))[0] == "a"  # the first pick is always the best
    assert mmr([], np.zeros((0, 3)), 0.5, 3) == []


@pytest.mark.parametrize("lam", [0.3, 0.5, 0.7])
def test_mmr_returns_distinct_hits_up_to_the_limit(lam: float) -> None:
    rng = np.random.default_rng(0)
    hits = [hit(f"h{i}", 1.0 - i / 20) for i in range(20)]
    out = mmr(hits, rng.normal(size=(20, 8)), lam, 7)
    assert len(out) == 7 and len(set(ids(out))) == 7 and out[0].id == "h0"


def test_mmr_respects_a_reordering_that_did_not_rescore() -> None:
    # the overview prior moved "ov" (0.9) below "lesson" (0.8) without a new score
    hits = [hit("lesson", 0.8), hit("ov", 0.9), hit("other", 0.1)]
    vecs = np.eye(3, dtype=np.float32)
    assert ids(mmr(hits, vecs, 0.7, 3)) == ["lesson", "ov", "other"]


# --- diversity: asides and sources per window (issue 36) ------------------------------------


def test_asides_wait_for_the_next_window_while_lesson_hits_remain() -> None:
    hits = [hit("a1", 0.9, "m/c/01-a.md", heading_path=["Intro"]),
            hit("try", 0.8, "m/c/01-a.md", heading_path=["Try With AI"]),
            hit("ov", 0.75, "m/c/README.md"),
            hit("ex", 0.7, "m/c/02-b.md", heading_path=["Exercise: Add a camera"]),
            hit("a2", 0.6, "m/c/01-a.md", heading_path=["Motors", "PWM"]),
            hit("b1", 0.5, "m/c/02-b.md", heading_path=["Sensors"]),
            hit("b2", 0.4, "m/c/02-b.md", heading_path=["Filters"]),
            hit("b3", 0.3, "m/c/02-b.md", heading_path=["Filters"])]
    out = Diversity(window=5).apply(hits)
    # the first window holds the five lesson hits; the asides follow in their order
    assert ids(out) == ["a1", "a2", "b1", "b2", "b3", "try", "ov", "ex"]
    assert ids(Diversity(asides=1, window=5).apply(hits)) == [
        "a1", "try", "a2", "b1", "b2", "ov", "b3", "ex"]
    # quotas that cannot bind change nothing
    assert ids(Diversity(asides=5, window=5).apply(hits)) == ids(hits)
    # with the overview prior off ('keep'), an overview page is no aside
    assert ids(Diversity(window=5).apply(hits, overviews=False))[:5] == [
        "a1", "ov", "a2", "b1", "b2"]


def test_an_overview_is_an_aside_only_next_to_a_page_it_summarises() -> None:
    d = Diversity()
    lesson = {"source_path": "m/c/01-a.md"}
    assert d.is_aside({"source_path": "m/c/README.md"}, summarised=[lesson])
    assert not d.is_aside({"source_path": "m/c/README.md"}, summarised=[])
    assert not d.is_aside({"source_path": "m/README.md"}, summarised=[{"source_path": "x/1.md"}])
    assert d.is_aside({"heading_path": ["Guided Practice", "Checkpoint: Your Turn"]})
    assert not d.is_aside({"heading_path": ["Checkpointing a model"]})
    assert not d.is_aside({"heading_path": ["Try With AI"], "aside": False})
    assert Diversity(aside_sections=["Quiz"]).is_aside({"heading_path": ["Quiz"]})
    assert not Diversity(aside_sections=["Quiz"]).is_aside({"heading_path": ["Try With AI"]})


def test_an_overview_ranked_first_is_the_answer_and_keeps_its_chunks() -> None:
    hits = [hit("ov1", 0.9, "m/c/README.md"), hit("ov2", 0.8, "m/c/README.md"),
            hit("a1", 0.7, "m/c/01-a.md"), hit("try", 0.6, "m/c/01-a.md",
                                              heading_path=["Try With AI"]),
            hit("a2", 0.5, "m/c/01-a.md")]
    assert ids(Diversity(window=3).apply(hits)) == ["ov1", "ov2", "a1", "a2", "try"]


def test_at_most_n_hits_per_source_in_each_window() -> None:
    hits = [hit(f"a{i}", 1 - i / 10, "a.md") for i in range(4)] + [
        hit("b0", 0.5, "b.md"), hit("c0", 0.4, "c.md")]
    out = Diversity(per_source=2, window=4).apply(hits)
    assert ids(out) == ["a0", "a1", "b0", "c0", "a2", "a3"]
    # too few other hits: the window is filled in rank order
    few = hits[:4]
    assert ids(Diversity(per_source=1, window=3).apply(few)) == ["a0", "a1", "a2", "a3"]


def test_past_the_limit_the_rest_keeps_its_order() -> None:
    hits = [hit("try", 0.9, "a.md", heading_path=["Try With AI"])] + [
        hit(f"a{i}", 0.8 - i / 100, "a.md") for i in range(6)] + [
        hit("ex", 0.1, "b.md", heading_path=["Exercises"]), hit("b", 0.05, "b.md")]
    full = Diversity(window=2).apply(hits)
    assert ids(full) == ["a0", "a1", "a2", "a3", "a4", "a5", "b", "try", "ex"]
    assert ids(Diversity(window=2).apply(hits, limit=2)) == [
        "a0", "a1", "try", "a2", "a3", "a4", "a5", "ex", "b"]
