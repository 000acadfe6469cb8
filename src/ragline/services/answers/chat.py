"""The chat turn of spec 001 section 4.2, with spec 000's conversations.

One turn:

1. conversation: load it (tenant-scoped) or start one; plan the search text from the
   running topic (:mod:`ragline.services.answers.topics`: ``first message (raw query)`` or
   ``follow-up (contextualized topic)``);
2. retrieve: :func:`fetch_rag_context` on the caller's tenant (limit 3, 100
   candidates); the context is kept only if the top document's relevance reaches
   ``rag_relevance_threshold``;
3. tool decision: the ``tool_decision`` prompt (knowledge-base block only with kept
   context), JSON parsed tolerantly and validated against the registered tools;
4. synthesis: a chosen tool runs and the ``post_tool`` prompt answers (path ``tool``);
   ``none`` with context -> ``strict_context`` (path ``rag``); ``none`` without ->
   ``general_knowledge`` (path ``general``);
5. the answer streams as tokens; the user and assistant messages and the new topic
   are stored together when it is complete.

A stateless turn (``/v1/chat/completions``, ``ChatRequest.history`` set) has no stored
conversation: its topic comes from the earlier user messages the client sent
(:func:`~ragline.services.answers.topics.history_topic`) and nothing is written in 5.

:meth:`ChatService.prepare` does 1-4 and raises ordinary errors (404, 503...), so
the HTTP layer can answer with a status before a stream starts;
:meth:`PreparedTurn.events` streams 5.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ragline.catalog.conversations import Conversation, Message
from ragline.catalog.tables import ConversationRows
from ragline.errors import InvalidInput
from ragline.prompts import Prompts, clip, profile_for
from ragline.providers.llms.base import ChatModel
from ragline.services.answers.tool_choice import ToolDecision, describe_tools, parse_tool_decision
from ragline.services.answers.topics import history_topic, plan_query
from ragline.services.search.rag_context import (
    Hit,
    RagContext,
    Retriever,
    TurnEmbeddings,
    fetch_rag_context,
    format_context,
    passes_threshold,
)
from ragline.services.tools.base import Tool, ToolContext

log = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 8000
DECISION_MAX_TOKENS = 128
"""A tool decision is one small JSON object; the cap stops a model that pads JSON-mode
output with whitespace from running on (seen with small models under a JSON grammar)."""


@dataclass
class ChatConfig:
    assistant_name: str = "ragline"
    relevance_threshold: float = 0.75
    context_limit: int = 3
    num_candidates: int = 100
    allow_private_urls: bool = False
    default_collection: str | None = None
    max_tokens: int | None = None
    prompt_profile: str = "spec"


@dataclass
class AnswerOptions:
    """A client's own settings for the answer call (``/v1/chat/completions``): a system
    message sent before the synthesis prompt, and ``temperature``, ``max_tokens`` and
    ``stop`` passed to the model. Ragline's own short calls (topic, tool decision) keep
    theirs: a client's stop sequence must not cut the tool decision's JSON."""

    system: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None


@dataclass
class ChatRequest:
    tenant: str
    message: str
    conversation_id: str | None = None
    collection: str | None = None
    # The facade's caller-scoped retriever (it refuses collections the caller may not
    # use, e.g. one a tool names); None: the service's own.
    retriever: Retriever | None = None
    # A stateless turn (``/v1/chat/completions``): the client sends the earlier user
    # messages instead of a conversation id; they give the turn its topic
    # (:func:`history_topic`) and nothing is stored. None: a stored conversation.
    history: list[str] | None = None
    # No knowledge base (the general model): no retrieval, even with a default collection
    general: bool = False
    options: AnswerOptions = field(default_factory=AnswerOptions)


@dataclass
class Event:
    """``token`` (data: {"text"}) or ``done`` (data: the turn's summary)."""

    kind: str
    data: dict[str, Any]


@dataclass
class PreparedTurn:
    service: ChatService
    request: ChatRequest
    conversation: Conversation
    llm: ChatModel
    prompt: str
    path: str
    strategy: str
    query: str
    topic: str
    tool: dict[str, Any] | None
    sources: list[dict[str, Any]]
    t0: float
    timings: dict[str, float] = field(default_factory=dict)
    llm_s: float = 0.0
    answer: str = ""
    decision_prompt: str = ""
    max_tokens: int | None = None  # the prompt profile's answer cap, else the setting's

    async def events(self) -> AsyncIterator[Event]:
        t_call = time.perf_counter()
        parts: list[str] = []
        first = True
        opts = self.request.options
        messages = [{"role": "user", "content": self.prompt}]
        if opts.system:
            messages.insert(0, {"role": "system", "content": opts.system})
        extra: dict[str, Any] = {}  # only when set: a model without them still streams
        if opts.temperature is not None:
            extra["temperature"] = opts.temperature
        if opts.stop:
            extra["stop"] = opts.stop
        async for delta in self.llm.stream(
                messages,
                max_tokens=opts.max_tokens or self.max_tokens or self.service.config.max_tokens,
                **extra):
            if first:
                self.timings["first_token_ms"] = _ms(time.perf_counter() - self.t0)
                first = False
            parts.append(delta)
            yield Event("token", {"text": delta})
        self.llm_s += time.perf_counter() - t_call
        self.answer = "".join(parts)
        await self.service._finish(self)
        yield Event("done", self.summary())

    async def run(self) -> dict[str, Any]:
        """The whole turn without streaming (tokens are joined)."""
        async for _ in self.events():
            pass
        return {"answer": self.answer, **self.summary()}

    def summary(self) -> dict[str, Any]:
        return {"conversation_id": self.conversation.id or None, "strategy": self.strategy,
                "path": self.path, "tool": self.tool, "sources": self.sources,
                "query": self.query, "topic": self.topic, "timings": self.timings}


def _lowest(*caps: int | None) -> int | None:
    """The lowest of the caps that are set (a profile lowers a cap, never raises it)."""
    return min((c for c in caps if c is not None), default=None)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


class ChatService:
    def __init__(self, llm: Callable[[], ChatModel], retriever: Retriever,
                 conversations: ConversationRows, tools: Callable[[], Mapping[str, Tool]],
                 collection_metadata: Callable[[str], Mapping[str, Any]],
                 config: ChatConfig) -> None:
        self.llm = llm  # a getter: raises LLMNotConfigured when there is no model
        self.retriever = retriever
        self.conversations = conversations
        self.tools = tools
        self.collection_metadata = collection_metadata
        self.config = config

    async def prepare(self, req: ChatRequest) -> PreparedTurn:
        t0 = time.perf_counter()
        message = (req.message or "").strip()
        if not message:
            raise InvalidInput("'message' must not be empty")
        if len(message) > MAX_MESSAGE_CHARS:
            raise InvalidInput(f"'message' is longer than {MAX_MESSAGE_CHARS} characters")
        llm = self.llm()
        retriever = req.retriever or self.retriever
        if req.history is not None:  # stateless: a topic from the history, nothing stored
            conv = Conversation("", req.tenant, req.collection, history_topic(req.history),
                                "", "")
        elif req.conversation_id:
            conv = self.conversations.get(req.tenant, req.conversation_id, with_messages=False)
        else:
            conv = self.conversations.create(req.tenant, req.collection
                                             or self.config.default_collection)
        collection = (None if req.general else
                      req.collection or conv.collection or self.config.default_collection)
        meta = self.collection_metadata(collection) if collection else None
        profile = profile_for(self.config.prompt_profile, meta)
        prompts = Prompts(self.config.assistant_name, meta, profile)
        timings: dict[str, float] = {}
        plan, llm_s = await plan_query(conv.topic, message, llm, prompts)
        timings["topic_ms"] = _ms(llm_s)

        t = time.perf_counter()
        embeddings = TurnEmbeddings()
        ctx = RagContext(None, [])
        if collection:
            ctx = await fetch_rag_context(
                retriever, req.tenant, collection, plan.query,
                limit=min(profile.context_limit or self.config.context_limit,
                          self.config.context_limit),
                num_candidates=self.config.num_candidates,
                embeddings=embeddings)
        timings["retrieval_ms"] = _ms(time.perf_counter() - t)
        relevant = passes_threshold(ctx, self.config.relevance_threshold)
        rag_context = None
        if relevant:
            rag_context = ctx.context if profile.chunk_chars is None else format_context(
                [replace(h, text=clip(h.text, profile.chunk_chars)) for h in ctx.documents])
        log.info("chat retrieval: %d document(s), top relevance %s, threshold %.2f -> %s",
                 len(ctx.documents), ctx.top_relevance, self.config.relevance_threshold,
                 "context used" if relevant else "no context")

        tools = dict(self.tools())
        t = time.perf_counter()
        decision_prompt = prompts.tool_decision(
            describe_tools(tools), rag_context, message,
            {n: t.arguments for n, t in tools.items()})
        raw = await llm.complete([{"role": "user", "content": decision_prompt}],
                                 json_mode=True, max_tokens=DECISION_MAX_TOKENS)
        decision_s = time.perf_counter() - t
        llm_s += decision_s
        timings["decision_ms"] = _ms(decision_s)
        decision = parse_tool_decision(raw, tools)
        if decision.problem:
            log.warning("tool decision ignored (%s); answering without a tool", decision.problem)

        tool_info: dict[str, Any] | None = None
        sources: list[dict[str, Any]] = []
        if decision.tool_name != "none":
            prompt, tool_info, sources = await self._run_tool(
                decision, tools, req.tenant, collection, embeddings, prompts, message,
                timings, retriever)
            path = "tool"
        elif rag_context:
            prompt = prompts.strict_context(rag_context, message)
            sources = [h.source() for h in ctx.documents]
            path = "rag"
        else:
            prompt = prompts.general_knowledge(message)
            path = "general"
        if decision.problem:
            tool_info = {"name": None, "rejected": decision.problem}
        timings["prepare_ms"] = _ms(time.perf_counter() - t0)
        return PreparedTurn(self, req, conv, llm, prompt, path, plan.strategy, plan.query,
                            plan.topic, tool_info, sources, t0, timings, llm_s,
                            decision_prompt=decision_prompt,
                            max_tokens=_lowest(profile.max_tokens, self.config.max_tokens))

    async def _run_tool(self, decision: ToolDecision, tools: Mapping[str, Tool], tenant: str,
                        collection: str | None, embeddings: TurnEmbeddings, prompts: Prompts,
                        message: str, timings: dict[str, float], retriever: Retriever,
                        ) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
        tool = tools[decision.tool_name]
        tctx = ToolContext(tenant, collection, retriever,
                           allow_private_urls=self.config.allow_private_urls,
                           embeddings=embeddings)
        t = time.perf_counter()
        try:
            output = await tool.run(decision.arguments, tctx)
        except Exception as exc:  # a plugin's failure is reported to the model, not a 500
            log.warning("tool %s failed: %s", decision.tool_name, type(exc).__name__)
            output = {"error": f"tool '{decision.tool_name}' failed: "
                      f"{getattr(exc, 'message', type(exc).__name__)}"}
        timings["tool_ms"] = _ms(time.perf_counter() - t)
        hits: list[Hit] = tctx.options.get("sources", [])
        sources = [h.source() for h in hits]
        if isinstance(output, dict) and output.get("url") and not output.get("error"):
            sources.append({"id": output["url"], "title": output.get("title"),
                            "source_url": output["url"], "source_type": "url"})
        info = {"name": decision.tool_name, "arguments": decision.arguments,
                "error": output.get("error") if isinstance(output, dict) else None}
        return prompts.post_tool(message, decision.tool_name, output), info, sources

    async def _finish(self, turn: PreparedTurn) -> None:
        meta = {"strategy": turn.strategy, "path": turn.path, "tool": turn.tool,
                "sources": turn.sources}
        if turn.request.history is None:
            self.conversations.append(
                turn.request.tenant, turn.conversation.id,
                [Message("user", turn.request.message.strip(), {"query": turn.query}),
                 Message("assistant", turn.answer, meta)],
                topic=turn.topic)
        turn.timings["total_ms"] = _ms(time.perf_counter() - turn.t0)  # storage included
        turn.timings["llm_ms"] = _ms(turn.llm_s)
        turn.timings["overhead_ms"] = round(turn.timings["total_ms"] - turn.timings["llm_ms"], 2)
