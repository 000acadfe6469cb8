"""Translation of the ``where`` AST to Qdrant filters.

Shared by every Qdrant-backed provider. Two details keep Qdrant in step with
the reference semantics in :mod:`ragline.core.filter_eval`:

* numeric equality is a closed range, because ``MatchValue`` has no float form
  and would not match ``3.0`` against ``3``;
* negations are ``must_not``, which (like the reference) also matches points
  where the field is missing;
* the Edge binding turns a Python ``True`` in ``MatchValue`` into the integer
  1 (measured: it matched ``1`` and not ``true``), so booleans are also stored
  as ``"true"``/``"false"`` keywords under ``bools.<field>`` and matched there.
"""

from __future__ import annotations

import re
from typing import Any

import qdrant_edge as q

from ragline.core.filters import And, Eq, In, Node, Not, Or, Range
from ragline.errors import FilterError

META = "metadata"
BOOLS = "bools"


_RAW_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def key_segment(field: str) -> str:
    """``field`` as one JSON-path segment: quoted unless plainly safe.

    Unquoted, ``og:title`` is a path syntax error and ``a.b`` a nested path
    that never matches; quoted (``"og:title"``) Edge reads any key without a
    double quote or backslash, which :func:`ragline.core.filters.key_problem`
    refuses before anything is written. Plain keys stay unquoted so existing
    payload indexes keep their exact paths.
    """
    if _RAW_KEY.match(field):
        return field
    if '"' in field or "\\" in field:
        raise FilterError(f"metadata key {field!r} cannot be stored or filtered")
    return f'"{field}"'


def field_path(field: str) -> str:
    return f"{META}.{key_segment(field)}"


def bool_path(field: str) -> str:
    return f"{BOOLS}.{key_segment(field)}"


def bool_token(value: bool) -> str:
    return "true" if value else "false"


def bool_shadow(meta: dict[str, Any]) -> dict[str, list[str]]:
    """The keyword shadow of every boolean in a record's metadata."""
    out: dict[str, list[str]] = {}
    for k, v in meta.items():
        vals = v if isinstance(v, list) else [v]
        toks = [bool_token(x) for x in vals if isinstance(x, bool)]
        if toks:
            out[k] = toks
    return out


def _eq(field: str, value: Any) -> Any:
    key = field_path(field)
    if isinstance(value, bool):
        return q.FieldCondition(bool_path(field), match=q.MatchValue(bool_token(value)))
    if isinstance(value, str):
        return q.FieldCondition(key, match=q.MatchValue(value))
    v = float(value)
    return q.FieldCondition(key, range=q.RangeFloat(gte=v, lte=v))


def _range(node: Range) -> Any:
    kwargs = {node.op[1:]: node.value}
    return q.FieldCondition(field_path(node.field), range=q.RangeFloat(**kwargs))


def _in(node: In) -> Any:
    strings = [v for v in node.values if isinstance(v, str)]
    others = [v for v in node.values if not isinstance(v, str)]
    conds: list[Any] = []
    if strings:
        conds.append(q.FieldCondition(field_path(node.field), match=q.MatchAny(strings)))
    conds.extend(_eq(node.field, v) for v in others)
    return conds[0] if len(conds) == 1 else q.Filter(should=conds)


def to_condition(node: Node) -> Any:
    if isinstance(node, Eq):
        return _eq(node.field, node.value)
    if isinstance(node, In):
        return _in(node)
    if isinstance(node, Range):
        return _range(node)
    if isinstance(node, Not):
        return q.Filter(must_not=[to_condition(node.child)])
    if isinstance(node, And):
        return q.Filter(must=[to_condition(c) for c in node.children])
    if isinstance(node, Or):
        return q.Filter(should=[to_condition(c) for c in node.children])
    raise TypeError(f"unknown filter node {node!r}")


def tenant_filter(tenant: str, where: Node | None) -> Any:
    must: list[Any] = [q.FieldCondition("tenant", match=q.MatchValue(tenant))]
    if where is not None:
        must.append(to_condition(where))
    return q.Filter(must=must)
