"""Text every store can hold (issue 32).

A lone UTF-16 surrogate (``"\\ud800"`` in JSON) cannot be encoded as UTF-8, and NUL
cannot be stored in PostgreSQL's ``text``: a request carrying either is refused
before anything is written, and a record that already holds one (written before this
check) is rendered with U+FFFD in its place rather than failing the listing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
"""NUL and the surrogate range (a valid pair never survives decoding as two halves)."""


def unstorable(text: str) -> str | None:
    """What makes ``text`` unstorable (``"a NUL character"``, ``"a lone surrogate
    (U+D800)"``), or ``None`` when it is fine."""
    m = UNSTORABLE.search(text)
    if m is None:
        return None
    char = m.group()
    return "a NUL character" if char == "\x00" else f"a lone surrogate (U+{ord(char):04X})"


def repaired(text: str) -> str:
    """``text`` with each unstorable character replaced by U+FFFD (NUL dropped)."""
    return UNSTORABLE.sub(lambda m: "" if m.group() == "\x00" else "\ufffd", text)


def walk_strings(value: Any, path: str = "") -> Iterator[tuple[str, str, bool]]:
    """``(dotted field path, string, is_key)`` for every key and string value in a JSON
    value (``documents.1.metadata.title``); a key comes with the path of its object."""
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        here, item = stack.pop()
        if isinstance(item, str):
            yield here or "body", item, False
        elif isinstance(item, dict):
            for key, sub in item.items():
                if isinstance(key, str):
                    yield here or "body", key, True
                stack.append((f"{here}.{key}" if here else str(key), sub))
        elif isinstance(item, list | tuple):
            stack.extend((f"{here}.{i}" if here else str(i), sub) for i, sub in enumerate(item))


def find_unstorable(value: Any, path: str = "") -> tuple[str, str] | None:
    """``(field, what)`` of the first string in ``value`` no store can hold: the field is
    ``'documents.0.text'``, or ``the key 'a\\x00' in 'documents.0.metadata'`` (written
    with Python's escapes, so the bad character itself is never echoed)."""
    for where, text, is_key in walk_strings(value, path):
        problem = unstorable(text)
        if problem is not None:
            field = f"the key {text!r} in '{where}'" if is_key else f"'{where}'"
            return field, problem
    return None


def repair_value(value: Any) -> Any:
    """``value`` (JSON-like) with every unstorable character repaired (:func:`repaired`)."""
    if isinstance(value, str):
        return repaired(value)
    if isinstance(value, dict):
        return {repaired(k) if isinstance(k, str) else k: repair_value(v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [repair_value(v) for v in value]
    return value
