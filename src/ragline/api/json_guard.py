"""Request bodies and query strings every store can hold, within a nesting budget
(issue 32); responses that survive records written before these checks.

:func:`check_json_body` runs in the request guard (:mod:`ragline.api.middleware`) on
every JSON body, so every endpoint is covered at once (document writes and deletes,
every search mode, ingestion, chat, jobs): a string holding a lone surrogate or NUL
(:mod:`ragline.core.text`) anywhere, or nesting deeper than ``max_json_depth``, is a
400 naming the field before any route runs. orjson's reading (which the guard makes
anyway) is walked once, its ``embedding`` arrays skipped (the schemas take flat lists
of numbers there), so a bulk write's vectors cost nothing; orjson refuses lone
surrogates itself, and such a body takes the standard library's reading, which
accepts them, to name the field.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl

from fastapi.responses import JSONResponse

from ragline.core.text import UNSTORABLE, repair_value, unstorable

_MAYBE_BAD = re.compile(rb"\\u(?:[dD][89a-fA-F]|0000)|\xed[\xa0-\xbf]")
"""A lone surrogate or NUL as JSON escapes, or a surrogate written as raw (CESU) bytes,
which the standard library's parser accepts."""


def _stored_text(field: str, what: str) -> str:
    return (f"Invalid request: {field} holds {what}, which cannot be stored; send valid "
            "Unicode text without NUL characters")


def _too_deep(path: str, max_depth: int) -> str:
    return (f"Invalid request: '{path or 'body'}' is nested deeper than {max_depth} levels "
            "(setting max_json_depth)")


_Path = tuple[Any, ...]  # (parent path, key), built as the walk goes; () is the body


def _render(path: _Path) -> str:
    parts: list[str] = []
    while path:
        path, key = path
        parts.append(str(key))
    return ".".join(reversed(parts)) or "body"


_WALKED = (str, dict, list)


def _scan(doc: Any, max_depth: int) -> str | None:
    """One walk over a parsed body: the 400 message for the first value nested deeper than
    ``max_depth`` or the first key or string no store can hold, else ``None``.
    ``embedding`` values are not walked (the schemas take flat lists of numbers there).
    Paths are linked pairs, rendered only for the message."""
    search = UNSTORABLE.search
    stack: list[tuple[Any, int, _Path]] = [(doc, 1, ())]
    while stack:
        value, depth, path = stack.pop()
        if depth > max_depth:
            return _too_deep(_render(path), max_depth)
        if type(value) is str:
            if search(value):
                return _stored_text(f"'{_render(path)}'", str(unstorable(value)))
        elif type(value) is dict:
            for key, sub in value.items():
                if type(key) is str and search(key):
                    return _stored_text(f"the key {key!r} in '{_render(path)}'",
                                        str(unstorable(key)))
                if key != "embedding" and isinstance(sub, _WALKED):
                    stack.append((sub, depth + 1, (path, key)))
        elif type(value) is list:
            stack.extend((sub, depth + 1, (path, i))
                         for i, sub in enumerate(value) if isinstance(sub, _WALKED))
    return None


def check_json_body(body: bytes, parsed: Any | None, max_depth: int) -> str | None:
    """The 400 message for a JSON body, or ``None`` when it may go on.

    ``parsed`` is orjson's reading (``None`` when orjson refused the body: invalid JSON,
    NaN, or a lone surrogate, which the standard library reads). An orjson reading is
    walked once (:func:`_scan`); a refused body only when it may hold a lone surrogate or
    NUL, or more brackets than ``max_depth``."""
    doc = parsed
    if doc is None:
        if (_MAYBE_BAD.search(body) is None
                and body.count(b"[") + body.count(b"{") <= max_depth):
            return None  # invalid JSON (or NaN): the route's parser reports it
        try:
            doc = json.loads(body)
        except RecursionError:
            return _too_deep("body", max_depth)
        except ValueError:
            return None
    return _scan(doc, max_depth)


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
