"""``POST /api/chat`` (spec 001's chat flow) and ``GET/DELETE /api/conversations/{id}``.

``stream: true`` (the default) answers ``text/event-stream``: ``token`` events
(``{"text": ...}``) as the model writes, then one ``done`` event with the
conversation id, strategy, path, tool, sources and timings; a failure after the
stream started is an ``error`` event (``{"error", "message"}``). Everything before
the first token (unknown conversation, no model configured...) is an ordinary
JSON error with its status.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from ragline.api.deps import RL, Caller
from ragline.api.schemas_ops import ChatAnswer, ConversationOut
from ragline.api.schemas_out import ok
from ragline.errors import RaglineError

router = APIRouter(tags=["answers"])


class ChatBody(BaseModel):
    message: str = Field(..., min_length=1, max_length=8000)
    conversation_id: str | None = None
    collection: str | None = None
    stream: bool = True

    model_config = ConfigDict(json_schema_extra={"examples": [
        {"message": "how do nodes talk?", "collection": "docs", "stream": False}]})


SSE_EXAMPLE = ('event: token\ndata: {"text": "Nodes talk"}\n\n'
               'event: token\ndata: {"text": " over topics."}\n\n'
               'event: done\ndata: {"conversation_id": "c0ffee", "strategy": "rag", ...}\n\n')
SSE_EVENT: dict[str, Any] = {
    "type": "object", "description": "One server-sent event: its name and its JSON data.",
    "properties": {"event": {"type": "string", "enum": ["token", "done", "error"]},
                   "data": {"type": "string", "description": "A JSON object."}},
    "required": ["event", "data"]}
CHAT_RESPONSES: dict[int | str, dict[str, Any]] = {200: {
    **ok(ChatAnswer, description="stream: false: the answer as JSON. stream: true (the "
         "default): text/event-stream of 'token' events, then one 'done' event with the "
         "conversation id, strategy, path, tool, sources and timings ('error' on a "
         "failure after the stream started).")[200],
    "content": {"application/json": {},  # the model's example: api/openapi.py
                "text/event-stream": {"schema": SSE_EVENT, "example": SSE_EXAMPLE}}}}


def sse(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"


@router.post("/api/chat", response_model=None, responses=CHAT_RESPONSES)
async def chat(body: ChatBody, rl: RL, caller: Caller) -> dict[str, Any] | StreamingResponse:
    """Answer a message from the caller's knowledge base (or a tool) with the configured
    chat model, in a conversation; streamed as server-sent events unless ``stream: false``."""
    turn = await rl.answers.chat_turn(caller, body.message, conversation_id=body.conversation_id,
                              collection=body.collection)
    if not body.stream:
        return await turn.run()

    async def events() -> AsyncIterator[str]:
        try:
            async for ev in turn.events():
                yield sse(ev.kind, ev.data)
        except RaglineError as exc:
            yield sse("error", {"error": exc.code, "message": exc.message})

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


@router.get("/api/conversations/{conversation_id}", responses=ok(ConversationOut))
def get_conversation(conversation_id: str, rl: RL, caller: Caller) -> dict[str, Any]:
    """A conversation of the caller's tenant with its messages."""
    return rl.answers.conversation(caller, conversation_id)


@router.delete("/api/conversations/{conversation_id}", status_code=204,
               responses={204: {"description": "Deleted (no body)."}})
def delete_conversation(conversation_id: str, rl: RL, caller: Caller) -> Response:
    """Delete a conversation of the caller's tenant."""
    rl.answers.delete_conversation(caller, conversation_id)
    return Response(status_code=204)
