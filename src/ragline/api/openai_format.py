"""OpenAI's chat-completions format, read and written (``/v1``, issue 40).

Reading: :func:`parse_completion` turns a request body into a :class:`CompletionBody`
(the last user message is the query, the earlier user messages are the history that
gives the turn its topic, system and developer messages become the answer call's
system message) or raises :class:`~ragline.errors.InvalidInput` with ``details["param"]``
naming the offending field the way OpenAI does (``messages[2].content``). Fields this
server does not use (``top_p``, ``tools``, ``user``, ``stream_options``...) are
ignored, as OpenAI clients expect; fields it uses must be well formed.

Writing: ``chat.completion`` objects, ``chat.completion.chunk`` SSE frames, the
``ragline`` extension field (sources and how the answer was made), the numbered
citations, and the error shape ``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from ragline.errors import InvalidInput

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
SYSTEM_ROLES = ("system", "developer")
MAX_STOP = 4
EXTENSION = "ragline"
"""The extension field carrying the sources (and path, strategy, query, topic, tool,
timings): on the completion object, and on the last chunk of a stream."""
DONE = "data: [DONE]\n\n"


@dataclass
class CompletionBody:
    model: str
    message: str
    history: list[str]
    system: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    stream: bool = False


def bad(message: str, param: str | None) -> InvalidInput:
    return InvalidInput(message, details={"param": param})


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _text(content: Any, param: str, *, strict: bool) -> str:
    """A message's text: a string, or the ``text`` parts of a list of content parts.
    ``strict`` (user, system, developer): other parts are refused, since dropping an
    image or a file silently would answer another question than the one asked."""
    if content is None:
        if strict:
            raise bad(f"'{param}' is required", param)
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad(f"'{param}' must be a string or an array of content parts", param)
    texts = []
    for j, part in enumerate(content):
        where = f"{param}[{j}]"
        if not isinstance(part, dict):
            raise bad(f"'{where}' must be an object", where)
        if part.get("type") == "text":
            if not isinstance(part.get("text"), str):
                raise bad(f"'{where}.text' must be a string", f"{where}.text")
            texts.append(part["text"])
        elif strict:
            raise bad(f"'{where}.type' is {part.get('type')!r}: only 'text' content parts "
                      "are supported", f"{where}.type")
    return "\n".join(texts)


def _messages(messages: Any) -> tuple[str, list[str], str | None]:
    if not isinstance(messages, list) or not messages:
        raise bad("'messages' must be a non-empty array", "messages")
    system: list[str] = []
    users: list[tuple[str, str]] = []  # (param, text)
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise bad(f"'{where}' must be an object", where)
        role = m.get("role")
        if role not in ROLES:
            raise bad(f"'{where}.role' must be one of {', '.join(ROLES)}", f"{where}.role")
        text = _text(m.get("content"), f"{where}.content",
                     strict=role == "user" or role in SYSTEM_ROLES)
        if role in SYSTEM_ROLES and text.strip():
            system.append(text.strip())
        elif role == "user":
            users.append((f"{where}.content", text))
    if not users:
        raise bad("'messages' has no user message: the last one is the question", "messages")
    param, query = users[-1]
    if not query.strip():
        raise bad(f"'{param}' is empty: the last user message is the question", param)
    return query, [t for _, t in users[:-1]], "\n\n".join(system) or None


def _stop(stop: Any) -> list[str] | None:
    if stop is None:
        return None
    stops = [stop] if isinstance(stop, str) else stop
    if (not isinstance(stops, list) or len(stops) > MAX_STOP
            or not all(isinstance(s, str) for s in stops)):
        raise bad(f"'stop' must be a string or an array of at most {MAX_STOP} strings", "stop")
    return [s for s in stops if s] or None


def parse_completion(body: Any) -> CompletionBody:
    """A ``POST /v1/chat/completions`` body, checked (see the module docstring)."""
    if not isinstance(body, dict):
        raise bad("The request body must be a JSON object", None)
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise bad("'model' is required: a model id from GET /v1/models", "model")
    query, history, system = _messages(body.get("messages"))
    temperature = body.get("temperature")
    if temperature is not None and not (_number(temperature) and 0 <= temperature <= 2):
        raise bad("'temperature' must be a number from 0 to 2", "temperature")
    key = "max_tokens" if body.get("max_tokens") is not None else "max_completion_tokens"
    max_tokens = body.get(key)
    if max_tokens is not None and not (isinstance(max_tokens, int)
                                       and not isinstance(max_tokens, bool) and max_tokens >= 1):
        raise bad(f"'{key}' must be a positive integer", key)
    n = body.get("n")
    if n is not None and (n != 1 or not isinstance(n, int) or isinstance(n, bool)):
        raise bad("'n' must be 1: one answer per request", "n")
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise bad("'stream' must be true or false", "stream")
    return CompletionBody(model.strip(), query, history, system,
                          float(temperature) if temperature is not None else None,
                          max_tokens, _stop(body.get("stop")), bool(stream))


# -- writing ------------------------------------------------------------------------------

def error_type(status: int) -> str:
    if status == 401:
        return "authentication_error"
    if status == 403:
        return "permission_error"
    if status == 429:
        return "rate_limit_error"
    return "server_error" if status >= 500 else "invalid_request_error"


def error_payload(status: int, message: str, code: str | None,
                  param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type(status), "param": param,
                      "code": code}}


def extension(summary: dict[str, Any]) -> dict[str, Any]:
    """The ``ragline`` field: a turn's summary without the (absent) conversation id."""
    return {k: v for k, v in summary.items() if k != "conversation_id"}


def citations(sources: list[dict[str, Any]]) -> str:
    """``\\n\\nSources:\\n[1] title (path or URL)`` per source; empty without sources."""
    lines = []
    for i, s in enumerate(sources, 1):
        where = s.get("source_url") or s.get("source_path")
        title = s.get("title") or where or s.get("id") or "source"
        lines.append(f"[{i}] {title}" + (f" ({where})" if where and where != title else ""))
    return "\n\nSources:\n" + "\n".join(lines) if lines else ""


class Completion:
    """One answer's id, creation time and model, shared by its object or its chunks."""

    def __init__(self, model: str) -> None:
        self.id = "chatcmpl-" + uuid.uuid4().hex
        self.created = int(time.time())
        self.model = model

    def whole(self, text: str, summary: dict[str, Any]) -> dict[str, Any]:
        """The ``chat.completion`` object (no ``usage``: token counts are the model
        server's, and the answer took several calls)."""
        return {"id": self.id, "object": "chat.completion", "created": self.created,
                "model": self.model, "system_fingerprint": None,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "logprobs": None, "finish_reason": "stop"}],
                EXTENSION: extension(summary)}

    def chunk(self, delta: dict[str, Any], finish: str | None = None,
              summary: dict[str, Any] | None = None) -> str:
        """One ``chat.completion.chunk`` SSE frame."""
        body: dict[str, Any] = {
            "id": self.id, "object": "chat.completion.chunk", "created": self.created,
            "model": self.model, "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None,
                         "finish_reason": finish}]}
        if summary is not None:
            body[EXTENSION] = extension(summary)
        return sse_data(body)


def sse_data(body: dict[str, Any]) -> str:
    return f"data: {json.dumps(body, ensure_ascii=False, default=str)}\n\n"
