"""The OpenAI-compatible chat API (issue 40): ``GET /v1/models`` and
``POST /v1/chat/completions``, so Open WebUI, LibreChat or any ``openai`` SDK client
talks to ragline's answers as to a model.

* A model is a collection the key may read (``ragline/<collection>``), plus the
  general model ``ragline`` (no knowledge base) when a chat model is configured.
* A completion is one stateless chat turn of spec 001 through the facade's chat use
  case (``Ragline.completion_turn``): same access checks, same retrieval, tools and
  prompts as ``POST /api/chat``; nothing is stored.
* Every error under ``/v1`` (401, 404, 400...) has OpenAI's shape
  ``{"error": {"message", "type", "param", "code"}}``: :class:`OpenAIRoute` turns the
  errors of the dependencies (the API key) and of the route into it, a catch-all
  route answers unknown ``/v1`` paths, and :class:`OpenAIErrorShape` (ASGI, around the
  request guard) rewrites what the guard answers before any route.

docs/answers.md ("OpenAI-compatible API") is the user's guide.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragline.api.deps import RL, Caller
from ragline.api.openai_format import (
    DONE,
    Completion,
    bad,
    citations,
    error_payload,
    parse_completion,
    sse_data,
)
from ragline.errors import RaglineError, TooManyRequests
from ragline.facade import AnswerOptions

log = logging.getLogger(__name__)


def openai_error(status: int, message: str, code: str | None, param: str | None = None,
                 headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_payload(status, message, code, param), status_code=status,
                        headers=headers)


def from_ragline(exc: RaglineError) -> JSONResponse:
    if exc.status >= 500:
        error_id = uuid.uuid4().hex[:16]
        log.error("%s %s: %s", exc.code, error_id, exc.message)
        message = (exc.message if exc.status != 500 else
                   f"Internal error (id {error_id}); the server log has the details")
        return openai_error(exc.status, message, exc.code)
    param = exc.details.get("param") if isinstance(exc.details.get("param"), str) else None
    headers = ({"Retry-After": str(exc.retry_after)}
               if isinstance(exc, TooManyRequests) else None)
    code = "invalid_api_key" if exc.status == 401 else exc.code
    return openai_error(exc.status, exc.message, code, param, headers)


class OpenAIRoute(APIRoute):
    """An ``APIRoute`` whose errors, its dependencies' included, have OpenAI's shape."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except RaglineError as exc:
                return from_ragline(exc)
            except RequestValidationError as exc:
                return openai_error(400, f"Invalid request: {exc.errors()[0].get('msg')}",
                                    "invalid_request")
            except StarletteHTTPException as exc:
                return openai_error(exc.status_code, str(exc.detail), None)
            except Exception:  # a bug: an id in the body, the traceback in the log
                error_id = uuid.uuid4().hex[:16]
                log.exception("internal error %s on %s %s", error_id, request.method,
                              request.url.path)
                return openai_error(500, f"Internal error (id {error_id}); the server log "
                                    "has the details", "internal_error")

        return route_handler


router = APIRouter(tags=["openai"], route_class=OpenAIRoute)


