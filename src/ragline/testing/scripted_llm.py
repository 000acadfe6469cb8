"""A deterministic chat model for tests: answers from a script, records every call.

Not registered under the ``ragline.llms`` entry points, so no setting can select
it: tests hand it to the facade directly (``Ragline(settings, llm=...)``).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ragline.providers.base import Health, ProviderConfig
from ragline.providers.llms.base import Message

Reply = str | BaseException | Callable[[list[Message]], str]


# The tool-choice prompt asks for {"tool_name": ...}: a rule key that answers it.
TOOL_DECISION = "tool_name"
NO_TOOL = '{"tool_name": "none"}'


def answer_from_context(messages: list[Message]) -> str:
    """A reply that shows which retrieved documents reached the prompt:
    ``Answer from: <title>, <title>`` (``no documents`` when there were none)."""
    prompt = "\n".join(m["content"] for m in messages)
    titles = re.findall(r"Document \(Source: [^,]*, Title: ([^,]+),", prompt)
    return "Answer from: " + (", ".join(titles) if titles else "no documents")


def citing_model() -> ScriptedChatModel:
    """Never picks a tool; answers with :func:`answer_from_context`."""
    return ScriptedChatModel(default=answer_from_context, rules={TOOL_DECISION: NO_TOOL})


class ScriptedConfig(ProviderConfig):
    pass


@dataclass
class Call:
    messages: list[Message]
    json_mode: bool
    stream: bool
    max_tokens: int | None
    temperature: float | None = None
    stop: list[str] | None = None

    @property
    def prompt(self) -> str:
        return "\n".join(m["content"] for m in self.messages)


@dataclass
class ScriptedChatModel:
    """Replies are taken in order from ``replies``; then ``default`` answers. A reply may
    be a string, an exception to raise, or a function of the messages. ``rules`` (checked
    first) map a substring of the prompt to a reply, for tests that do not care about
    call order."""

    replies: list[Reply] = field(default_factory=list)
    default: Reply = '{"tool_name": "none"}'
    rules: dict[str, Reply] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    model: str = "scripted"

    name: ClassVar[str] = "scripted"
    kind: ClassVar[str] = "llm"
    Config: ClassVar[type[ProviderConfig]] = ScriptedConfig

    def _next(self, messages: list[Message]) -> str:
        text = "\n".join(m["content"] for m in messages)
        reply: Reply | None = None
        for needle, r in self.rules.items():
            if needle in text:
                reply = r
                break
        if reply is None:
            reply = self.replies.pop(0) if self.replies else self.default
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            return reply(messages)
        return reply

    async def complete(self, messages: list[Message], *, json_mode: bool = False,
                       max_tokens: int | None = None) -> str:
        self.calls.append(Call(messages, json_mode, False, max_tokens))
        return self._next(messages)

    async def stream(self, messages: list[Message], *, max_tokens: int | None = None,
                     temperature: float | None = None,
                     stop: list[str] | None = None) -> AsyncIterator[str]:
        self.calls.append(Call(messages, False, True, max_tokens, temperature, stop))
        text = self._next(messages)
        for i, word in enumerate(text.split(" ")):
            yield word if i == 0 else " " + word

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return ScriptedConfig.model_json_schema()

    def capabilities(self) -> list[str]:
        return ["chat", "stream", "scripted"]

    def health(self) -> Health:
        return Health.now("ok", {"model": self.model, "scripted": True})
