"""The OpenAI-compatible API with real clients against a live server (issue 40).

One ``ragline serve`` process (auth on, the local embedder) whose chat model is the
scripted one behind an OpenAI-compatible test server (``ragline.testing.openai_server``:
the scripted model cannot be selected by configuration, so the server reaches it the
way it reaches Ollama or vLLM). Two tenants share the collection ``docs``; each also has
a collection only it may see. Clients: the official ``openai`` SDK (sync, async,
streaming), Open WebUI's request sequence replayed with httpx (what its
``routers/openai.py`` sends: the model list, then a streamed completion with the
model's system prompt first, the chat history, ``stream_options`` and a
``cache_control`` text part), and docs/answers.md's examples as a user runs them.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from ragline.testing.openai_server import scripted_openai_server
from ragline.testing.scripted_llm import (
    NO_TOOL,
    TOOL_DECISION,
    ScriptedChatModel,
    answer_from_context,
)
from tests.live_server import LiveServer
from tests.test_docs_examples import local_address, need_model, runs, sh

QUESTION = "How do ROS 2 nodes talk?"
TOPIC = "ROS 2 nodes topics messages"  # the scripted topic update


@dataclass
class Live:
    url: str
    admin: str
    acme: str  # a user key of tenant acme
    llm: ScriptedChatModel

    def sdk(self, key: str | None = None) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key or self.acme,
                             max_retries=0)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    need_model()
    llm = ScriptedChatModel(default=answer_from_context,
                            rules={TOOL_DECISION: NO_TOOL, "Current topic": TOPIC})
    tmp = tmp_path_factory.mktemp("v1-live")
    with scripted_openai_server(llm) as llm_url:
        srv = LiveServer(tmp / "data", env={"RAGLINE_AUTH": "on", "RAGLINE_LLM_BASE_URL":
                                            llm_url, "RAGLINE_LLM_MODEL": "scripted"})
        try:
            srv.wait_ready()
            admin = (tmp / "data" / "admin-key.txt").read_text().strip()
            auth = {"authorization": f"Bearer {admin}"}
            for name, tenants in (("docs", None), ("acme-notes", ["acme"]),
                                  ("globex-notes", ["globex"])):
                httpx.post(f"{srv.url}/collections", headers=auth, json={
                    "name": name, "embed": {"provider": "local"},
                    "metadata": {"tenants": tenants} if tenants else {}}).raise_for_status()
            for tenant, doc in (
                    ("acme", {"id": "topics", "text": "ROS 2 nodes talk over topics: a node "
                              "publishes messages that subscriber nodes receive",
                              "metadata": {"title": "Topics", "source_path": "ros/topics.md"}}),
                    ("globex", {"id": "pigeons", "text": "ROS 2 nodes talk over carrier "
                                "pigeons in the globex lab", "metadata": {"title": "Pigeons"}})):
                httpx.post(f"{srv.url}/collections/docs/documents",
                           headers={**auth, "x-ragline-tenant": tenant},
                           json={"documents": [doc]}).raise_for_status()
            made = httpx.post(f"{srv.url}/api/keys", headers=auth,
                              json={"role": "user", "tenant": "acme"})
            made.raise_for_status()
            yield Live(srv.url, admin, made.json()["key"], llm)
        finally:
            srv.stop()


def test_sdk_sync_models_completion_and_errors(live: Live) -> None:
    client = live.sdk()
    assert [m.id for m in client.models.list()] == ["ragline/acme-notes", "ragline/docs",
                                                    "ragline"]
    answer = client.chat.completions.create(
        model="ragline/docs", temperature=0.4, max_tokens=64, stop=["END"],
        messages=[{"role": "system", "content": "Answer in one sentence."},
                  {"role": "user", "content": QUESTION}])
    assert answer.object == "chat.completion" and answer.model == "ragline/docs"
    assert answer.choices[0].message.content == "Answer from: Topics"
    assert answer.choices[0].finish_reason == "stop"
    extra = answer.model_extra or {}
    assert extra["ragline"]["path"] == "rag"
    assert [s["id"] for s in extra["ragline"]["sources"]] == ["topics"]
    # what the configured model received on the answer call
    call = live.llm.calls[-1]
    assert call.stream and (call.temperature, call.max_tokens, call.stop) == (0.4, 64, ["END"])
    assert call.messages[0] == {"role": "system", "content": "Answer in one sentence."}
    assert "carrier pigeons" not in call.prompt  # the other tenant's record
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="ragline/globex-notes",
                                       messages=[{"role": "user", "content": QUESTION}])
    assert missing.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="ragline/docs", temperature=5,
                                       messages=[{"role": "user", "content": QUESTION}])
    assert bad.value.param == "temperature"
    with pytest.raises(openai.AuthenticationError) as refused:
        live.sdk("rl_not_a_key").models.list()
    assert refused.value.code == "invalid_api_key"


def test_sdk_streaming_sync_and_async(live: Live) -> None:
    stream = live.sdk().chat.completions.create(
        model="ragline/docs", stream=True,
        messages=[{"role": "user", "content": QUESTION}])
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Answer from: Topics"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert [s["id"] for s in (chunks[-1].model_extra or {})["ragline"]["sources"]] == ["topics"]

    async def ask() -> tuple[str, str, dict[str, Any]]:
        client = openai.AsyncOpenAI(base_url=live.url + "/v1", api_key=live.acme,
                                    max_retries=0)
        whole = await client.chat.completions.create(
            model="ragline", messages=[{"role": "user", "content": QUESTION}])
        parts = []
        last: Any = None
        async for chunk in await client.chat.completions.create(
                model="ragline/docs", stream=True,
                messages=[{"role": "user", "content": QUESTION}]):
            parts.append(chunk.choices[0].delta.content or "")
            last = chunk
        await client.close()
        return whole.choices[0].message.content or "", "".join(parts), last.model_extra

    general, streamed, extra = asyncio.run(ask())
    assert general == "Answer from: no documents"  # the general model searches nothing
    assert streamed == "Answer from: Topics" and extra["ragline"]["path"] == "rag"


def test_open_webui_request_sequence(live: Live) -> None:
    """Open WebUI's requests: the model list on connect, then a chat turn streamed with
    the model's system prompt first and the history, as its routers/openai.py sends it."""
    headers = {"Authorization": f"Bearer {live.acme}", "Content-Type": "application/json",
               "X-OpenWebUI-User-Name": "Ada", "X-OpenWebUI-User-Id": "u-1",
               "X-OpenWebUI-User-Email": "ada@example.com", "X-OpenWebUI-User-Role": "user",
               "X-OpenWebUI-Chat-Id": "chat-1"}
    models = httpx.get(f"{live.url}/v1/models", headers=headers)
    assert models.status_code == 200
    ids = [m["id"] for m in models.json()["data"]]
    assert "ragline/docs" in ids and "ragline/globex-notes" not in ids
    payload = {
        "model": "ragline/docs", "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [
            {"role": "system", "content": "You are a helpful assistant. Be brief."},
            {"role": "user", "content": "What is ROS 2?"},
            {"role": "assistant", "content": "A robotics middleware."},
            {"role": "user", "content": [{"type": "text", "text": "How do its nodes talk?",
                                          "cache_control": {"type": "ephemeral"}}]}]}
    calls = len(live.llm.calls)
    with httpx.stream("POST", f"{live.url}/v1/chat/completions", headers=headers,
                      content=json.dumps(payload), timeout=60) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = [x for x in r.iter_lines() if x]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(x.removeprefix("data: ")) for x in lines[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == "Answer from: Topics"
    ext = chunks[-1]["ragline"]
    assert ext["strategy"] == "follow-up (contextualized topic)" and ext["query"] == TOPIC
    mine = live.llm.calls[calls:]
    topic = next(c for c in mine if "Current topic" in c.prompt)
    assert "What is ROS 2?" in topic.prompt and "How do its nodes talk?" in topic.prompt
    assert "robotics middleware" not in topic.prompt  # assistant turns are not the topic
    answer = mine[-1]
    assert answer.messages[0]["content"] == "You are a helpful assistant. Be brief."
    assert "How do its nodes talk?" in answer.prompt


def test_docs_example_runs(live: Live, tmp_path: Path) -> None:
    """docs/answers.md's OpenAI-compatible examples, as a user runs them."""
    py, curl = runs("docs/answers.md", "test_docs_example_runs")
    port = live.url.rsplit(":", 1)[1]
    script = tmp_path / "example.py"
    script.write_text(local_address(py.code, int(port)))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env={"RAGLINE_KEY": live.acme, "PATH": "/usr/bin:/bin"},
                          timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "ragline/docs" in lines[0]
    assert lines[1:] == ["Answer from: Topics", "source: Topics", "Answer from: Topics"]
    out = sh(local_address(curl.code, int(port)), tmp_path, {"RAGLINE_KEY": live.acme}).stdout
    assert '"ragline/docs"' in out and out.rstrip().endswith("data: [DONE]")
    assert '"id": "topics"' in out  # the sources, in the last chunk
