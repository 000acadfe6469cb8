"""Qdrant Edge's side of the shared filter translation.

The semantics are in :mod:`ragline.providers.stores.qdrant_common.filters`,
which builds Qdrant's JSON filter form; this module turns that form into the
Edge binding's classes (which accept no dicts).
"""

from __future__ import annotations

from typing import Any

import qdrant_edge as q

from ragline.core.filters import Node
from ragline.core.tenancy import TenantScope
from ragline.providers.stores.qdrant_common import filters as common
from ragline.providers.stores.qdrant_common.filters import (  # noqa: F401 (re-exported)
    bool_path,
    bool_shadow,
    field_path,
)


def to_edge(f: dict[str, Any]) -> Any:
    """One JSON filter or condition as Edge objects."""
    if "key" in f:
        if "range" in f:
            return q.FieldCondition(f["key"], range=q.RangeFloat(**f["range"]))
        match = f["match"]
        if "any" in match:
            return q.FieldCondition(f["key"], match=q.MatchAny(match["any"]))
        return q.FieldCondition(f["key"], match=q.MatchValue(match["value"]))
    must, should, must_not = ([to_edge(c) for c in f[part]] if part in f else None
                              for part in ("must", "should", "must_not"))
    return q.Filter(must=must, should=should, must_not=must_not)


def tenant_filter(tenant: TenantScope, where: Node | None) -> Any:
    return to_edge(common.tenant_filter(tenant, where))


def scoped_filter(tenant: TenantScope, where: Node | None, alone: bool) -> Any:
    """:func:`tenant_filter`, or ``where`` alone (None without one) when every point of
    the shard is of ``tenant``'s tenants (``alone``): the two select the same points then."""
    if not alone:
        return tenant_filter(tenant, where)
    return None if where is None else to_edge({"must": [common.to_condition(where)]})
