"""Translation of the ``where`` AST to a Qdrant filter, in Qdrant's JSON form.

The one translation both Qdrant providers use. It builds plain dicts in the
shape of Qdrant's REST API filter (``{"must": [...], "should": [...],
"must_not": [...]}``, conditions ``{"key": k, "match": {"value": v}}``,
``{"match": {"any": [...]}}`` and ``{"range": {"gte": x}}``): ``qdrant-client``
validates that straight into its models, and the Edge provider converts it to
the Edge binding's classes (:mod:`ragline.providers.stores.qdrant_edge.translate`).
So the semantics below live in one place:

* numeric equality is a closed range, because ``MatchValue`` has no float form
  and would not match ``3.0`` against ``3``;
* negations are ``must_not``, which (like the reference in
  :mod:`ragline.core.filter_eval`) also matches points where the field is missing;
* the Edge binding turns a Python ``True`` in ``MatchValue`` into the integer
  1 (measured: it matched ``1`` and not ``true``), so booleans are also stored
  as ``"true"``/``"false"`` keywords under ``bools.<field>`` and matched there
  (by both providers: one payload layout, one translation).
"""

from __future__ import annotations

import re
from typing import Any

from ragline.core.filters import And, Eq, In, Node, Not, Or, Range
from ragline.core.tenancy import TenantScope, tenants_of
from ragline.errors import FilterError

META = "metadata"
BOOLS = "bools"
TENANT = "tenant"

JsonFilter = dict[str, Any]


_RAW_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def key_segment(field: str) -> str:
    """``field`` as one JSON-path segment: quoted unless plainly safe (issue 10).

    Unquoted, ``og:title`` is a path syntax error and ``a.b`` a nested path that
    never matches; quoted (``"og:title"``) Qdrant reads any key without a double
    quote or backslash, which :func:`ragline.core.filters.key_problem` refuses
    before anything is written. Plain keys stay unquoted so existing payload
    indexes keep their exact paths.
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


def _eq(field: str, value: Any) -> JsonFilter:
    if isinstance(value, bool):
        return {"key": bool_path(field), "match": {"value": bool_token(value)}}
    if isinstance(value, str):
        return {"key": field_path(field), "match": {"value": value}}
    v = float(value)
    return {"key": field_path(field), "range": {"gte": v, "lte": v}}


def _in(node: In) -> JsonFilter:
    strings = [v for v in node.values if isinstance(v, str)]
    others = [v for v in node.values if not isinstance(v, str)]
    conds: list[JsonFilter] = []
    if strings:
        conds.append({"key": field_path(node.field), "match": {"any": strings}})
    conds.extend(_eq(node.field, v) for v in others)
    return conds[0] if len(conds) == 1 else {"should": conds}


def to_condition(node: Node) -> JsonFilter:
    if isinstance(node, Eq):
        return _eq(node.field, node.value)
    if isinstance(node, In):
        return _in(node)
    if isinstance(node, Range):
        return {"key": field_path(node.field), "range": {node.op[1:]: node.value}}
    if isinstance(node, Not):
        return {"must_not": [to_condition(node.child)]}
    if isinstance(node, And):
        return {"must": [to_condition(c) for c in node.children]}
    if isinstance(node, Or):
        return {"should": [to_condition(c) for c in node.children]}
    raise TypeError(f"unknown filter node {node!r}")


def tenant_condition(scope: TenantScope) -> JsonFilter:
    """``tenant = t``, or ``tenant in (...)`` for a scope of several (core/tenancy.py)."""
    tenants = tenants_of(scope)
    if len(tenants) == 1:
        return {"key": TENANT, "match": {"value": tenants[0]}}
    return {"key": TENANT, "match": {"any": list(tenants)}}


def tenant_filter(tenant: TenantScope, where: Node | None) -> JsonFilter:
    """The tenant condition every request carries, ANDed with the ``where`` filter."""
    must: list[JsonFilter] = [tenant_condition(tenant)]
    if where is not None:
        must.append(to_condition(where))
    return {"must": must}


def point_payload(doc_id: str, text: str, tenant: str, metadata: dict[str, Any],
                  norm: float) -> dict[str, Any]:
    """The payload of a point: one layout for both providers (``norm`` restores the
    original vector, which cosine collections store normalised). ``bools`` only when
    there are booleans: an absent field matches filters as an empty one does, and the
    Edge binding converts each payload object at ~5 us (a fifth of a bulk write's
    payload cost went on empty ``bools`` objects)."""
    payload = {"doc_id": doc_id, "text": text, TENANT: tenant, META: metadata, "norm": norm}
    shadow = bool_shadow(metadata)
    if shadow:
        payload[BOOLS] = shadow
    return payload
