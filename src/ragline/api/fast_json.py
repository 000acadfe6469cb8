"""Request bodies read with orjson on the bulk routes (documents, search).

Starlette parses JSON bodies with the standard library, on the event loop: 75 ms
for a batch of 1,000 384-d documents (measured), where orjson takes ~28 ms. The
request guard (:mod:`ragline.api.middleware`) already reads every JSON body with
orjson (:data:`~ragline.api.middleware.PARSED_JSON`), so these routes take that
reading instead of parsing again.

What is accepted and what each error says stay the standard library's: bodies
orjson refuses (NaN/Infinity, numbers beyond the float range, lone surrogates,
invalid JSON) never get an orjson reading; and orjson reads integers beyond 64
bits as floats, which would let such a metadata value through the int64 check,
so a reading holding an integral float of magnitude >= 2**63 outside an
``embedding`` is parsed again by the standard library (vectors become floats
either way).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute

from ragline.api.middleware import PARSED_JSON

_WIDE = float(2**63)


def _wide_float(doc: Any) -> bool:
    """Any integral float of magnitude >= 2**63 (what a wide integer literal becomes
    in orjson) outside ``embedding`` arrays."""
    stack = [doc]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(v for k, v in value.items() if k != "embedding")
        elif isinstance(value, list):
            stack.extend(value)
        elif type(value) is float and abs(value) >= _WIDE and value.is_integer():
            return True
    return False


class FastJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            doc = self.scope.pop(PARSED_JSON, None)
            if doc is None:  # no guard in front (or it could not read the body)
                body = await self.body()
                try:
                    doc = orjson.loads(body)
                except orjson.JSONDecodeError:
                    doc = json.loads(body)  # the standard library's answer and error
            if _wide_float(doc):
                doc = json.loads(await self.body())
            self._json = doc
        return self._json


class FastJSONRoute(APIRoute):
    """An ``APIRoute`` whose handler sees a :class:`FastJSONRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route_handler(request: Request) -> Response:
            return await handler(FastJSONRequest(request.scope, request.receive, request._send))

        return route_handler
