"""Outbound providers read at most ``max_response_bytes`` of an answer (issue 32).

A local server plays an embedding or chat endpoint that answers too much: a body
streamed without end (chunked), a ``Content-Length`` far over the cap, a compressed
body. Each provider refuses with a clear :class:`ProviderError` (502 to callers) naming
the option, without retrying, having read no more than the cap (the server stops being
read, memory stays within a small multiple of the cap); ordinary answers still pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragline.errors import ProviderError
from ragline.facade import DocumentInput, Ragline
from ragline.providers.embedders.gemini import GeminiEmbedder
from ragline.providers.embedders.openai_compat import OpenAIEmbedder, OpenAIEmbedderConfig
from ragline.providers.llms.openai_compat import OpenAIChatModel
from ragline.settings import Settings
from ragline.testing.server import QuietHandler, serve_handler

CAP = 256 * 1024
ENDLESS = 64 * 1024 * 1024  # what the server would send if it were read to the end
STOPPED = ENDLESS // 4
"""Less than this was sent: the client stopped reading (loopback socket buffers take a few
MB before a writer blocks)."""
PIECE = b"[" + b"0.125, " * 9_000 + b"0.5],"  # ~63 KB of a vector list, again and again


class Upstream:
    """What the hostile endpoint answers (``mode``) and how much it managed to send."""

    def __init__(self) -> None:
        self.url = ""
        self.mode = "ok"
        self.requests = 0
        self.sent = 0
        self.done = threading.Event()


def _ok_body(path: str, body: dict[str, Any]) -> bytes:
    if path.endswith(":batchEmbedContents"):
        return json.dumps({"embeddings": [{"values": [1.0, 0.0, 0.5]}
                                          for _ in body["requests"]]}).encode()
    if path.endswith("/embeddings"):
        return json.dumps({"data": [{"index": i, "embedding": [1.0, 0.0, 0.5]}
                                    for i in range(len(body["input"]))]}).encode()
    return json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                       "choices": [{"index": 0, "finish_reason": "stop", "message": {
                           "role": "assistant", "content": "fine"}}]}).encode()


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    state = Upstream()

    class Handler(QuietHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests += 1
            try:
                self._answer(body)
            finally:
                state.done.set()

        def _answer(self, body: dict[str, Any]) -> None:
            if state.mode == "ok":
                self.send(200, _ok_body(self.path, body), {"Content-Type": "application/json"})
                return
            if state.mode == "gzip":
                self.send(200, gzip.compress(_ok_body(self.path, body)), {
                    "Content-Type": "application/json", "Content-Encoding": "gzip"})
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json" if state.mode != "sse"
                             else "text/event-stream")
            if state.mode == "declared":
                self.send_header("Content-Length", str(ENDLESS))
            else:
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            piece = (b'data: {"id":"c","object":"chat.completion.chunk","created":0,'
                     b'"model":"m","choices":[{"index":0,"delta":{"content":"word "}}]}\n\n'
                     if state.mode == "sse" else PIECE)
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                if state.mode != "sse":
                    self._write(b'{"data": [{"index": 0, "embedding": ' if "embeddings" in
                                self.path else b'{"embeddings": [{"values": ')
                while state.sent < ENDLESS:
                    self._write(piece)

        def _write(self, data: bytes) -> None:
            if state.mode == "declared":
                self.wfile.write(data)
            else:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
            state.sent += len(data)

    with serve_handler(Handler) as url:
        state.url = url
        yield state


def refused(call: Any, upstream: Upstream) -> tuple[ProviderError, int]:
    """The ProviderError ``call()`` raises and the peak bytes Python allocated meanwhile."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ProviderError) as err:
            call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 10.0
    assert upstream.done.wait(10), "the server was still sending: the client kept reading"
    return err.value, peak


def openai(upstream: Upstream, **kw: Any) -> OpenAIEmbedder:
    return OpenAIEmbedder(base_url=f"{upstream.url}/v1", model="m", api_key="sk-test-0123",
                          max_response_bytes=CAP, max_retries=3, **kw)


def gemini(upstream: Upstream) -> GeminiEmbedder:
    return GeminiEmbedder(base_url=f"{upstream.url}/v1beta", api_key="AIza-test",
                          max_response_bytes=CAP, max_retries=3)


