"""Search results people can use (issue 12): group_by, MMR, the overview prior, one
relevance scale in every mode, and per-leg scores (explain), through the HTTP API."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.facade import Ragline
from ragline.providers.registry import registry
from ragline.settings import Settings
from ragline.testing.fake_embedder import FakeEmbedder
from tests.api.helpers import local_client
from tests.ingestion_support import fake_of

# (id, text, source path): two lessons with two chunks each, their chapter README
# (which names every topic, so it matches broad queries best), and a near-duplicate pair.
DOCS = [
    ("readme", "Lidar sensors and motors, lidar sensors and wheels: this chapter",
     "ch1/README.md"),
    ("lidar-1", "Lidar sensors measure distance with laser pulses", "ch1/01-lidar.md"),
    ("lidar-2", "Lidar point clouds map obstacles around the robot", "ch1/01-lidar.md"),
    ("motor-1", "Motors turn wheels; encoders count how far the wheels turned",
     "ch1/02-motors.md"),
    ("motor-2", "Motor drivers set the wheel speed from a control loop", "ch1/02-motors.md"),
    ("cam", "Cameras see colour but not distance", "ch2/01-cameras.md"),
    ("cam-copy", "Cameras see colour but not distance.", "ch2/02-cameras-again.md"),
    ("cats", "Cats sleep on warm mats all afternoon", "misc/cats.md"),
]


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    registry.register("embedders", "fake", FakeEmbedder)
    with local_client(create_app(settings)) as c:
        r = c.post("/collections", json={"name": "q", "embed": {"provider": "fake"}})
        assert r.status_code == 201, r.text
        docs = [{"id": i, "text": t, "metadata": {"source_path": p,
                                                   "parent_doc_id": p.rsplit(".", 1)[0]}}
                for i, t, p in DOCS]
        r = c.post("/collections/q/documents", json={"documents": docs})
        assert r.status_code == 200, r.text
        yield c


def rl_of(client: TestClient) -> Ragline:
    rl: Ragline = client.app.state.ragline  # type: ignore[attr-defined]
    return rl


def search(client: TestClient, **body: Any) -> dict[str, Any]:
    r = client.post("/collections/q/search", json={"limit": 8, **body})
    assert r.status_code == 200, r.text
    return r.json()


def ids(body: dict[str, Any]) -> list[str]:
    return [r["id"] for r in body["results"]]


def source(r: dict[str, Any]) -> str:
    return str(r["metadata"]["parent_doc_id"])


# --- group_by ---------------------------------------------------------------------------


def test_group_by_source_returns_distinct_documents_with_their_other_hits(
    client: TestClient,
) -> None:
    flat = search(client, query="lidar sensors motors wheels", mode="dense", overviews="keep")
    body = search(client, query="lidar sensors motors wheels", mode="dense", overviews="keep",
                  group_by="source", group_size=2, limit=3)
    results = body["results"]
    assert len(results) == 3  # 'limit' counts groups
    assert len({source(r) for r in results}) == 3
    # each group's head is its best hit, in the flat ranking's order of sources
    flat_sources = list(dict.fromkeys(source(r) for r in flat["results"]))
    assert [source(r) for r in results] == flat_sources[:3]
    for r in results:
        assert all(source(g) == source(r) for g in r["group"])
        assert len(r["group"]) <= 1  # group_size 2: the head and at most one more
        assert all(g["score"] <= r["score"] for g in r["group"])
    lessons = {source(r): r for r in results}
    assert any(len(r["group"]) == 1 for r in lessons.values())  # a two-chunk lesson
    assert "group:source" in body["stages"]


def test_group_by_a_metadata_field(client: TestClient) -> None:
    body = search(client, query="cameras colour distance", mode="dense",
                  group_by="source_path", limit=8)
    paths = [r["metadata"]["source_path"] for r in body["results"]]
    assert len(paths) == len(set(paths)) == 6  # 8 chunks, 6 files
    assert all(r["group"] == [] for r in body["results"])  # group_size 1: no companions


# --- MMR --------------------------------------------------------------------------------


def test_mmr_replaces_a_near_duplicate_with_something_new(client: TestClient) -> None:
    plain = search(client, query="cameras colour distance", mode="dense", limit=2,
                   overviews="keep")
    assert set(ids(plain)) == {"cam", "cam-copy"}  # the copy adds nothing
    diverse = search(client, query="cameras colour distance", mode="dense", limit=2,
                     overviews="keep", mmr=0.5)
    copy = ({"cam", "cam-copy"} - {ids(plain)[0]}).pop()  # same words: either may lead
    assert ids(diverse)[0] == ids(plain)[0]
    assert copy not in ids(diverse) and "mmr:0.5" in diverse["stages"]
    # λ = 1 is the ranking itself
    same = search(client, query="cameras colour distance", mode="dense", limit=2,
                  overviews="keep", mmr=1.0)
    assert ids(same) == ids(plain)


def test_mmr_works_in_hybrid_and_with_group_by(client: TestClient) -> None:
    body = search(client, query="cameras colour distance lidar", mode="hybrid", limit=3,
                  mmr=0.6, group_by="source")
    assert len({source(r) for r in body["results"]}) == 3
    assert body["stages"][-2:] == ["mmr:0.6", "group:source"]


# --- the overview prior -----------------------------------------------------------------


def test_an_overview_yields_to_the_lesson_it_summarises(client: TestClient) -> None:
    kept = search(client, query="lidar sensors", mode="dense", overviews="keep")
    assert ids(kept)[0] == "readme"  # the README names the topic and wins on similarity
    body = search(client, query="lidar sensors", mode="dense")  # default: yield
    got = ids(body)
    assert got[0].startswith("lidar") and got.index("readme") > got.index(got[0])
    assert "overviews" in body["stages"]
    # the README's place changes, and its score with it: never above the hit above it
    # (issue 33: the list is in the order of the score the client sees); explain keeps
    # the stage's own number
    score = {r["id"]: r["score"] for r in kept["results"]}
    shown = [r["score"] for r in body["results"]]
    assert shown == sorted(shown, reverse=True)
    readme = next(r for r in body["results"] if r["id"] == "readme")
    assert readme["score"] < score["readme"]
    assert all(score[r["id"]] == pytest.approx(r["score"]) for r in body["results"]
               if r["id"] != "readme")
    why = search(client, query="lidar sensors", mode="dense", explain=True)["results"]
    assert next(r for r in why if r["id"] == "readme")["scores"]["own"] == \
        pytest.approx(score["readme"])
    # nothing it summarises matched: it keeps first place
    cats = search(client, query="sensors motors cats", mode="sparse", limit=1,
                  where={"source_path": {"$in": ["ch1/README.md", "misc/cats.md"]}})
    assert ids(cats) == ["readme"]


# --- one relevance scale ----------------------------------------------------------------

QUERY = "lidar cameras distance"


def test_relevance_is_the_same_number_in_every_mode(client: TestClient) -> None:
    by_mode = {m: {r["id"]: r for r in search(client, query=QUERY, mode=m)["results"]}
               for m in ("dense", "sparse", "hybrid")}
    dense = by_mode["dense"]
    for mode, hits in by_mode.items():
        for i, r in hits.items():
            assert 0.0 <= r["relevance"] <= 1.0, mode
            assert r["relevance"] == pytest.approx(dense[i]["relevance"], abs=1e-6), mode
    # dense: relevance is 0.5 + cosine/2, so it falls down the ranking like the score
    rows = search(client, query=QUERY, mode="dense", overviews="keep")["results"]
    rel = [r["relevance"] for r in rows]
    assert rel == sorted(rel, reverse=True)
    assert all(r["relevance"] == pytest.approx(0.5 + r["score"] / 2, abs=1e-5) for r in rows)


@pytest.mark.parametrize("threshold", [0.55, 0.65, 0.75])
def test_relevance_threshold_keeps_the_same_hits_in_every_mode(
    client: TestClient, threshold: float,
) -> None:
    kept: dict[str, set[str]] = {}
    for mode in ("dense", "sparse", "hybrid"):
        every = search(client, query=QUERY, mode=mode)["results"]
        body = search(client, query=QUERY, mode=mode, relevance_threshold=threshold)
        assert all(r["relevance"] >= threshold for r in body["results"])
        assert set(ids(body)) == {r["id"] for r in every if r["relevance"] >= threshold}
        kept[mode] = set(ids(body))
    # hybrid sees what dense sees; sparse only documents sharing a word with the query
    assert kept["hybrid"] == kept["dense"]
    assert kept["sparse"] <= kept["dense"]


def test_relevance_threshold_needs_a_value_on_the_scale(client: TestClient) -> None:
    r = client.post("/collections/q/search", json={"query": "x", "relevance_threshold": 1.5})
    assert r.status_code == 400 and "relevance_threshold" in r.text


# --- explain: raw per-leg scores --------------------------------------------------------


def test_explain_reports_the_raw_score_of_each_leg(client: TestClient) -> None:
    dense = {r["id"]: r["score"]  # the raw scores: no stage moves a hit
             for r in search(client, query=QUERY, mode="dense", overviews="keep")["results"]}
    sparse = {r["id"]: r["score"]
              for r in search(client, query=QUERY, mode="sparse", overviews="keep")["results"]}
    body = search(client, query=QUERY, mode="hybrid", explain=True, overviews="keep")
    assert body["results"]
    for r in body["results"]:
        legs = r["scores"]
        assert set(legs) == {"dense", "sparse", "fused"}
        assert legs["fused"] == pytest.approx(r["score"])
        assert legs["dense"] == pytest.approx(dense[r["id"]], abs=1e-5)
        if r["id"] in sparse:
            assert legs["sparse"] == pytest.approx(sparse[r["id"]], rel=1e-5)
        else:
            assert legs["sparse"] is None  # not among the BM25 candidates
    # dense and sparse modes report their own leg; no 'scores' unless asked
    one = search(client, query=QUERY, mode="dense", explain=True, limit=1)["results"][0]
    assert one["scores"] == {"dense": pytest.approx(one["score"])}
    assert "scores" not in search(client, query=QUERY, mode="dense", limit=1)["results"][0]


def test_explain_shows_boosts(client: TestClient) -> None:
    body = search(client, query=QUERY, mode="dense", explain=True,
                  boost={"numeric_fields": {"bonus": 0.5}})
    assert all("boost" in r["scores"] for r in body["results"])
    for r in body["results"]:  # 'own': before the overview prior lowered it (issue 33)
        ranked = r["scores"].get("own", r["score"])
        assert ranked == pytest.approx(r["scores"]["dense"] + r["scores"]["boost"])


# --- validation -------------------------------------------------------------------------


@pytest.mark.parametrize("body", [{"mmr": 1.5}, {"mmr": -0.1}, {"group_size": 0},
                                  {"group_by": ""}, {"overviews": "hide"}])
def test_bad_shaping_options_are_refused(client: TestClient, body: dict[str, Any]) -> None:
    r = client.post("/collections/q/search", json={"query": "lidar", **body})
    assert r.status_code == 400 and r.json()["error"] == "invalid_request", r.text


def test_embeddings_stay_out_of_results_unless_asked(client: TestClient) -> None:
    body = search(client, query=QUERY, mode="hybrid", mmr=0.5, group_by="source",
                  group_size=2)
    for r in body["results"]:
        assert "embedding" not in r and all("embedding" not in g for g in r["group"])
    asked = search(client, query=QUERY, mode="dense", include_embeddings=True, limit=1)
    vec = np.asarray(asked["results"][0]["embedding"])
    assert vec.shape == (16,)


# --- relevance: false ---------------------------------------------------------------------


def test_without_relevance_sparse_search_embeds_no_query(client: TestClient) -> None:
    fake = fake_of(rl_of(client), "q")
    with_rel = search(client, query=QUERY, mode="sparse")["results"]
    calls = fake.calls
    body = search(client, query=QUERY, mode="sparse", relevance=False)
    assert fake.calls == calls  # the query was not embedded
    assert [r["score"] for r in body["results"]] == [r["score"] for r in with_rel]
    assert sorted((r["score"], r["id"]) for r in body["results"]) == \
        sorted((r["score"], r["id"]) for r in with_rel)  # ties in either order
    assert with_rel and all("relevance" not in r for r in body["results"])
    # the default still embeds it, for the one relevance scale
    search(client, query="motors wheels", mode="sparse")
    assert fake.calls == calls + 1


def test_without_relevance_dense_and_hybrid_rank_the_same(client: TestClient) -> None:
    for mode in ("dense", "hybrid"):
        every = search(client, query=QUERY, mode=mode)["results"]
        bare = search(client, query=QUERY, mode=mode, relevance=False)["results"]
        # the same hits and scores in the same score order (equal scores, such as the
        # near-duplicate pair's, may come in either order)
        assert [r["score"] for r in bare] == [r["score"] for r in every]
        assert sorted((r["score"], r["id"]) for r in bare) == \
            sorted((r["score"], r["id"]) for r in every)
        assert all("relevance" not in r for r in bare)
        assert all("relevance" in r for r in every)
    # explain still reports the dense leg (the hits' vectors come back for it)
    legs = search(client, query=QUERY, mode="hybrid", relevance=False, explain=True)["results"]
    assert legs and all(r["scores"]["dense"] is not None for r in legs)


def test_sparse_mmr_without_relevance_still_diversifies(client: TestClient) -> None:
    fake = fake_of(rl_of(client), "q")
    calls = fake.calls
    body = search(client, query="cameras colour distance", mode="sparse", mmr=0.3,
                  relevance=False)
    assert fake.calls == calls  # MMR compares the hits' vectors, not the query's
    assert body["results"] and all("relevance" not in r for r in body["results"])
    assert "cam-copy" not in ids(body)[:2] or "cam" not in ids(body)[:2]


def test_relevance_threshold_needs_relevance(client: TestClient) -> None:
    r = client.post("/collections/q/search", json={
        "query": QUERY, "relevance": False, "relevance_threshold": 0.6})
    assert r.status_code == 400
    assert r.json()["message"] == (
        "'relevance_threshold' compares each hit's relevance, which 'relevance': false "
        "turns off; drop one of them")


# --- ranking honesty (issue 33) ---------------------------------------------------------


def test_hits_come_in_the_order_of_their_score_with_every_option(client: TestClient) -> None:
    """Every mode with every combination of the overview prior, boosts, MMR, grouping and
    rerank: the results (and each group's companions) come in descending ``score``."""
    import itertools

    from ragline.providers.rerankers.cross_encoder import CrossEncoderReranker, ModelSource
    from ragline.testing.cross_encoder import tiny_cross_encoder_dir

    rl_of(client).services.reranker.current = CrossEncoderReranker.from_source(
        ModelSource(str(tiny_cross_encoder_dir()), "--cross-encoder-path"))
    tags = {"cats": ["lidar", "motors"], "motor-2": ["lidar"], "cam-copy": ["lidar"]}
    docs = [{"id": i, "text": t, "metadata": {"source_path": p, "tags": tags.get(i, []),
                                               "parent_doc_id": p.rsplit(".", 1)[0]}}
            for i, t, p in DOCS]
    r = client.post("/collections/q/documents", json={"documents": docs})  # upsert the tags
    assert r.status_code == 200, r.text
    options: dict[str, list[dict[str, Any]]] = {
               "overviews": [{"overviews": "keep"}, {"overviews": "yield"}],
               "boost": [{}, {"boost": {"query_tags": ["lidar", "motors"], "tag_weight": 5}}],
               "mmr": [{}, {"mmr": 0.3}],
               "group": [{}, {"group_by": "source", "group_size": 2}],
               "rerank": [{}, {"rerank": True, "rerank_candidates": 8}]}
    reordered: set[str] = set()
    for mode in ("dense", "sparse", "hybrid"):
        for combo in itertools.product(*options.values()):
            body: dict[str, Any] = {k: v for part in combo for k, v in part.items()}
            for query in ("lidar sensors", "lidar sensors motors wheels cameras"):
                got = search(client, query=query, mode=mode, explain=True, **body)
                rows = got["results"]
                scores = [r["score"] for r in rows]
                assert scores == sorted(scores, reverse=True), (mode, body, got)
                for r in rows:
                    inner = [r["score"], *(g["score"] for g in r.get("group") or [])]
                    assert inner == sorted(inner, reverse=True), (mode, body, r)
                    if "own" in r["scores"]:  # lowered to keep the order: never raised
                        reordered.add(mode)
                        assert r["scores"]["own"] > r["score"]
    assert reordered == {"dense", "sparse", "hybrid"}  # the rule was exercised everywhere