class OpenAIErrorShape:
    """Pure ASGI, around the request guard: under ``/v1``, an error the layers before
    the routes answer in ragline's shape (Host 421, body size 413, a key refused before
    the body is read, a NaN 400) is rewritten in OpenAI's, so every ``/v1`` error reads
    the same to an SDK. Other paths, and successful answers, pass untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope.get("path", "").startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        parts: list[bytes] = []

        async def reshape(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start" and message["status"] >= 400:
                start = message  # held until the body is known
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            parts.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = _reshaped(start["status"], b"".join(parts))
            headers = [(k, v) for k, v in start.get("headers", []) if k != b"content-length"]
            await send({**start, "headers": [*headers, (b"content-length",
                                                        str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, reshape)


def _reshaped(status: int, body: bytes) -> bytes:
    try:
        doc = json.loads(body)
    except ValueError:
        return body
    if not (isinstance(doc, dict) and isinstance(doc.get("error"), str)
            and isinstance(doc.get("message"), str)):
        return body  # already OpenAI's shape (the routes), or not an error body of ours
    code = "invalid_api_key" if status == 401 else doc["error"]
    return json.dumps(error_payload(status, doc["message"], code)).encode()


# -- documentation models (the handlers read the body themselves, see parse_completion) ---
class OpenAIError(BaseModel):
    message: str
    type: str = Field(description="invalid_request_error, authentication_error, "
                      "permission_error, rate_limit_error or server_error.")
    param: str | None = Field(None, description="The offending field, e.g. "
                              "'messages[1].content'.")
    code: str | None = Field(None, description="e.g. invalid_api_key, model_not_found, "
                             "llm_not_configured.")


class OpenAIErrorBody(BaseModel):
    """Every error under /v1, in OpenAI's shape."""

    error: OpenAIError


class ModelOut(BaseModel):
    id: str = Field(description="'ragline/<collection>', or 'ragline' (no knowledge base).")
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "ragline"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelOut]

    model_config = ConfigDict(json_schema_extra={"examples": [{"object": "list", "data": [
        {"id": "ragline/docs", "object": "model", "created": 1764403200,
         "owned_by": "ragline"},
        {"id": "ragline", "object": "model", "created": 0, "owned_by": "ragline"}]}]})


class ChatCompletionBody(BaseModel):
    model: str = Field(description="A model id from GET /v1/models.")
    messages: list[dict[str, Any]] = Field(
        min_length=1, description="{role, content} objects (role system, developer, user, "
        "assistant, tool or function; content a string or 'text' content parts). The last "
        "user message is the question; earlier user messages give the search its topic; "
        "system and developer messages are the answer call's system message.")
    stream: bool | None = False
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None

    model_config = ConfigDict(extra="allow")


BODY_EXAMPLE = {"model": "ragline/docs", "stream": False,
                "messages": [{"role": "system", "content": "Answer briefly."},
                             {"role": "user", "content": "how do nodes talk?"}]}


