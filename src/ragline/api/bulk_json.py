"""Bulk write bodies read with simdjson, their vectors straight into one matrix.

A batch of 1,000 384-d documents is 384,000 numbers. Read by orjson, each becomes
a Python float (17-31 ms per batch, measured), which the service then checks type by
type and copies into a numpy matrix (another ~9 ms): over half of the server's
work on a bulk write. Here simdjson parses the body and each ``embedding`` array
is copied from its tape as doubles (``as_buffer``) into one float64 matrix, whose
rows become the documents' ``embedding`` values (7 ms for the same batch).

The reading must be the one orjson gives, or none. So this returns ``None`` (and
the request guard reads the body with orjson as before, errors and all) for any
body it cannot read the same way:

* anything simdjson refuses (invalid JSON or UTF-8, NaN/Infinity, numbers beyond
  the float range, integers beyond 64 bits, nesting deeper than its limit);
* a body with an array inside an array anywhere: ``as_buffer`` flattens
  ``[[1.0], [2.0]]`` into ``[1.0, 2.0]``, so a nested embedding would pass for a
  flat one. Every nested array's ``[`` follows a ``[`` or a ``,`` (whitespace
  aside), and a body without such a ``[`` (found with numpy) has none; a ``[``
  like that inside a string only sends that body the slow way;
* an object with a key twice (simdjson's lookup finds the first, orjson keeps the
  last).

An ``embedding`` holding anything but numbers (``true``, a string, ``null``) is
left as the Python list it is, so the service's checks name it as they always
did; numbers are read as doubles, which is what the service makes of them too.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import numpy as np
import simdjson

DOCUMENTS_PATH = re.compile(r"^(?:/api)?/collections/[^/]+/documents$")
_OPEN, _COMMA = 0x5B, 0x2C
_SPACE = np.array([0x20, 0x09, 0x0A, 0x0D], dtype=np.uint8)
_local = threading.local()


class _Unreadable(Exception):
    """The body is not one this module reads as orjson would."""


def read_documents_body(body: bytes) -> dict[str, Any] | None:
    """The JSON of a ``POST /collections/{name}/documents`` body, with each numeric
    ``embedding`` as a float64 row (a read-only view of one matrix); ``None`` when
    the body must be read by orjson instead (see the module docstring)."""
    if _has_nested_array(body):
        return None
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = simdjson.Parser()
    try:
        doc = parser.parse(body)
        try:
            return _top(doc) if isinstance(doc, simdjson.Object) else None
        finally:
            del doc  # the parser may be reused only once its proxies are gone
    except (ValueError, RuntimeError, TypeError, KeyError, _Unreadable):
        # KeyError: simdjson cannot look up a key holding a NUL ("\u0000") it listed
        return None


def _has_nested_array(body: bytes) -> bool:
    raw = np.frombuffer(body, dtype=np.uint8)
    opens = np.flatnonzero(raw == _OPEN)
    if not len(opens):
        return False
    before = raw[np.maximum(opens - 1, 0)]
    before[opens == 0] = 0
    if ((before == _OPEN) | (before == _COMMA)).any():
        return True
    spaced = opens[np.isin(before, _SPACE)]  # "[ [" or ", [" (pretty-printed bodies)
    if not len(spaced):
        return False
    # the previous non-space byte of each, looked for in the 16 bytes before it (a wider
    # indent: the slow way for that body, whatever it holds)
    back = spaced[:, None] - np.arange(1, 17)
    window = np.where(back >= 0, raw[np.maximum(back, 0)], _OPEN)
    solid = ~np.isin(window, _SPACE)
    if not solid.any(axis=1).all():
        return True
    prev = window[np.arange(len(spaced)), solid.argmax(axis=1)]
    return bool(((prev == _OPEN) | (prev == _COMMA)).any())


def _plain(value: Any) -> Any:
    if isinstance(value, simdjson.Object):
        return value.as_dict()
    if isinstance(value, simdjson.Array):
        return value.as_list()
    return value


def _keys(obj: Any) -> list[str]:
    keys: list[str] = list(obj.keys())
    if len(set(keys)) != len(keys):
        raise _Unreadable
    return keys


def _top(doc: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in _keys(doc):
        value = doc[key]
        if key == "documents" and isinstance(value, simdjson.Array):
            out[key] = _documents(value)
        else:
            out[key] = _plain(value)
    return out


def _documents(items: Any) -> list[Any]:
    docs: list[Any] = []
    rows: list[tuple[dict[str, Any], bytes, int]] = []
    for item in items:
        if not isinstance(item, simdjson.Object):
            docs.append(_plain(item))
            continue
        doc: dict[str, Any] = {}
        for key in _keys(item):
            value = item[key]
            if key == "embedding" and isinstance(value, simdjson.Array) and len(value):
                try:
                    rows.append((doc, value.as_buffer(of_type="d"), len(value)))
                    doc[key] = None  # filled in below, keeping the key's place
                    continue
                except TypeError:  # not all numbers: the service names what it found
                    pass
            doc[key] = _plain(value)
        docs.append(doc)
    if rows:
        widths = {n for _, _, n in rows}
        if len(widths) == 1:
            mat = np.frombuffer(b"".join(buf for _, buf, _ in rows), dtype=np.float64)
            mat = mat.reshape(len(rows), widths.pop())
            for i, (doc, _, _) in enumerate(rows):
                doc["embedding"] = mat[i]
        else:  # lengths differ (the service refuses that): rows of their own
            for doc, buf, _ in rows:
                doc["embedding"] = np.frombuffer(buf, dtype=np.float64)
    return docs
