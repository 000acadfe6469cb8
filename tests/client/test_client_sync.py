"""``ragline.client.Client`` against a live ``ragline serve``: every operation, its typed
answer, and the errors of the ``ragline.errors`` tree it raises."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from ragline import errors
from ragline.client import Client, models
from ragline.testing.server import free_port
from tests.client.conftest import Served

VEC = [[1.0, 0.0, 0.0], [0.9, 0.1, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]


def admin(served: Served) -> Client:
    return Client(served.url, api_key=served.admin_key, timeout=60)


def test_status_endpoints(served: Served) -> None:
    with admin(served) as rl:
        health = rl.health()
        assert health.status == "healthy" and health.cross_encoder is not None
        assert rl.version().name == "ragline"
        info = rl.info()
        assert isinstance(info, models.Info) and info.total_documents >= 0
        assert "stores" in rl.providers() or rl.providers()


def test_collections_roundtrip_and_errors(served: Served, name: str) -> None:
    with admin(served) as rl:
        made = rl.create_collection(name, {"owner": "docs"})
        assert isinstance(made, models.Collection)
        assert (made.name, made.metadata, made.count) == (name, {"owner": "docs"}, 0)
        assert name in [c.name for c in rl.list_collections()]
        with pytest.raises(errors.CollectionExists) as dup:
            rl.create_collection(name)
        assert dup.value.status == 409 and dup.value.code == "collection_exists"
        merged = rl.update_collection_metadata(name, {"team": "a"}, merge=True)
        assert merged.metadata == {"owner": "docs", "team": "a"}
        replaced = rl.update_collection_metadata(name, {"team": "b"})
        assert rl.get_collection(name).metadata == replaced.metadata == {"team": "b"}
        assert rl.delete_collection(name) == name
        with pytest.raises(errors.CollectionNotFound) as gone:
            rl.get_collection(name)
        assert name in gone.value.message and gone.value.details["status"] == 404


def test_documents_and_vector_search(served: Served, name: str) -> None:
    with admin(served) as rl:
        rl.create_collection(name)
        added = rl.add_documents(name, [
            {"id": f"d{i}", "text": f"text {i}", "metadata": {"n": i, "kind": "even" if
                                                             i % 2 == 0 else "odd"},
             "embedding": v} for i, v in enumerate(VEC)])
        assert added.ids == ["d0", "d1", "d2", "d3"] and added.count == 4
        page = rl.list_documents(name, where={"kind": "even"}, limit=10)
        assert isinstance(page, models.DocumentPage)
        assert sorted(d.id for d in page.documents) == ["d0", "d2"] and page.total == 2
        doc = rl.get_document(name, "d1")
        assert (doc.text, doc.metadata["n"]) == ("text 1", 1)
        assert sorted(rl.metadata_values(name, "kind").values) == ["even", "odd"]
        found = rl.search(name, embedding=[1.0, 0.0, 0.0], limit=2)
        assert [h.id for h in found.results] == ["d0", "d1"]
        assert found.results[0].score is not None and found.took_ms >= 0
        filtered = rl.search(name, embedding=[1.0, 0.0, 0.0], where={"kind": "odd"})
        assert filtered.results[0].id == "d1"
        with pytest.raises(errors.InvalidInput) as bad:
            rl.search(name, embedding=[1.0, 0.0])  # wrong dimension
        assert bad.value.status == 400
        with pytest.raises(errors.DocumentNotFound):
            rl.get_document(name, "nope")
        assert rl.delete_documents(name, ids=["d0"]).count_deleted == 1
        assert rl.delete_documents(name, where={"kind": "odd"}).count_deleted == 2
        assert rl.empty_collection(name).count_deleted == 1
        assert rl.get_collection(name).count == 0


def test_text_ingestion_context_lesson_and_rerank(served: Served, name: str) -> None:
    with admin(served) as rl:
        rl.create_collection(name, embed_provider="local")
        done = rl.ingest_text("Robots sense the world with lidar and cameras. " * 3,
                              title="Sensing", collection=name)
        assert isinstance(done, models.Ingested) and done.chunks_created
        assert done.source_id
        hits = rl.search(name, "how do robots sense?", limit=3).results
        assert hits and "lidar" in hits[0].text
        ctx = rl.context(hits[0].id, collection=name)
        assert ctx.chunk["id"] == hits[0].id and ctx.parent_doc_id == done.source_id
        lesson = rl.lesson(done.source_id, collection=name)
        assert lesson.total_chunks == len(lesson.chunks) >= 1
        ranked = rl.rerank("robots", [{"id": "a", "text": "bananas"},
                                      {"id": "b", "text": "robots sense"}], top_k=1)
        assert len(ranked) == 1 and ranked[0].original_rank in (1, 2)
        assert isinstance(ranked[0], models.Reranked)


def test_directory_jobs(served: Served, name: str) -> None:
    with admin(served) as rl:
        started = rl.ingest_directory(str(served.docs_root), name)
        assert started.status in ("queued", "running") and started.collection == name
        job = rl.wait_for_job(started.job_id, timeout=120)
        assert job.status == "succeeded", job.error
        assert job.files_total == 2 and job.chunks_created >= 2
        assert started.job_id in [j.job_id for j in rl.jobs(collection=name)]
        again = rl.rerun_job(started.job_id)
        assert again.rerun_of == started.job_id
        assert rl.wait_for_job(again.job_id, timeout=120).status == "succeeded"
        sources = rl.list_sources(name)
        assert sources.total == 2 and {s.origin for s in sources.sources} == {"directory"}
        robots = next(s for s in sources.sources if s.source_path == "robots.md")
        detail = rl.get_source(name, robots.source_id)
        assert detail.chunks_in_store == len(detail.chunk_ids) == robots.chunk_count >= 1
        gone = rl.delete_source(name, robots.source_id)
        assert gone.count_deleted == robots.chunk_count
        with pytest.raises(errors.NotFound):
            rl.get_source(name, robots.source_id)
        with pytest.raises(errors.NotFound):
            rl.job("no-such-job")
        with pytest.raises(errors.InvalidInput):  # outside the allowed roots
            rl.ingest_directory("/etc", name)


def test_upload_and_url_ingestion(served: Served, name: str, tmp_path: Path) -> None:
    with admin(served) as rl:
        rl.create_collection(name, embed_provider="local")
        up = rl.ingest_upload("notes.md", b"# Notes\n\nMotors move robots.\n",
                              collection=name)
        assert up.chunks_created and up.unchanged is False
        same = rl.ingest_upload("notes.md", b"# Notes\n\nMotors move robots.\n",
                                collection=name)
        assert same.unchanged is True
        with pytest.raises(errors.RaglineError) as url:
            rl.ingest_url("http://127.0.0.1:1/nothing", collection=name)
        assert 400 <= url.value.status < 600


def test_keys_roles_and_tenants(served: Served, name: str) -> None:
    with admin(served) as rl:
        rl.create_collection(name)
        rl.add_documents(name, [{"id": "a", "text": "admin's", "embedding": VEC[0]}])
        made = rl.create_key("user", "tenant-b", "bob")
        assert made.key.startswith("rl_") and made.tenant == "tenant-b"
        assert made.id in [k.id for k in rl.list_keys()]
        with Client(served.url, api_key=made.key) as bob:
            assert bob.get_collection(name).count == 0  # another tenant's documents
            with pytest.raises(errors.Forbidden) as denied:
                bob.list_keys()
            assert denied.value.code == "forbidden"
        with Client(served.url, api_key=served.admin_key, tenant="tenant-b") as as_b:
            as_b.add_documents(name, [{"id": "b", "text": "b's", "embedding": VEC[1]}])
        with Client(served.url, api_key=made.key) as bob:
            assert [d.id for d in bob.list_documents(name).documents] == ["b"]
        revoked = rl.revoke_key(made.id)
        assert revoked.revoked_at
        with Client(served.url, api_key=made.key) as bob, \
                pytest.raises(errors.AuthenticationError):
            bob.list_collections()


def test_chat_and_checklist_without_an_llm(served: Served) -> None:
    with admin(served) as rl:
        with pytest.raises(errors.LLMNotConfigured):
            rl.chat("hello")
        with pytest.raises(errors.LLMNotConfigured):
            list(rl.chat_stream("hello"))
        with pytest.raises(errors.NotFound):
            rl.get_conversation("nope")


def test_backup_archive(served: Served, tmp_path: Path) -> None:
    with admin(served) as rl:
        archive = rl.download_backup(tmp_path / "b.tar.gz")
    with tarfile.open(archive) as tar:
        assert any(n.endswith("backup.json") for n in tar.getnames())


def test_unreachable_and_bad_key(served: Served) -> None:
    with Client(f"http://127.0.0.1:{free_port()}", timeout=2) as dead, \
            pytest.raises(errors.ServerUnreachable) as down:
        dead.health()
    assert down.value.status == 503 and "could not be reached" in down.value.message
    with Client(served.url, api_key="rl_wrong") as wrong, \
            pytest.raises(errors.AuthenticationError):
        wrong.list_collections()
