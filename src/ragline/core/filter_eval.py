"""Plain-Python evaluation of the ``where`` AST.

It is the executable definition of the language's semantics: the property
tests check every store against it, and it serves stores that have no native
filtering.
"""

from __future__ import annotations

from typing import Any

from ragline.core.filters import And, Eq, In, Node, Not, Or, Range, Scalar


def _values(meta: dict[str, Any], field: str) -> list[Any]:
    if field not in meta:
        return []
    v = meta[field]
    if v is None:
        return []
    return list(v) if isinstance(v, list) else [v]


def _same(a: Any, b: Scalar) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return bool(a == b)


def _cmp(a: Any, op: str, b: float) -> bool:
    if isinstance(a, bool) or not isinstance(a, int | float):
        return False
    if op == "$gt":
        return a > b
    if op == "$gte":
        return a >= b
    if op == "$lt":
        return a < b
    return a <= b


def matches(node: Node | None, meta: dict[str, Any]) -> bool:
    if node is None:
        return True
    if isinstance(node, Eq):
        return any(_same(v, node.value) for v in _values(meta, node.field))
    if isinstance(node, In):
        return any(_same(v, x) for v in _values(meta, node.field) for x in node.values)
    if isinstance(node, Range):
        return any(_cmp(v, node.op, node.value) for v in _values(meta, node.field))
    if isinstance(node, Not):
        return not matches(node.child, meta)
    if isinstance(node, And):
        return all(matches(c, meta) for c in node.children)
    if isinstance(node, Or):
        return any(matches(c, meta) for c in node.children)
    raise TypeError(f"unknown filter node {node!r}")