@pytest.mark.parametrize("make", [openai, gemini], ids=["openai", "gemini"])
@pytest.mark.parametrize("mode", ["endless", "declared"])
def test_an_oversized_embedding_answer_is_refused_within_the_cap(
        upstream: Upstream, make: Any, mode: str) -> None:
    emb = make(upstream)
    assert emb.embed(["fine"], "document").shape == (1, 3)  # an ordinary answer passes
    upstream.mode, upstream.requests, upstream.sent = mode, 0, 0
    upstream.done.clear()
    err, peak = refused(lambda: emb.embed(["a text"], "document"), upstream)
    assert f"answered more than {CAP} bytes" in err.message, err.message
    assert "max_response_bytes" in err.message and "sk-test" not in err.message
    assert err.message.startswith(f"Embedding endpoint {upstream.url}")
    assert upstream.requests == 1  # refused, not retried
    assert upstream.sent < STOPPED, upstream.sent  # the server stopped being read
    assert peak < 8 * CAP, peak  # memory within a small multiple of the cap
    if mode == "declared":
        assert f"Content-Length {ENDLESS}" in err.message


@pytest.mark.parametrize("make", [openai, gemini], ids=["openai", "gemini"])
def test_a_compressed_answer_whose_size_cannot_be_bounded_is_refused(
        upstream: Upstream, make: Any) -> None:
    upstream.mode = "gzip"
    with pytest.raises(ProviderError, match="Content-Encoding 'gzip' although 'identity' was "
                                            "asked"):
        make(upstream).embed(["a text"], "document")


def test_the_default_cap_follows_the_batch_size() -> None:
    assert OpenAIEmbedderConfig().response_cap() == (1 << 20) + 128 * (128 << 10)  # 17 MiB
    assert OpenAIEmbedderConfig(batch_size=16).response_cap() == 3 * (1 << 20)
    assert OpenAIEmbedderConfig(max_response_bytes=4096).response_cap() == 4096
    # a full default batch of 3,072-d vectors as JSON fits with room to spare
    full = json.dumps({"data": [{"index": i, "embedding": [-0.012345678901234567] * 3072}
                                for i in range(128)]})
    assert len(full) < OpenAIEmbedderConfig().response_cap()


def test_a_document_write_through_a_hostile_endpoint_is_a_clear_502_nothing_written(
        upstream: Upstream, tmp_path: Path) -> None:
    settings = Settings(_env_file=None, data_dir=tmp_path / "data",  # type: ignore[call-arg]
                        embedder_options={"openai": {
                            "base_url": f"{upstream.url}/v1", "model": "m",
                            "max_response_bytes": CAP, "dimension": 3}})
    with Ragline(settings) as rl:
        owner = rl.owner()
        rl.collections.create(owner, "kb", embed={"provider": "openai"})
        upstream.mode = "endless"
        with pytest.raises(ProviderError) as err:
            rl.documents.add(owner, "kb", [DocumentInput("ROS 2 topics", {}, None, "t1")])
        assert err.value.status == 502 and "max_response_bytes" in err.value.message
        assert rl.services.store.count(rl.services.collections.get("kb").shard, "default",
                                       None) == 0


async def test_the_chat_model_refuses_an_oversized_answer_and_an_endless_stream(
        upstream: Upstream) -> None:
    chat = OpenAIChatModel(base_url=f"{upstream.url}/v1", model="m", max_response_bytes=CAP,
                           max_retries=2)
    msgs: Any = [{"role": "user", "content": "hello"}]
    assert await chat.complete(msgs) == "fine"  # an ordinary answer passes

    async def drain() -> str:
        return "".join([t async for t in chat.stream(msgs)])

    for mode in ("endless", "sse"):
        upstream.mode, upstream.requests, upstream.sent = mode, 0, 0
        upstream.done.clear()
        with pytest.raises(ProviderError) as err:
            await (chat.complete(msgs) if mode == "endless" else drain())
        assert f"Chat endpoint {upstream.url}/v1 answered more than {CAP} bytes" in \
            err.value.message, err.value.message
        assert await asyncio.to_thread(upstream.done.wait, 10)
        assert upstream.requests == 1 and upstream.sent < STOPPED, (mode, upstream.sent)
    await chat.aclose()


async def test_the_llm_max_response_bytes_setting_reaches_the_chat_model(
        upstream: Upstream, tmp_path: Path) -> None:
    from ragline.services.answers.answers import ChatModelSlot

    settings = Settings(_env_file=None, data_dir=tmp_path / "data",  # type: ignore[call-arg]
                        llm_base_url=f"{upstream.url}/v1", llm_model="m",
                        llm_max_response_bytes=CAP)
    chat = ChatModelSlot(settings)()
    upstream.mode = "endless"
    with pytest.raises(ProviderError, match=f"answered more than {CAP} bytes"):
        await chat.complete([{"role": "user", "content": "hello"}])
    default = ChatModelSlot(Settings(_env_file=None, data_dir=tmp_path / "d2",  # type: ignore[call-arg]
                                     llm_base_url=f"{upstream.url}/v1", llm_model="m"))()
    assert isinstance(default, OpenAIChatModel)
    assert default.config.max_response_bytes == 16 * 1024 * 1024