class ChatCompletionOut(BaseModel):
    """A ``chat.completion``; its ``ragline`` field holds the sources and how the answer
    was made (``path``, ``strategy``, ``query``, ``topic``, ``tool``, ``timings``)."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[dict[str, Any]]
    ragline: dict[str, Any]

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "id": "chatcmpl-5f0c2a", "object": "chat.completion", "created": 1764403200,
        "model": "ragline/docs", "choices": [{
            "index": 0, "message": {"role": "assistant", "content": "Over topics."},
            "logprobs": None, "finish_reason": "stop"}],
        "ragline": {"path": "rag", "strategy": "first message (raw query)",
                    "query": "how do nodes talk?", "topic": "how do nodes talk?",
                    "tool": None, "timings": {"total_ms": 812.4},
                    "sources": [{"id": "a", "collection": "docs", "title": "Topics",
                                 "source_path": "ros/topics.md", "score": 0.82,
                                 "relevance": 0.81}]}}]})


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": OpenAIErrorBody, "description": text} for status, text in (
        (400, "A malformed field ('param' names it)."),
        (401, "Missing, invalid or revoked API key (a ragline key)."),
        (403, "The key may not act for the tenant it names."),
        (404, "No such model for this key."),
        (413, "Request body too large (setting max_request_bytes)."),
        (421, "Host name not allowed (setting allowed_hosts)."),
        (500, "A bug: the message carries an error id that is in the server log."),
        (502, "The chat model's server failed (code provider_error)."),
        (503, "No chat model configured (code llm_not_configured)."))}
SSE_EXAMPLE = (
    'data: {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, '
    '"delta": {"role": "assistant", "content": ""}, "finish_reason": null}], ...}\n\n'
    'data: {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, '
    '"delta": {"content": "Nodes talk"}, "finish_reason": null}], ...}\n\n'
    'data: {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, '
    '"delta": {}, "finish_reason": "stop"}], "ragline": {"sources": [...], ...}, ...}\n\n'
    "data: [DONE]\n\n")


@router.get("/v1/models", response_model=ModelList, responses=ERRORS)
def list_models(rl: RL, caller: Caller) -> dict[str, Any]:
    """The models this key may chat with: ``ragline/<collection>`` per collection it may
    read, and ``ragline`` (general knowledge and tools, no knowledge base) when a chat
    model is configured."""
    return {"object": "list", "data": [
        {"id": mid, "object": "model", "created": _epoch(created), "owned_by": "ragline"}
        for mid, created in rl.answers.completion_models(caller)]}


def _epoch(iso: str) -> int:
    try:
        return int(datetime.fromisoformat(iso).timestamp())
    except ValueError:
        return 0


async def _body(request: Request) -> Any:
    raw = await request.body()
    try:
        return json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError):
        raise bad("The request body is not valid JSON", None) from None


SSE_FRAME: dict[str, Any] = {
    "type": "object", "description": "One server-sent event: its data line, a "
    "chat.completion.chunk as JSON, or '[DONE]' after the last one.",
    "properties": {"data": {"type": "string",
                            "description": "A chat.completion.chunk object, or [DONE]."}},
    "required": ["data"]}


@router.post("/v1/chat/completions", response_model=None, openapi_extra={
    "requestBody": {"required": True, "content": {"application/json": {
        "schema": ChatCompletionBody.model_json_schema(),
        "example": BODY_EXAMPLE}}}},
    responses={200: {"model": ChatCompletionOut,
                     "description": "stream false: a chat.completion. stream true: "
                     "text/event-stream of chat.completion.chunk frames, the last with "
                     "finish_reason 'stop' and the 'ragline' field, then 'data: [DONE]'.",
                     "content": {"text/event-stream": {"schema": SSE_FRAME,
                                                       "example": SSE_EXAMPLE}}},
               **ERRORS})
async def chat_completions(request: Request, rl: RL, caller: Caller) -> Response:
    """One chat turn of spec 001 in OpenAI's format (see docs/answers.md)."""
    body = parse_completion(await _body(request))
    turn = await rl.answers.completion_turn(
        caller, body.model, body.message, body.history,
        AnswerOptions(body.system, body.temperature, body.max_tokens, body.stop))
    out = Completion(body.model)
    cite = rl.settings.openai_citations
    if not body.stream:
        result = await turn.run()
        text = result.pop("answer") + (citations(result["sources"]) if cite else "")
        return JSONResponse(out.whole(text, result))

    async def frames() -> AsyncIterator[str]:
        yield out.chunk({"role": "assistant", "content": ""})
        try:
            async for ev in turn.events():
                if ev.kind == "token":
                    yield out.chunk({"content": ev.data["text"]})
                elif ev.kind == "done":
                    if cite and (extra := citations(ev.data["sources"])):
                        yield out.chunk({"content": extra})
                    yield out.chunk({}, "stop", ev.data)
        except RaglineError as exc:  # after the stream started: OpenAI's error frame
            yield sse_data(json.loads(bytes(from_ragline(exc).body)))
            return
        yield DONE

    return StreamingResponse(frames(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


@router.api_route("/v1/{path:path}", include_in_schema=False,
                  methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
def unknown(path: str, request: Request) -> Response:
    """Unknown ``/v1`` paths (and wrong methods on known ones) in OpenAI's error shape."""
    known = {"models": "GET", "chat/completions": "POST"}
    if path.strip("/") in known:
        return openai_error(405, f"Use {known[path.strip('/')]} on /v1/{path.strip('/')}",
                            "method_not_allowed")
    return openai_error(404, f"Unknown path /v1/{path} (this server offers GET /v1/models "
                        "and POST /v1/chat/completions)", "not_found")
