"""The prompt profiles (issue 36 item 5): spec 001's prompts stay the default; the
``small`` profile (setting ``prompt_profile`` or a collection's metadata key of the same
name) sends short prompts with fewer, shorter documents and a lower answer cap, in the
same flow (tool decision, then the synthesis of its path)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragline.api.app import create_app
from ragline.facade import DocumentInput, Ragline
from ragline.prompts import PROFILES, clip, profile_for
from ragline.providers.registry import registry
from ragline.settings import Settings
from ragline.testing.fake_embedder import FakeEmbedder
from ragline.testing.scripted_llm import ScriptedChatModel
from tests.api.helpers import local_client
from tests.test_docs_examples import runs

LONG = "Run ros2 topic echo /chatter to watch the messages. " + "Filler words here. " * 200
DOCS = [DocumentInput(LONG, {"title": f"Lesson {i}", "source_path": f"m/0{i}.md",
                             "source_type": "md"}, None, f"d{i}") for i in range(1, 5)]


@pytest.fixture
def rl(settings: Settings) -> Iterator[Ragline]:
    registry.register("embedders", "fake", FakeEmbedder)
    llm = ScriptedChatModel(rules={"tool_name": '{"tool_name": "none"}'},
                            default="Use ros2 topic echo.")
    # fake vectors are random: let every document pass the relevance threshold
    r = Ragline(settings.model_copy(update={"rag_relevance_threshold": 0.0}), llm=llm).start()
    owner = r.owner()
    r.collections.create(owner, "kb", embed={"provider": "fake"})
    r.documents.add(owner, "kb", DOCS)
    yield r
    r.close()


@pytest.fixture
def client(rl: Ragline) -> Iterator[TestClient]:
    with local_client(create_app(ragline=rl)) as c:
        yield c


def _ask(client: TestClient, rl: Ragline) -> tuple[dict[str, Any], list[Any]]:
    llm = rl.services.answers.llm()
    assert isinstance(llm, ScriptedChatModel)
    llm.calls.clear()
    r = client.post("/api/chat", json={"message": "How do I watch a topic?",
                                       "collection": "kb", "stream": False})
    assert r.status_code == 200, r.text
    return r.json(), list(llm.calls)


def test_spec_prompts_stay_the_default_and_small_is_chosen_per_collection(
        client: TestClient, rl: Ragline) -> None:
    out, (decision, answer) = _ask(client, rl)
    assert out["path"] == "rag" and len(out["sources"]) == 3
    assert "ADDITIONAL CONTEXT FROM KNOWLEDGE BASE" in decision.prompt
    assert answer.prompt.startswith("SYSTEM INSTRUCTION: You are in STRICT CONTEXT-ONLY MODE")
    assert answer.max_tokens == rl.settings.llm_max_tokens
    spec_chars = len(decision.prompt) + len(answer.prompt)

    # docs/answers.md's example, as written (bar the collection's name)
    (block,) = runs("docs/answers.md",
                    "test_spec_prompts_stay_the_default_and_small_is_chosen_per_collection")
    url = re.search(r'"localhost:8000(/collections/)docs(/\S+)"', block.code)
    body = re.search(r"-d '(.*)'", block.code, re.S)
    assert url and body
    r = client.put(url.group(1) + "kb" + url.group(2), json=json.loads(body.group(1)))
    assert r.status_code == 200, r.text
    out, (decision, answer) = _ask(client, rl)
    small = PROFILES["small"]
    assert out["path"] == "rag" and len(out["sources"]) == small.context_limit == 2
    # the decision is told the knowledge base has documents, not shown them
    assert "ros2 topic echo" not in decision.prompt
    assert "The knowledge base has documents for this query" in decision.prompt
    assert "latest Bitcoin news" not in decision.prompt  # no example call to copy
    assert decision.json_mode
    assert answer.prompt.startswith("Answer the question from these documents only.")
    assert answer.prompt.rstrip().endswith("Question: How do I watch a topic?\nAnswer:")
    assert answer.prompt.count("Run ros2 topic echo /chatter") == 2  # both documents, cut
    assert answer.prompt.count("Filler words here.") < 2 * (small.chunk_chars or 0) // 18
    assert answer.max_tokens == small.max_tokens
    assert len(decision.prompt) + len(answer.prompt) < spec_chars / 3

    # a collection's own templates still win over the profile's
    client.put("/collections/kb/metadata?merge=true", json={"metadata": {
        "prompts": {"strict_context": "ONLY ${rag_context} Q: ${original_user_query}"}}})
    _, (_, answer) = _ask(client, rl)
    assert answer.prompt.startswith("ONLY Document (")

    client.put("/collections/kb/metadata?merge=true",
               json={"metadata": {"prompt_profile": "tiny"}})
    r = client.post("/api/chat", json={"message": "q", "collection": "kb", "stream": False})
    assert r.status_code == 400 and "Unknown prompt profile 'tiny'" in r.json()["message"]


def test_the_setting_selects_the_profile_for_every_collection(settings: Settings) -> None:
    registry.register("embedders", "fake", FakeEmbedder)
    llm = ScriptedChatModel(rules={"tool_name": '{"tool_name": "none"}'}, default="Hi.")
    s = settings.model_copy(update={"prompt_profile": "small", "default_collection": None})
    with Ragline(s, llm=llm) as rl:
        out = rl.call_sync(_general_turn, rl)
    assert out["path"] == "general"
    assert llm.calls[-1].prompt.startswith("You are ragline. Answer briefly.")
    assert profile_for("spec", {"prompt_profile": "small"}).name == "small"
    assert profile_for("small", None).name == "small"


async def _general_turn(rl: Ragline) -> dict[str, Any]:
    return await rl.answers.chat(rl.owner(), "Write a poem about leaves.")


def test_clip_cuts_at_a_word_end() -> None:
    assert clip("short", 100) == "short" and clip("short", None) == "short"
    assert clip("one two three four five", 12) == "one two ..."
