"""``ragline.client.AsyncClient`` against live servers: the same surface as the blocking
client (on the module's ``ragline serve``), and chat, conversations and checklists on a
real app served by uvicorn with a scripted chat model (no LLM can run in the test box)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ragline import errors
from ragline.api.app import create_app
from ragline.client import AsyncClient, Client, models
from ragline.facade import DocumentInput, Ragline
from ragline.testing.scripted_llm import ScriptedChatModel
from ragline.testing.server import serve_in_thread
from tests.client.conftest import Served
from tests.ingestion_support import fake_settings

CHECKLIST = ('{"title": "CPU triage", "steps": [{"order": 1, "priority": "high", '
             '"action": "Run top", "rationale": "find it", "source": "runbooks/cpu.md"}]}')


async def test_async_surface(served: Served, name: str, tmp_path: Path) -> None:
    async with AsyncClient(served.url, api_key=served.admin_key, timeout=60) as rl:
        assert (await rl.health()).status == "healthy"
        assert (await rl.version()).version
        made = await rl.create_collection(name, {"a": 1})
        assert isinstance(made, models.Collection) and made.metadata == {"a": 1}
        assert name in [c.name for c in await rl.list_collections()]
        await rl.update_collection_metadata(name, {"b": 2}, merge=True)
        assert (await rl.get_collection(name)).metadata == {"a": 1, "b": 2}
        await rl.add_documents(name, [{"id": "x", "text": "x", "embedding": [1.0, 0.0],
                                       "metadata": {"k": "v"}},
                                      {"id": "y", "text": "y", "embedding": [0.0, 1.0]}])
        assert (await rl.get_document(name, "x")).metadata == {"k": "v"}
        assert (await rl.list_documents(name)).total == 2
        assert (await rl.metadata_values(name, "k")).values == ["v"]
        hits = (await rl.search(name, embedding=[0.0, 1.0], limit=1)).results
        assert [h.id for h in hits] == ["y"]
        ranked = await rl.rerank("q", [{"id": 1, "text": "a"}, {"id": 2, "text": "b"}])
        assert sorted(r.original_rank for r in ranked) == [1, 2]
        started = await rl.ingest_directory(str(served.docs_root), name + "-dir")
        job = await rl.wait_for_job(started.job_id, timeout=120)
        assert job.status == "succeeded" and job.files_total == 2
        assert started.job_id in [j.job_id for j in await rl.jobs()]
        src = (await rl.ingest_text("Motors move robots.", title="m",
                                    collection=name + "-dir")).source_id
        assert src and (await rl.lesson(src, collection=name + "-dir")).total_chunks == 1
        key = await rl.create_key("user", "t-async")
        assert key.id in [k.id for k in await rl.list_keys()]
        assert (await rl.revoke_key(key.id)).revoked_at
        archive = await rl.download_backup(tmp_path / "b.tar.gz")
        assert archive.stat().st_size > 0
        assert (await rl.delete_documents(name, ids=["x"])).count_deleted == 1
        assert (await rl.empty_collection(name)).count_deleted == 1
        assert await rl.delete_collection(name) == name
        with pytest.raises(errors.CollectionNotFound):
            await rl.get_collection(name)
        with pytest.raises(errors.LLMNotConfigured):
            await rl.chat("hi")


@pytest.fixture
def answers_url(tmp_path: Path) -> Iterator[tuple[str, ScriptedChatModel]]:
    from ragline.providers.registry import registry
    from ragline.testing.fake_embedder import FakeEmbedder

    registry.register("embedders", "fake", FakeEmbedder)
    llm = ScriptedChatModel(default="Robots sense with lidar.")
    rl = Ragline(fake_settings(tmp_path, default_collection="kb",
                               rag_relevance_threshold=0.0), llm=llm).start()
    owner = rl.owner()
    rl.collections.create(owner, "kb", embed={"provider": "fake"})
    rl.documents.add(owner, "kb", [DocumentInput("How do robots sense? With lidar.",
                                                 {"title": "Sensing"}, None, "l1")])
    rl.collections.create(owner, "rb", embed={"provider": "fake"})
    rl.documents.add(owner, "rb", [DocumentInput("High CPU usage: check top", {
        "tags": ["cpu"], "source_path": "runbooks/cpu.md"}, None, "cpu")])
    try:
        with serve_in_thread(create_app(ragline=rl)) as url:
            yield url, llm
    finally:
        rl.close()


def test_chat_conversations_and_checklists_sync(
        answers_url: tuple[str, ScriptedChatModel]) -> None:
    url, llm = answers_url
    with Client(url) as rl:
        answer = rl.chat("How do robots sense?")
        assert isinstance(answer, models.ChatAnswer)
        assert answer.answer == "Robots sense with lidar." and answer.conversation_id
        conv = rl.get_conversation(answer.conversation_id)
        assert len(conv.messages) == 2
        events = list(rl.chat_stream("And then?", conversation_id=answer.conversation_id))
        assert events[-1].event == "done"
        assert "".join(e.data["text"] for e in events if e.event == "token") == \
            "Robots sense with lidar."
        rl.delete_conversation(answer.conversation_id)
        with pytest.raises(errors.NotFound):
            rl.get_conversation(answer.conversation_id)
        llm.replies.append(CHECKLIST)
        checklist = rl.checklist("High CPU usage", collection="rb", labels=["cpu"], top_k=1)
        extra = checklist.model_extra or {}
        assert extra["title"] == "CPU triage" and extra["steps"][0]["action"] == "Run top"


async def test_chat_stream_async(answers_url: tuple[str, ScriptedChatModel]) -> None:
    url, _ = answers_url
    async with AsyncClient(url) as rl:
        kinds = [e.event async for e in rl.chat_stream("How do robots sense?")]
        assert kinds[0] == "token" and kinds[-1] == "done"
        answer = await rl.chat("again")
        assert (await rl.get_conversation(answer.conversation_id)).messages
        llm_sees = await rl.checklist("High CPU usage", collection="rb")
        assert isinstance(llm_sees, models.Checklist)
