"""Turn the operations of ``endpoints`` into methods of the sync and async clients.

``Client.search = blocking(endpoints.search)`` gives ``Client`` a method with
exactly the signature and docstring of ``endpoints.search`` that returns the
parsed answer; ``awaiting`` does the same for ``AsyncClient`` with a coroutine.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from ragline.client.models import ChatEvent
from ragline.client.transport import Call

P = ParamSpec("P")
T = TypeVar("T")


class Runs(Protocol):
    def _run(self, call: Call[T]) -> T: ...


class AwaitsRuns(Protocol):
    async def _run(self, call: Call[T]) -> T: ...


def blocking(op: Callable[P, Call[T]]) -> Callable[Concatenate[Runs, P], T]:
    def method(self: Runs, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(op(*args, **kwargs))
    return _named(method, op)


def awaiting(op: Callable[P, Call[T]]) -> Callable[Concatenate[AwaitsRuns, P], Awaitable[T]]:
    async def method(self: AwaitsRuns, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(op(*args, **kwargs))
    return _named(method, op)


F = TypeVar("F", bound=Callable[..., Any])


def _named(method: F, op: Callable[..., Any]) -> F:
    """Name and docstring of the operation (not ``functools.wraps``: the signature a
    reader sees must return the answer, not the operation's ``Call``)."""
    method.__name__ = method.__qualname__ = op.__name__
    method.__doc__ = op.__doc__
    return method


class SseReader:
    """Server-sent events, fed one line at a time (the chat stream's framing)."""

    def __init__(self) -> None:
        self._event = "message"
        self._data: list[str] = []

    def feed(self, line: str) -> ChatEvent | None:
        if line == "":
            if not self._data:
                return None
            raw = "\n".join(self._data)
            event, self._event, self._data = self._event, "message", []
            try:
                data: Any = json.loads(raw)
            except ValueError:
                data = {"text": raw}
            return ChatEvent(event=event, data=data if isinstance(data, dict) else
                             {"value": data})
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        return None
