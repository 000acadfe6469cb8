"""Shared corpora over HTTP with real keys (issue 33 item 1).

An admin publishes documents to the shared corpus (tenant ``*``, ``X-Ragline-Tenant: *``);
``alice`` and ``bob`` each upload their own. Through every read path each user sees the
shared records and its own, never the other's; user keys cannot change shared records;
a collection's ``tenants`` list still decides who reads it at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.facade import Ragline
from ragline.testing.cross_encoder import tiny_cross_encoder_dir
from ragline.testing.scripted_llm import ScriptedChatModel
from tests.api.helpers import Keyed, keyed_client
from tests.ingestion_support import fake_settings

SHARED = {"X-Ragline-Tenant": "*"}
BOOK = "# Grippers\n\nThe shared book explains gripper torque calibration in detail.\n"


class World(Keyed):
    def __init__(self, keyed: Keyed, llm: ScriptedChatModel) -> None:
        super().__init__(keyed.c, keyed.keys)
        self.llm = llm

    def ids(self, who: str, **params: str) -> set[str]:
        r = self.get(who, "/collections/kb/documents", params={"limit": "1000", **params})
        assert r.status_code == 200, r.text
        return {d["id"] for d in r.json()["documents"]}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    settings = fake_settings(tmp_path, auth="on", default_collection="kb",
                             cross_encoder_path=tiny_cross_encoder_dir())
    llm = ScriptedChatModel()
    rl = Ragline(settings, llm=llm).start()
    try:
        with keyed_client(create_app(ragline=rl)) as keyed:
            w = World(keyed, llm)
            assert w.post("admin", "/collections", {"name": "kb", "embed": {"provider": "fake"}}
                          ).status_code == 201
            # the admin publishes: a document and an ingested text, to tenant '*'
            r = w.post("admin", "/collections/kb/documents", {"documents": [
                {"id": "book-doc", "text": "shared gripper manual chapter",
                 "metadata": {"owner": "shared", "n": 1}}]}, **SHARED)
            assert r.status_code == 200, r.text
            r = w.post("admin", "/api/rag/ingest/text", {"text": BOOK, "title": "book"}, **SHARED)
            assert r.status_code == 201, r.text
            for who, words in (("alice", "alpha secret gripper"),
                               ("bob", "beta private gripper")):
                r = w.post(who, "/api/rag/ingest/text", {"text": f"# {who}\n\n{words} notes",
                                                          "title": f"{who} notes"})
                assert r.status_code == 201, r.text
                r = w.post(who, "/collections/kb/documents", {"documents": [
                    {"id": f"{who}-doc", "text": f"{words} document",
                     "metadata": {"owner": who, "n": 1}}]})
                assert r.status_code == 200, r.text
            yield w
    finally:
        rl.close()


def shared_ids(w: World) -> set[str]:
    r = w.c.get("/collections/kb/documents", headers=w.h("admin", **SHARED),
                params={"limit": "1000"})
    return {d["id"] for d in r.json()["documents"]}


def test_each_user_lists_the_shared_corpus_and_its_own(world: World) -> None:
    shared = shared_ids(world)
    assert "book-doc" in shared and len(shared) == 2  # the document and the text's chunk
    alice, bob = world.ids("alice"), world.ids("bob")
    assert shared <= alice and shared <= bob
    assert "alice-doc" in alice and "bob-doc" not in alice
    assert "bob-doc" in bob and "alice-doc" not in bob
    assert not (alice - shared) & (bob - shared)  # nothing of the other's
    # counts: the collection view, the listing's total and /info agree
    view = world.get("alice", "/collections/kb").json()
    assert view["count"] == len(alice)
    assert world.get("alice", "/info").json()["total_documents"] == len(alice)
    # where and metadata values merge the same way
    mine = world.get("alice", "/collections/kb/documents",
                     params={"where": '{"n": 1}'}).json()["documents"]
    assert {d["id"] for d in mine} == {"book-doc", "alice-doc"}
    values = world.get("alice", "/collections/kb/metadata-values",
                       params={"field": "owner"}).json()["values"]
    assert values == ["alice", "shared"]
    # a shared record by id; the other user's is a 404
    r = world.get("alice", "/collections/kb/documents/book-doc")
    assert r.status_code == 200 and "shared gripper manual" in r.text
    assert r.json()["shared"] is True  # marked; the caller's own records carry no mark
    assert "shared" not in world.get("alice", "/collections/kb/documents/alice-doc").json()
    r = world.get("alice", "/collections/kb/documents/bob-doc")
    assert r.status_code == 404 and "beta" not in r.text


def book_source(w: World) -> str:
    r = w.c.get("/collections/kb/sources", headers=w.h("admin", **SHARED))
    [src] = r.json()["sources"]
    assert src["shared"] is True
    return str(src["source_id"])


def test_every_search_mode_and_option_merges_shared_and_own(world: World) -> None:
    bodies: list[dict[str, Any]] = [
        {"mode": mode} for mode in ("dense", "sparse", "hybrid")]
    bodies += [{"mode": "hybrid", "group_by": "source_id"},
               {"mode": "hybrid", "expand": "neighbors"},
               {"mode": "hybrid", "expand": "section"},
               {"mode": "dense", "mmr": 0.5}, {"mode": "hybrid", "rerank": True},
               {"mode": "sparse", "explain": True}]
    for body in bodies:
        for url in ("/collections/kb/search", "/search"):
            for who, other in (("alice", "beta"), ("bob", "alpha")):
                r = world.post(who, url, {"query": "gripper", "limit": 50, **body})
                assert r.status_code == 200, (body, r.text)
                text = r.text
                assert "shared gripper manual" in text or "torque calibration" in text, body
                assert f"{who}" in text.lower() or body.get("group_by"), body
                assert other not in text, (who, body, url)
                if body.get("rerank"):  # the cross-encoder really ran
                    assert any("rerank" in st for st in r.json()["stages"]), r.json()


def test_context_lesson_and_sources_reach_the_shared_corpus(world: World) -> None:
    hits = world.post("alice", "/collections/kb/search",
                      {"query": "torque calibration", "mode": "sparse", "limit": 5}).json()
    book = next(h for h in hits["results"] if "torque" in h["text"])
    source = book_source(world)
    for who in ("alice", "bob"):
        r = world.get(who, f"/context/{book['id']}")
        assert r.status_code == 200 and "torque calibration" in r.text, r.text
        r = world.get(who, f"/lesson/{source}")
        assert r.status_code == 200 and "torque calibration" in r.text, r.text
        listed = world.get(who, "/collections/kb/sources").json()
        by_id = {s["source_id"]: s for s in listed["sources"]}
        assert by_id[source]["shared"] is True
        [own] = [s for s in by_id.values() if not s["shared"]]
        assert who in world.get(who, f"/lesson/{own['source_id']}").text
        assert listed["total"] == len(by_id) == 2
        detail = world.get(who, f"/collections/kb/sources/{source}").json()
        assert detail["shared"] is True and detail["chunks_in_store"] >= 1
    alices = [s["source_id"] for s in world.get("alice", "/collections/kb/sources").json()[
        "sources"] if not s["shared"]]
    assert "alpha" not in world.get("bob", f"/lesson/{alices[0]}").text
    assert world.get("bob", f"/collections/kb/sources/{alices[0]}").status_code == 404


def test_chat_retrieves_shared_and_own_never_another_users(world: World) -> None:
    for who, mine, other in (("alice", "alpha", "beta"), ("bob", "beta", "alpha")):
        for message, want in (("shared gripper manual chapter", "book-doc"),
                              (f"{mine} {'secret' if mine == 'alpha' else 'private'} "
                               "gripper document", f"{who}-doc")):
            world.llm.replies += ['{"tool_name": "none"}', "An answer."]
            r = world.post(who, "/api/chat", {"message": message, "stream": False})
            assert r.status_code == 200, r.text
            sources = [s["id"] for s in r.json()["sources"]]
            assert want in sources, (who, message, r.text)
            assert f"{'bob' if who == 'alice' else 'alice'}-doc" not in sources
            assert other not in world.llm.calls[-1].prompt
        # the tool path: the model asks the search tool, which reads the same scope
        world.llm.replies += ['{"tool_name": "search_knowledge_base", "arguments": '
                              '{"query": "gripper", "collection": "kb"}}', "Tool answer."]
        r = world.post(who, "/api/chat", {"message": "what do the notes say?",
                                          "collection": "kb", "stream": False})
        body = r.json()
        assert r.status_code == 200 and body["path"] == "tool", r.text
        ids = {s["id"] for s in body["sources"]}
        assert "book-doc" in ids and f"{who}-doc" in ids, ids
        assert not ids & {"alice-doc", "bob-doc"} - {f"{who}-doc"}
        assert other not in world.llm.calls[-1].prompt


def test_user_keys_never_change_shared_records(world: World) -> None:
    shared = shared_ids(world)
    # delete by id, by where, a source, emptying: only the user's own records go
    r = world.c.request("DELETE", "/collections/kb/documents", headers=world.h("alice"),
                        json={"ids": sorted(shared)})
    assert r.status_code == 200 and r.json()["count_deleted"] == 0
    r = world.c.request("DELETE", "/collections/kb/documents", headers=world.h("alice"),
                        json={"where": {"owner": "shared"}})
    assert r.json()["count_deleted"] == 0
    assert world.c.delete(f"/collections/kb/sources/{book_source(world)}",
                          headers=world.h("alice")).status_code == 404
    r = world.c.delete("/collections/kb/documents/all", headers=world.h("alice"))
    assert r.status_code == 200 and r.json()["count_deleted"] >= 1
    assert world.ids("alice") == shared
    # writing a shared record's id makes alice's own record; the shared one stays
    r = world.post("alice", "/collections/kb/documents", {"documents": [
        {"id": "book-doc", "text": "alice's own version", "metadata": {"owner": "alice"}}]})
    assert r.status_code == 200
    assert "alice's own" in world.get("alice", "/collections/kb/documents/book-doc").text
    assert "shared gripper manual" in world.get(
        "bob", "/collections/kb/documents/book-doc").text
    assert shared_ids(world) == shared
    # a search answers one hit per id: alice's own version, bob the shared one (marked)
    for who, want, mark in (("alice", "alice's own", None), ("bob", "shared gripper", True)):
        hits = [h for h in world.post(who, "/collections/kb/search", {
            "query": "gripper manual chapter version", "limit": 50}).json()["results"]
            if h["id"] == "book-doc"]
        assert len(hits) == 1 and want in hits[0]["text"], (who, hits)
        assert hits[0].get("shared") is mark
    listed = world.get("alice", "/collections/kb/documents",
                       params={"where": '{"owner": {"$in": ["alice", "shared"]}}'}).json()
    assert [d["id"] for d in listed["documents"]].count("book-doc") == 2
    # a user key cannot act as '*'; no key is made for '*'
    r = world.c.get("/collections/kb/documents", headers=world.h("bob", **SHARED))
    assert r.status_code == 403
    r = world.post("bob", "/collections/kb/documents", {"documents": [
        {"id": "x", "text": "sneaky"}]}, **SHARED)
    assert r.status_code == 403
    r = world.post("admin", "/api/keys", {"role": "user", "tenant": "*"})
    assert r.status_code == 400 and "shared corpus" in r.json()["message"]
    r = world.c.get("/collections/kb", headers=world.h("admin", **SHARED,
                                                       **{"X-Ragline-Role": "user"}))
    assert r.status_code == 403


def test_an_admin_as_star_sees_the_shared_corpus_alone(world: World) -> None:
    shared = shared_ids(world)
    assert "alice-doc" not in shared and "bob-doc" not in shared
    r = world.c.get("/collections/kb", headers=world.h("admin", **SHARED))
    assert r.json()["count"] == len(shared)
    # and deletes shared records
    r = world.c.request("DELETE", "/collections/kb/documents",
                        headers=world.h("admin", **SHARED), json={"ids": ["book-doc"]})
    assert r.json()["count_deleted"] == 1
    assert "book-doc" not in world.ids("alice") and "alice-doc" in world.ids("alice")


def test_the_tenants_list_still_decides_who_reads_a_collection(world: World) -> None:
    r = world.c.put("/collections/kb/metadata", headers=world.h("admin"),
                    params={"merge": "true"}, json={"metadata": {"tenants": ["alice"]}})
    assert r.status_code == 200, r.text
    assert world.get("alice", "/collections/kb").status_code == 200
    assert "book-doc" in world.ids("alice")
    for url in ("/collections/kb", "/collections/kb/documents/book-doc",
                f"/lesson/{book_source(world)}",
                "/collections/kb/sources"):
        assert world.get("bob", url).status_code == 404, url
    r = world.post("bob", "/collections/kb/search", {"query": "gripper"})
    assert r.status_code == 404


def test_the_webhook_publishes_to_the_tenant_it_is_configured_for(tmp_path: Path) -> None:
    """``RAGLINE_GITHUB_TENANT='*'``: a push lands in the shared corpus every user reads."""
    from tests.api.test_ingestion_webhook import SECRET, Repos, post, push_payload
    from tests.ingestion_support import SENSING

    repos = Repos(tmp_path)
    settings = fake_settings(tmp_path, auth="on", github_webhook_secret=SECRET,
                             github_repo_path=repos.clone, github_docs_path="docs",
                             github_tenant="*", default_collection="book")
    with TestClient(create_app(settings), base_url="http://localhost") as c:
        rl: Ragline = c.app.state.ragline  # type: ignore[attr-defined]
        alice = rl.keys.create(rl.owner(), "user", "alice")[1]
        r = post(c, push_payload([f"docs/{SENSING}"]))
        assert r.status_code == 202, r.text
        job = rl.ingestion.wait(rl.owner(), r.json()["job_id"], timeout=60)
        assert job.status == "succeeded" and job.tenant == "*"
        docs = c.get("/collections/book/documents",
                     headers={"Authorization": f"Bearer {alice}"}).json()["documents"]
        assert docs and all(d.get("shared") is True for d in docs)
