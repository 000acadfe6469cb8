"""An OpenAI-compatible chat endpoint whose answers come from a :class:`ScriptedChatModel`.

Why: a real ``ragline serve`` process can only reach a chat model through its
settings (``llm_base_url``), and the scripted model is deliberately not
selectable there. Served behind ``/v1/chat/completions`` it becomes "an
OpenAI-compatible server" like Ollama or vLLM, so tests (the documentation
examples, the getting-started chat step) run the production provider end to end
with scripted, deterministic answers. Stdlib HTTP server in a thread; JSON and
streamed (SSE) completions; every request is recorded by the scripted model.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ragline.testing.scripted_llm import ScriptedChatModel
from ragline.testing.server import QuietHandler, serve_handler


def _chunk(model: str, delta: dict[str, str], finish: str | None) -> bytes:
    body = {"id": "scripted", "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


@contextmanager
def scripted_openai_server(llm: ScriptedChatModel) -> Iterator[str]:
    """Serve ``llm`` on 127.0.0.1 until the block exits; yields the base URL (``.../v1``)."""

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            messages = [{"role": m["role"], "content": m["content"]} for m in body["messages"]]
            json_mode = (body.get("response_format") or {}).get("type") == "json_object"
            model = str(body.get("model", llm.model))
            try:
                text = asyncio.run(llm.complete(messages, json_mode=json_mode,
                                                max_tokens=body.get("max_tokens")))
            except Exception as exc:  # a scripted failure: what a broken server would say
                self._send(500, {"error": {"message": str(exc)}})
                return
            call = llm.calls[-1]
            call.stream = bool(body.get("stream"))
            call.temperature = body.get("temperature")
            stop = body.get("stop")
            call.stop = [stop] if isinstance(stop, str) else stop
            if body.get("stream"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for i, word in enumerate(text.split(" ")):
                    self.wfile.write(_chunk(model, {"content": word if i == 0 else " " + word},
                                            None))
                self.wfile.write(_chunk(model, {}, "stop"))
                self.wfile.write(b"data: [DONE]\n\n")
                return
            self._send(200, {"id": "scripted", "object": "chat.completion", "created": 0,
                             "model": model, "choices": [{
                                 "index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                             "usage": {"prompt_tokens": 0, "completion_tokens": 0,
                                       "total_tokens": 0}})

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            self.send(status, json.dumps(payload).encode(), {"Content-Type": "application/json"})

    with serve_handler(Handler) as url:
        yield f"{url}/v1"
