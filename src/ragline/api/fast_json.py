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
either way) — by the guard, on a worker thread for a large body, which also hands
over the raw body (:data:`~ragline.api.middleware.RAW_BODY`) so FastAPI's read of it
copies nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute

from ragline.api.middleware import PARSED_JSON, RAW_BODY, wide_float


class FastJSONRequest(Request):
    async def body(self) -> bytes:
        if not hasattr(self, "_body"):
            raw = self.scope.pop(RAW_BODY, None)  # the guard's: no second 60 MB copy here
            if raw is None:
                return await super().body()
            self._body = raw
        return self._body

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            doc = self.scope.pop(PARSED_JSON, None)  # wide integers already re-read
            if doc is None:  # no guard in front (or it could not read the body)
                body = await self.body()
                try:
                    doc = orjson.loads(body)
                except orjson.JSONDecodeError:
                    doc = json.loads(body)  # the standard library's answer and error
                if wide_float(doc):
                    doc = json.loads(body)
            self._json = doc
        return self._json


class FastJSONRoute(APIRoute):
    """An ``APIRoute`` whose handler sees a :class:`FastJSONRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route_handler(request: Request) -> Response:
            return await handler(FastJSONRequest(request.scope, request.receive, request._send))

        return route_handler
