"""Request bodies and query strings every store can hold, within a nesting budget
(issue 32); responses that survive records written before these checks.

:func:`check_json_body` runs in the request guard (:mod:`ragline.api.middleware`) on
every JSON body, so every endpoint is covered at once (document writes and deletes,
every search mode, ingestion, chat, jobs): a string holding a lone surrogate or NUL
(:mod:`ragline.core.text`) anywhere, or nesting deeper than ``max_json_depth``, is a
400 naming the field before any route runs. The common case costs one substring
search: orjson already refuses lone surrogates (the body then takes the standard
library's reading, which accepts them, to name the field) and NUL can only be written
as the escape ``\\u0000``. ``embedding`` arrays are not walked for depth (the schemas
take flat lists of numbers there), so a bulk write's vectors cost nothing.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl

from fastapi.responses import JSONResponse

from ragline.core.text import find_unstorable, repair_value, unstorable

_MAYBE_BAD = re.compile(rb"\\u(?:[dD][89a-fA-F]|0000)|\xed[\xa0-\xbf]")
"""A lone surrogate or NUL as JSON escapes, or a surrogate written as raw (CESU) bytes,
which the standard library's parser accepts."""


def _too_deep(doc: Any, limit: int) -> str | None:
    """The dotted path of the first value nested deeper than ``limit``, if any."""
    stack: list[tuple[Any, int, str]] = [(doc, 1, "")]
    while stack:
        value, depth, path = stack.pop()
        if depth > limit:
            return path or "body"
        if isinstance(value, dict):
            stack.extend((v, depth + 1, f"{path}.{k}" if path else str(k))
                         for k, v in value.items()
                         if k != "embedding" and isinstance(v, dict | list))
        elif isinstance(value, list):
            stack.extend((v, depth + 1, f"{path}.{i}" if path else str(i))
                         for i, v in enumerate(value) if isinstance(v, dict | list))
    return None


def check_json_body(body: bytes, parsed: Any | None, max_depth: int) -> str | None:
    """The 400 message for a JSON body, or ``None`` when it may go on.

    ``parsed`` is orjson's reading (``None`` when orjson refused the body: invalid JSON,
    NaN, or a lone surrogate, which the standard library reads)."""
    suspicious = _MAYBE_BAD.search(body) is not None if parsed is None else b"\\u0000" in body
    doc = parsed
    if doc is None:
        if not suspicious and body.count(b"[") + body.count(b"{") <= max_depth:
            return None  # invalid JSON (or NaN): the route's parser reports it
        try:
            doc = json.loads(body)
        except RecursionError:
            return (f"Invalid request: the body is nested deeper than {max_depth} levels "
                    "(setting max_json_depth)")
        except ValueError:
            return None
    deep = (_too_deep(doc, max_depth)
            if body.count(b"[") + body.count(b"{") > max_depth else None)
    if deep is not None:
        return (f"Invalid request: '{deep}' is nested deeper than {max_depth} levels "
                "(setting max_json_depth)")
    if suspicious:
        found = find_unstorable(doc)
        if found is not None:
            field, what = found
            return (f"Invalid request: {field} holds {what}, which cannot be stored; send "
                    "valid Unicode text without NUL characters")
    return None


def check_target(path: str, query_string: bytes) -> str | None:
    """The 400 message for a request path or query parameter no store can hold."""
    problem = unstorable(path)
    if problem is not None:
        return f"Invalid request: the path holds {problem}"
    if b"%00" in query_string or b"\x00" in query_string:
        for key, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
            if "\x00" in key or "\x00" in value:
                name = key.replace("\x00", "")
                return f"Invalid request: query parameter '{name}' holds a NUL character"
    return None


class SafeJSONResponse(JSONResponse):
    """A JSON response that renders a record holding a lone surrogate (stored before
    the checks above) with U+FFFD in its place instead of failing the whole listing."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return super().render(repair_value(content))
