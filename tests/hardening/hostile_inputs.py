"""Hostile inputs shared by the hardening tests and the hostile tier (issue 32).

* :func:`alias_bomb` — Markdown whose YAML frontmatter nests aliases ``levels`` deep,
  ``width`` uses each: ~450 bytes that expand to ``width ** levels`` values.
* :data:`BAD_STRINGS` — JSON string literals no store can hold (a lone surrogate of
  each half, NUL), as they are written in a JSON body (escaped), with the character each
  stands for; :func:`poison` puts one in every string of a JSON value, for a sweep over
  the API.
"""

from __future__ import annotations

from typing import Any

BAD_STRINGS: dict[str, str] = {
    "lone high surrogate": "\\ud800",
    "lone low surrogate": "\\udfff",
    "NUL": "\\u0000",
}
"""Name -> the escape as it appears inside a JSON string literal."""


def alias_bomb(levels: int = 10, width: int = 9) -> bytes:
    """A Markdown file whose frontmatter expands to ``width ** levels`` values."""
    lines = ["---", "a: &a [" + ",".join(["lol"] * width) + "]"]
    previous = "a"
    for level in range(levels - 1):
        lines.append(f"l{level}: &l{level} [" + ",".join([f"*{previous}"] * width) + "]")
        previous = f"l{level}"
    lines += ["---", "# Bomb", "", "A body."]
    return "\n".join(lines).encode()


def poison(value: Any, escape: str, marker: str = "\x01POISON\x01") -> Any:
    """``value`` with ``marker`` appended to every string (keys left alone); dump the result
    with ``json.dumps`` and replace the marker's JSON form by ``escape`` to get a body
    carrying the bad character in every string field (see :func:`poisoned_body`)."""
    if isinstance(value, str):
        return value + marker
    if isinstance(value, list):
        return [poison(v, escape, marker) for v in value]
    if isinstance(value, dict):
        return {k: poison(v, escape, marker) for k, v in value.items()}
    return value


def poisoned_body(value: Any, escape: str) -> bytes:
    """The JSON body of ``value`` with ``escape`` at the end of every string value."""
    import json

    marker = "\x01POISON\x01"
    text = json.dumps(poison(value, escape, marker))
    return text.replace(json.dumps(marker)[1:-1], escape).encode()
